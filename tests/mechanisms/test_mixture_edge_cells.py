"""Group-Poisson mixtures through the edge-integrated cells (``_EdgeCells``): answers against an independent mpmath
computation of one step's delta, and cell masses against mpmath integrals within their charged errors."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import tightdp as td
from tightdp.accountants import FourierAccountant, PRVAccountant

SIGMA, RATE, GROUP = 8.000588746191111, 0.8755426667345614, 31
EPS = (0.0, 1.0, 3.0)


def _reference_delta(eps: float) -> float:
    """max over the two directions of ``int (p - e^eps q)_+`` with the exact binomial weights (mpmath, 40 digits):
    the loss is increasing, so the integral is ``P(X > x*) - e^eps Q(X > x*)`` at the root ``L(x*) = eps``."""
    mpmath.mp.dps = 40
    s, q = mpmath.mpf(SIGMA), mpmath.mpf(RATE)
    w = [mpmath.binomial(GROUP, i) * q**i * (1 - q) ** (GROUP - i) for i in range(GROUP + 1)]

    def sf(z: mpmath.mpf) -> mpmath.mpf:
        return mpmath.erfc(z / mpmath.sqrt(2)) / 2

    def mix(x: mpmath.mpf, sign: int) -> mpmath.mpf:  # density ratio sum_i w_i N(sign i) / N(0)
        return mpmath.fsum(wi * mpmath.exp((2 * sign * i * x - i * i) / (2 * s * s)) for i, wi in enumerate(w))

    e = mpmath.e ** mpmath.mpf(eps)
    # remove: P = sum w_i N(i), Q = N(0), L(x) = log mix(x, +1)
    xr = mpmath.findroot(lambda x: mpmath.log(mix(x, 1)) - eps, 20)
    d_rem = mpmath.fsum(wi * sf((xr - i) / s) for i, wi in enumerate(w)) - e * sf(xr / s)
    # add (reflected): P = N(0), Q = sum w_i N(-i), L(x) = -log mix(x, -1)
    xa = mpmath.findroot(lambda x: -mpmath.log(mix(x, -1)) - eps, 20)
    d_add = sf(xa / s) - e * mpmath.fsum(wi * sf((xa + i) / s) for i, wi in enumerate(w))
    return float(max(d_rem, d_add))


def test_group_poisson_delta_brackets_the_mpmath_reference():
    mech = td.GroupPoissonSampled(noise_multiplier=SIGMA, sampling_rate=RATE, group_size=GROUP)
    eps = np.array(EPS)
    ref = np.array([_reference_delta(e) for e in EPS])
    fa = FourierAccountant(n=200_000).compose(mech).delta(eps)
    prv = PRVAccountant().compose(mech).delta(eps)
    for b in (fa, prv):
        assert np.all(b.lower <= ref) and np.all(ref <= b.upper), (b, ref)
    assert np.all(np.maximum(fa.lower, prv.lower) <= np.minimum(fa.upper, prv.upper))


@pytest.mark.parametrize("direction", [0, 1])
def test_edge_cell_masses_within_their_errors(direction):
    """A fine grid (the edge rule) and its masses against mpmath integrals of the mixture density."""
    loss = td.GroupPoissonSampled(noise_multiplier=SIGMA, sampling_rate=RATE, group_size=GROUP).privacy_losses()[
        direction
    ]
    h = 1e-4
    centre = 20.0 if direction == 0 else 3.0
    edges = centre + h * (np.arange(6001) - 3000.5)
    _below, _above, masses, (rel, l1), err = loss.cell_masses(edges)
    assert err < 1e-12 and rel < 1e-11 and l1 == 0.0
    if direction == 0:  # the outputs cell_masses integrates between (``_ConvexLSE.solve``)
        x = loss._lse.solve(edges)[0]
    else:
        x = -loss._lse.solve(-edges[::-1])[0][::-1]
    mpmath.mp.dps = 30
    a = [mpmath.mpf(v) for v in loss.p_means]
    w = [mpmath.mpf(v) for v in loss.p_weights]
    s = mpmath.mpf(loss.sigma)

    def cdf(t: float) -> mpmath.mpf:
        return mpmath.fsum(wi * mpmath.ncdf((mpmath.mpf(t) - ai) / s) for ai, wi in zip(a, w))

    for i in (0, 1, 1500, 3000, 4500, 5999):
        exact = cdf(x[i + 1]) - cdf(x[i])
        assert abs(float(exact) - masses[i]) <= rel * masses[i] * (1 + 1e-9) + 1e-300, (i, float(exact), masses[i])
