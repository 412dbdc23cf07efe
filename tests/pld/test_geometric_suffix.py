"""``tightdp._numerics.geometric_suffix``: ``S_j = sum_(i >= j) a_i r^(i - j)`` against a direct sum in exact rational
arithmetic, and the underflowed ratio of a very coarse mesh (pure DP at epsilon 500: ``r = e^-1000`` is 0 in floats,
where ``log(r)`` used to raise a bare ``math domain error``)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp._numerics import geometric_suffix
from tightdp.mechanisms import PureDP


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=40),
    r=st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-300, 1.0)),
)
def test_against_exact_sums(a, r):
    got = geometric_suffix(np.array(a), r)
    fr = Fraction(r)
    for j in range(len(a)):
        exact = sum(Fraction(a[i]) * fr ** (i - j) for i in range(j, len(a)))
        assert abs(Fraction(float(got[j])) - exact) <= (len(a) + 4) * 2.0**-53 * exact + Fraction(1, 10**300)


def test_pure_dp_at_a_mesh_whose_ratio_underflows():
    for count in (1, 2, 10):
        b = ConnectDotsAccountant().compose(PureDP(epsilon=500.0), count).epsilon(1e-6)
        # delta(eps) = p (1 - e^(eps - 500 k)) near the top atom: epsilon is 500 k less about 1e-6
        assert 500.0 * count - 1e-5 <= b.lower <= b.upper <= 500.0 * count + 1e-9
