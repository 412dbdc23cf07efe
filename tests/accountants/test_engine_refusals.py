"""The engine refuses with a reason instead of answering from nothing: NaN in root finding, empty queries."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tightdp import Gaussian, PoissonSampled
from tightdp._numerics import falling_root
from tightdp.accountants.base import ACCOUNTANTS


def test_falling_root_refuses_nan():
    with pytest.raises(ArithmeticError, match="NaN"):
        falling_root(lambda x: math.nan if 0.3 < x < 0.7 else 0.5 - x, 0.0, 1.0, xtol=1e-12)
    with pytest.raises(ArithmeticError, match="NaN"):
        falling_root(lambda x: math.nan, 0.0, 1.0, xtol=1e-12)
    # a clean function still gives the point on the safe side of its root
    r = falling_root(lambda x: 0.25 - x, 0.0, 1.0, xtol=1e-12)
    assert 0.25 <= r <= 0.25 + 2e-12


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
def test_every_accountant_answers_an_empty_query_alike(name):
    acc = ACCOUNTANTS[name]().compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01), 10)
    for eps in ([], np.array([])):
        b = acc.delta(eps)
        assert np.shape(b.lower) == np.shape(b.upper) == np.shape(b.estimate) == (0,)
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon([])  # epsilon takes one delta: an empty list is refused, naming the argument


class _FloorOnly:
    """A composed PLD that only carries the three terms the upper end's refusal compares."""

    def __init__(self, p_inf: float, tv: float):
        self.infinity_mass, self.tv_error = p_inf, tv
        self.truncated_mass, self.low_factor = 0.0, 1.0

    def coupling_shift(self, eta):
        return 0.0


@pytest.mark.parametrize(
    "p_inf, eta, tv, named",
    [
        (4.4e-11, 1e-300, 7e-6, "tv_error"),
        (2e-6, 1e-9, 1e-12, "infinite privacy loss"),
        (0.0, 2e-6, 1e-12, "error budget"),
    ],
)
def test_refusal_names_the_term_that_caused_it(p_inf, eta, tv, named):
    """delta not above the floor: the note names the largest of the three terms, with its value."""
    from tightdp.pld.curve import epsilon_bounds

    out = epsilon_bounds(_FloorOnly(p_inf, tv), 1e-6, eta, need="upper")
    assert out.upper == math.inf and named in out.note.split(";")[0]  # the cause, before the list of terms
    assert f"({max(p_inf, eta, tv):.3g})" in out.note.split(";")[0]
