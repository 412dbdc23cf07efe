"""The bracketing root finder behind every epsilon (``tightdp._numerics.falling_root``): its answer is a point
where the condition was evaluated and holds (the safe side for an upper bound), within its tolerance of the
crossing, in few evaluations, for the shapes the accountants solve (a cell's ``A - B e^(x - r)``, flat
stretches, kinks, steep exponentials)."""

from __future__ import annotations

import math

from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp._numerics import falling_root

_U = 2.0**-53


def _crossing(g, lo, hi):
    """The crossing by plain bisection down to adjacent floats (the reference)."""
    while math.nextafter(lo, math.inf) < hi:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if g(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return hi


@settings(max_examples=scaled(200), deadline=None)
@given(
    st.floats(-50.0, 50.0),
    st.floats(1e-6, 2.0),
    st.floats(0.01, 0.99),
    st.floats(1e-300, 1e3),
    st.sampled_from(["exp", "kink", "flat", "cubic"]),
)
def test_answer_holds_and_is_within_tolerance(lo, width, where, scale, shape):
    hi = lo + width
    root = lo + where * width
    if shape == "exp":  # a cell of delta_disc: A - B e^(x - r), B > 0
        g = lambda x: scale * (1.0 - math.exp(x - root))
    elif shape == "kink":
        g = lambda x: scale * ((root - x) if x < root else 1e-3 * (root - x))
    elif shape == "flat":  # nearly flat above the crossing
        g = lambda x: scale * (root - x) ** 3 if x < root else -1e-12 * scale * (x - root)
    else:
        g = lambda x: scale * (root - x) ** 3
    if not (g(lo) > 0 >= g(hi)):
        return
    calls = []
    x = falling_root(lambda t: calls.append(t) or g(t), lo, hi, xtol=1e-13)
    assert lo < x <= hi
    assert g(x) <= 0
    ref = _crossing(g, lo, hi)
    assert x - ref <= 1e-13 + 4 * _U * abs(x) + 4 * math.ulp(x)
    # a simple crossing in a handful; a triple root (cubic) or a flat stretch takes Brent's bisections
    assert len(calls) <= (40 if shape in ("exp", "kink") else 200)


def test_few_evaluations_on_a_smooth_cell():
    calls = []
    g = lambda x: 0.3 - 0.7 * math.exp(x - 1.2)
    x = falling_root(lambda t: calls.append(t) or g(t), 0.0, 1.2, xtol=1e-13)
    assert g(x) <= 0 and x - (1.2 + math.log(0.3 / 0.7)) <= 1e-12
    assert len(calls) <= 15


def test_never_gives_up_without_the_tolerance():
    """With too few Brent steps allowed, bisection still closes the bracket to the tolerance."""
    g = lambda x: (0.3 - x) ** 3
    x = falling_root(g, 0.0, 1.0, xtol=1e-13, max_iter=3)
    assert g(x) <= 0 and x - 0.3 <= 1e-13 + 4 * _U


def test_coarse_tolerance_stops_early():
    calls = []
    x = falling_root(lambda t: calls.append(t) or 2.0 - t * t, 0.0, 4.0, xtol=1e-4, rtol=1e-4)
    assert 0.0 <= x - math.sqrt(2.0) <= 1e-4 + 1e-4 * x
    assert len(calls) <= 12
