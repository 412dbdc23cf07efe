"""Adaptive composition of bounded-range mechanisms: both ends of the dynamic program against the adaptive
optimum computed independently (two and three steps: nested suprema over fine grids of t, with the closed-form
one-step curve ``bounded_range_delta`` at the leaves), against the best non-adaptive composition, and the
default accuracy on a long composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp.mechanisms._bounded_range_adaptive import adaptive_bounded_range_epsilon
from tightdp.mechanisms._bounded_range_blocks import BoundedRangeBlock
from tightdp.mechanisms.basic import Gaussian
from tightdp.mechanisms.selection import BoundedRange, ExponentialMechanism, bounded_range_delta
from tightdp.tuning import selection_epsilon

_T = np.linspace(0.0, 1.0, 4001)


def _p(eps0: float, t: np.ndarray) -> np.ndarray:
    return np.exp((1.0 - t) * eps0) * np.expm1(t * eps0) / math.expm1(eps0)


def _one_step(eps0: float, x: np.ndarray) -> np.ndarray:
    """V_1(x) = the largest delta(-x) of one eps0-BR pair: Dong, Durfee & Rogers 2020, Thm 3, vectorised (checked
    against ``bounded_range_delta`` in ``test_vectorised_one_step_curve``)."""
    big, a = math.exp(eps0), np.exp(np.clip(-x, -700.0, 700.0))
    mid_hi = (math.sqrt(big) - np.sqrt(a)) ** 2 / math.expm1(eps0)
    mid_lo = 1.0 - a + (np.sqrt(a * big) - 1.0) ** 2 / math.expm1(eps0)
    return np.where(a >= big, 0.0, np.where(a >= 1.0, mid_hi, np.where(a <= 1.0 / big, 1.0 - a, mid_lo)))


def test_vectorised_one_step_curve():
    for eps0 in (0.05, 0.7, 3.0):
        x = np.linspace(-1.2 * eps0, 1.2 * eps0, 97)
        ref = np.array([bounded_range_delta(eps0, -v) for v in x])
        assert np.allclose(_one_step(eps0, x), ref, rtol=1e-12, atol=1e-15)


def _adaptive_delta(eps0: float, steps: int, eps: float) -> float:
    """sup over adaptive strategies of delta(eps), by nested suprema over the grid of t (a lower estimate of the
    optimum that misses it by far less than the tolerances used here: the objective is smooth in t)."""
    p = _p(eps0, _T)

    def value(m: int, x: np.ndarray) -> np.ndarray:
        if m == 1:
            return _one_step(eps0, x)
        up = value(m - 1, x[..., None] + (1.0 - _T) * eps0)
        down = value(m - 1, x[..., None] - _T * eps0)
        return np.max(p * up + (1.0 - p) * down, axis=-1)

    if steps == 3:  # a coarser outer grid keeps the nested evaluation small
        t = np.linspace(0.0, 1.0, 801)
        pt = _p(eps0, t)
        x = np.array([-eps])
        up = value(2, x[:, None] + (1.0 - t) * eps0)
        down = value(2, x[:, None] - t * eps0)
        return float(np.max(pt * up + (1.0 - pt) * down))
    return float(value(steps, np.array([-eps]))[0])


@settings(max_examples=scaled(6), deadline=None)
@given(eps0=st.floats(0.05, 3.0), delta=st.sampled_from([1e-2, 1e-4, 1e-6, 1e-9]))
def test_two_adaptive_steps_against_the_adaptive_optimum(eps0, delta):
    b = adaptive_bounded_range_epsilon(eps0, 2, delta, attained=True)
    assert b is not None and 0.0 <= b.lower <= b.upper
    # the upper end: the optimum's delta there is at most delta
    assert _adaptive_delta(eps0, 2, b.upper) <= delta * (1.0 + 1e-6)
    # the lower end: an attained strategy's delta there exceeds delta (the grid optimum is below the true one)
    if b.lower > 0:
        assert _adaptive_delta(eps0, 2, b.lower) >= delta * (1.0 - 1e-6)


@pytest.mark.parametrize(("eps0", "delta"), [(0.3, 1e-3), (1.0, 1e-6), (2.0, 1e-5)])
def test_three_adaptive_steps_against_the_adaptive_optimum(eps0, delta):
    b = adaptive_bounded_range_epsilon(eps0, 3, delta, attained=True)
    assert b is not None and 0.0 < b.lower <= b.upper
    assert _adaptive_delta(eps0, 3, b.upper) <= delta * (1.0 + 1e-5)
    assert _adaptive_delta(eps0, 3, b.lower) >= delta * (1.0 - 1e-5)
    assert b.upper - b.lower <= 2e-3 * b.upper


def test_adaptivity_costs_more_than_the_best_fixed_pair():
    """Dong, Durfee & Rogers 2020: adaptively chosen exponential mechanisms lose more than any fixed choice. The
    program's attained lower end lies above the best non-adaptive composition of the attained pairs, and its
    upper end far below the composed dominating pair (the Renyi bound)."""
    mech = ExponentialMechanism(epsilon=0.1)
    b = selection_epsilon(mechanism=mech, delta=1e-6, count=300)
    fixed = max(float(selection_epsilon(mechanism=pair, delta=1e-6, count=300).lower) for pair in mech.attained_pairs())
    assert "adaptive" in b.details["lower_method"] and "dynamic program" in b.details["upper_method"]
    assert fixed < b.lower <= b.upper <= b.lower * (1 + 2e-3)
    generic = selection_epsilon(mechanism=BoundedRange(epsilon=0.1), delta=1e-6, count=300)
    assert generic.upper == b.upper and generic.lower == 0.0  # no attained pair for a generic BR mechanism


def test_accountant_groups_the_family_in_a_mixed_ledger():
    """A ledger of exponential mechanisms around Gaussian steps: the accountant composes the 600 selections as
    one block pair of their program, far below the per-step dominating pairs, and its lower end (fixed attained
    pairs, Gaussian included) stays below."""
    acc = ConnectDotsAccountant()
    acc.compose(ExponentialMechanism(epsilon=0.1), 300).compose(Gaussian(noise_multiplier=8.0), 50)
    acc.compose(ExponentialMechanism(epsilon=0.1), 300)
    b = acc.epsilon(1e-6)
    assert "600 adaptive" in b.details["adaptive_group"]
    assert b.lower <= b.upper < b.details["per_step_pairs_upper"] - 0.2
    per_step = ConnectDotsAccountant().compose(BoundedRange(epsilon=0.1), 600)
    per_step.compose(Gaussian(noise_multiplier=8.0), 50)
    assert b.upper <= per_step.epsilon(1e-6).upper


def test_finite_candidates_keep_the_non_adaptive_lower_end():
    """With n candidates only the pairs T_(m/n) are known attained: the lower end stays the fixed pair's."""
    b = selection_epsilon(mechanism=ExponentialMechanism(epsilon=0.5, num_candidates=4), delta=1e-6, count=40)
    assert b.details["lower_method"].startswith("attained pair")
    assert "dynamic program" in b.details["upper_method"] and b.lower <= b.upper


@pytest.mark.parametrize(("eps0", "steps"), [(0.4, 2), (1.5, 2), (0.8, 3)])
def test_block_pair_dominates_the_adaptive_optimum(eps0, steps):
    """The block pair's curve (its loss composed once) lies above the independent adaptive optimum at every
    epsilon tried, in both signs (the remove and the add direction share it)."""
    acc = ConnectDotsAccountant().compose(BoundedRangeBlock(epsilon=eps0, steps=steps), 1)
    for eps in np.linspace(0.0, 0.95 * steps * eps0, 9):
        truth = _adaptive_delta(eps0, steps, float(eps))
        assert float(acc.delta(float(eps)).upper) >= truth * (1.0 - 1e-6) - 1e-12, eps


def test_blocks_carry_long_compositions():
    """10 000 exponential mechanisms at 0.1: too long for one program; blocks of the program's hull give an upper
    end far below the Renyi bound (37.44) and within the default accuracy of the attained lower end."""
    b = selection_epsilon(mechanism=ExponentialMechanism(epsilon=0.1), delta=1e-6, count=10000)
    assert "blocks of their program" in b.details["upper_method"]
    assert b.lower <= b.upper <= 35.7 and b.upper - b.lower <= 3e-3 * b.upper


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0, "count": 5, "delta": 1e-6}, "epsilon"),
        ({"epsilon": 0.1, "count": 1, "delta": 1e-6}, "count"),
        ({"epsilon": 0.1, "count": 5, "delta": 1.0}, "delta"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        adaptive_bounded_range_epsilon(kwargs["epsilon"], kwargs["count"], kwargs["delta"], attained=True)


@pytest.mark.parametrize("eps0", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-6])
def test_single_use_is_exact_from_the_closed_form(eps0, delta):
    """One exponential mechanism: both ends bracket the epsilon where the envelope's closed form reaches delta,
    which the pair T_t at the maximising t attains (Dong, Durfee & Rogers 2020, Thm 3)."""
    b = selection_epsilon(mechanism=ExponentialMechanism(epsilon=eps0), delta=delta, count=1)
    assert bounded_range_delta(eps0, b.lower) >= delta >= bounded_range_delta(eps0, b.upper)
    assert b.upper - b.lower <= 1e-8 * eps0
    t = math.log(math.sqrt(math.exp(eps0) / math.exp(b.lower))) / eps0  # the maximiser, an attained pair
    p = _p(eps0, np.array([t]))[0]
    attained = p * max(0.0, 1 - math.exp(b.lower - (1 - t) * eps0)) + (1 - p) * max(
        0.0, 1 - math.exp(b.lower + t * eps0)
    )
    assert attained >= delta * (1 - 1e-9)
