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
