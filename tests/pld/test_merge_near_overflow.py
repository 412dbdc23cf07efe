"""The merge-to-the-grid lower construction on grids that reach past ``e^709`` (the largest finite likelihood
ratio): a Laplace step of loss range near 700 on a coarse mesh. The sweep used to meet infinite ratios there, warn
of an overflow and drop the mass above (lower end 0 at epsilon 680 on the mesh 15); it now lowers that mass to the
last finite grid point. Checked against the pair's closed-form delta, at random ranges, meshes and epsilons."""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate

from tightdp.losses import LaplaceLoss
from tightdp.pld.dominance import dominated


def _exact_delta(r: float, eps: float) -> float:
    """``E_P[(1 - e^(eps - Y))_+]`` for the Laplace pair: ``Y = r`` w.p. 1/2, density ``e^(-(r - s)/2) / 4`` on
    ``(-r, r)`` (and ``-r`` w.p. ``e^(-r)/2``, below any eps here)."""
    if eps >= r:
        return 0.0
    cont = integrate.quad(lambda s: -math.expm1(eps - s) * math.exp(-(r - s) / 2) / 4, eps, r, epsabs=1e-14)[0]
    return 0.5 * -math.expm1(eps - r) + cont


def _lower_delta(r: float, h: float, eps: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        low = dominated(LaplaceLoss(r=r), h, 1e-12)
    losses = (low.start + np.arange(low.pmf.size)) * h + low.shift
    return float(np.sum(low.pmf * -np.expm1(np.minimum(eps - losses, 0.0))))


@settings(max_examples=30, deadline=None)
@given(r=st.floats(600.0, 700.0), h=st.floats(2.0, 40.0), back=st.floats(0.5, 60.0))
@example(r=700.0, h=15.0, back=20.0)
@example(r=690.0, h=30.0, back=1.0)
def test_lower_pair_below_the_exact_curve_without_overflow(r, h, back):
    eps = r - back
    assert _lower_delta(r, h, eps) <= _exact_delta(r, eps) * (1 + 1e-9) + 1e-300


def test_the_mass_past_the_largest_ratio_is_kept():
    """Range 700, mesh 15, epsilon 680: 0.959 of the true 0.99995 (the old sweep dropped it: 0)."""
    assert _lower_delta(700.0, 15.0, 680.0) > 0.9


@settings(max_examples=30, deadline=None)
@given(start=st.floats(600.0, 30000.0), h=st.floats(0.5, 40.0), cells=st.integers(1, 6), zero=st.booleans())
def test_cells_past_the_largest_ratio_split_without_overflow(start, h, cells, zero):
    """The connect-the-dots split of cells past ``e^700`` (compositions with losses in the thousands reach them):
    ``alpha = e^(s - e)`` overflowed and ``alpha Q`` was ``inf * 0``, NaN masses with RuntimeWarnings. Now ``alpha Q``
    is taken in logs there. Against the exact split in 50 digits: the masses are kept and moved up, never down
    (every tail sum from the top at least the exact one)."""
    import mpmath

    from tightdp.pld.dominance import split_cells

    s = start + h * np.arange(cells + 1)
    P = np.full(cells, 1e-3)
    Q = np.zeros(cells) if zero else P * np.exp(-(s[:-1] + 0.5 * h))  # a loss mid-cell (0 where it underflows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        d = split_cells(h, s, P, Q, 1e-15, 0.0, 0.0, 0.0, 0.0, 0, 0.0, 0.0)
    assert np.all(np.isfinite(d.pmf)) and math.isclose(d.pmf.sum(), P.sum(), rel_tol=1e-12)
    mpmath.mp.dps = 50
    exact = [mpmath.mpf(0)] * (cells + 1)
    for i in range(cells):
        aq = mpmath.mpf(0) if Q[i] == 0 else mpmath.exp(mpmath.mpf(s[i]) + mpmath.log(mpmath.mpf(Q[i])))
        up = min(max((mpmath.mpf(P[i]) - aq) / (1 - mpmath.exp(-mpmath.mpf(h))), 0), mpmath.mpf(P[i]))
        exact[i + 1] += up
        exact[i] += mpmath.mpf(P[i]) - up
    for j in range(cells + 1):
        assert float(np.sum(d.pmf[j:])) >= float(sum(exact[j:])) * (1 - 1e-12)
