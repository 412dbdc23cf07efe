"""The Poisson-subsampled discrete Laplace composed in exact blocks (``mechanisms._atom_blocks``): certified
intervals against the exact composition in mpmath (30 digits), and the blocks' own atoms against the multinomial law.

The reference collapses each step's outputs by loss value (``Delta + 1`` classes) and composes them exactly, so a
computed ``[lower, upper]`` contains the truth when ``delta_exact(upper) <= delta <= delta_exact(lower)``.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp.accountants._connect_dots_core import _atoms_in_blocks
from tightdp.mechanisms._atom_blocks import FewAtomsLoss, _count_vectors, block_size
from tightdp.mechanisms.discrete import DiscreteLaplace, PoissonSampledDiscrete, discrete_laplace_loss
from tightdp.pld.atoms import atom_lattice

_SLACK = 1e-12


def _classes(a: float, d: int, q: float, direction: str) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """One step's ``(loss, P-mass)`` per loss value, from the laws ``DLap(0)`` and ``DLap(d)`` in mpmath."""
    r = mpmath.exp(-mpmath.mpf(a))
    b = [1 / (1 + r)] + [(1 - r) / (1 + r) * r**x for x in range(1, d)] + [r**d / (1 + r)]  # x <= 0, 1..d-1, >= d
    shifted = b[::-1]  # DLap(d): the mirror image
    q = mpmath.mpf(q)
    out = []
    for pa, pb in zip(shifted, b):
        mix = q * pa + (1 - q) * pb
        p_, q_ = (mix, pb) if direction == "remove" else (pb, mix)
        out.append((mpmath.log(p_ / q_), p_))
    return out


def _composed(classes, k: int) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """The ``k``-fold composition's ``(loss, P-mass)``: one atom per count vector (the multinomial law)."""
    out = []
    for cut in itertools.combinations(range(k + len(classes) - 1), len(classes) - 1):  # stars and bars
        ends = (-1, *cut, k + len(classes) - 1)
        n = [ends[i + 1] - ends[i] - 1 for i in range(len(classes))]
        coef = mpmath.factorial(k) / mpmath.fprod(mpmath.factorial(c) for c in n)
        out.append(
            (
                mpmath.fsum(c * v for c, (v, _) in zip(n, classes)),
                coef * mpmath.fprod(p**c for c, (_, p) in zip(n, classes)),
            )
        )
    return out


def _delta(composed, eps: float) -> mpmath.mpf:
    e = mpmath.mpf(eps)
    return mpmath.fsum(p * (1 - mpmath.exp(e - v)) for v, p in composed if v > e)


@pytest.mark.parametrize(
    ("a", "d", "q", "k", "delta"),
    [(1.0, 3, 0.05, 64, 1e-6), (0.7, 2, 0.2, 81, 1e-3), (1.3, 2, 0.01, 100, 1e-8), (0.5, 2, 0.1, 67, 1e-5)],
)
def test_blocks_contain_the_exact_composition(a, d, q, k, delta):
    inner = DiscreteLaplace(noise_parameter=a, sensitivity=d)
    mech = PoissonSampledDiscrete(mechanism=inner, sampling_rate=q)
    acc = ConnectDotsAccountant().compose(mech, k)
    if atom_lattice(discrete_laplace_loss(noise_parameter=a, delta=d, q=q).values) is None:
        assert all(type(loss).__name__ == "_AtomsBlockLoss" for terms in acc._directions() for loss, _ in terms)
    b = acc.epsilon(delta)
    with mpmath.workdps(30):
        sides = [_composed(_classes(a, d, q, r), k) for r in ("remove", "add")]
        assert max(_delta(s, b.upper) for s in sides) <= delta * (1 + _SLACK), b
        if b.lower > 0.0:
            assert max(_delta(s, b.lower) for s in sides) >= delta * (1 - _SLACK), b
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5) + 1e-9, b


def test_block_atoms_are_the_multinomial_law():
    """A block's atoms: every count vector once, P- and Q-masses the multinomial law (within the block's stated
    relative error of a 30-digit evaluation), losses within its loss error."""
    step = discrete_laplace_loss(noise_parameter=1.0, delta=3, q=0.05, direction="remove")
    assert isinstance(step, FewAtomsLoss)
    (block, blocks), *rest = _atoms_in_blocks([(step, 1000)])
    assert blocks == 50 and not rest and block.count == 20 == block_size(4, 1000)
    n = _count_vectors(4, 20)
    assert n.shape == (math.comb(23, 3), 4) and (n.sum(axis=1) == 20).all() and len({tuple(r) for r in n}) == n.shape[0]
    v, pm, qm = block._arrays[:3]
    rel, l_err = block._arrays[7], block._arrays[8]
    with mpmath.workdps(30):
        exact = {}
        for row in n.tolist():
            coef = mpmath.factorial(20) / mpmath.fprod(mpmath.factorial(c) for c in row)
            pp = coef * mpmath.fprod(mpmath.mpf(p) ** c for p, c in zip(step.probs, row))
            qq = coef * mpmath.fprod(mpmath.mpf(x) ** c for x, c in zip(step.q_probs, row))
            exact[float(mpmath.fsum(mpmath.mpf(x) * c for x, c in zip(step.values, row)))] = (pp, qq)
    assert len(exact) == v.size
    for value, p_, q_ in zip(v.tolist(), pm.tolist(), qm.tolist()):
        pp, qq = exact[min(exact, key=lambda x: abs(x - value))]
        assert abs(p_ - pp) <= rel * pp and abs(q_ - qq) <= rel * qq
    assert l_err >= 20 * step.loss_err and rel >= 20 * step.mass_rel


def test_losses_without_blocks_are_left_as_they_are():
    """Unsampled or two atoms (a lattice, composed exactly as before), or blocks too short: no blocks."""
    lattice = discrete_laplace_loss(noise_parameter=1.0, delta=3)
    assert not isinstance(lattice, FewAtomsLoss) and _atoms_in_blocks([(lattice, 1000)]) == [(lattice, 1000)]
    step = discrete_laplace_loss(noise_parameter=1.0, delta=3, q=0.05)
    assert _atoms_in_blocks([(step, 60)]) == [(step, 60)]  # blocks of 7 steps: not worth it
    two = discrete_laplace_loss(noise_parameter=1.0, delta=1, q=0.05)  # two atoms: a lattice, composed exactly
    assert _atoms_in_blocks([(two, 10**6)]) == [(two, 10**6)]
    # the step's three numbers agree: log(P / Q) is its loss up to the stated errors
    p, qm, v = (np.asarray(x, float) for x in (step.probs, step.q_probs, step.values))
    assert np.all(np.abs(np.log(p / qm) - v) <= 2.0 * step.mass_rel + step.loss_err + 1e-15)


@settings(max_examples=scaled(6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=st.floats(0.2, 3.0),
    q=st.floats(0.005, 0.95),
    k=st.integers(64, 130),
    delta=st.sampled_from([1e-2, 1e-5, 1e-9]),
)
def test_blocks_contain_the_exact_composition_at_random_parameters(a, q, k, delta):
    """Sensitivity 2 (three atoms, on no common lattice for almost every ``a, q``), blocks of 8 to 11 steps."""
    test_blocks_contain_the_exact_composition(a, 2, q, k, delta)
