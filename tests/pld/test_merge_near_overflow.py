"""The merge-to-the-grid lower construction on grids that reach past ``e^709`` (the largest finite likelihood
ratio): a Laplace step of loss range 700 on a coarse mesh. The sweep used to meet infinite ratios there, warn of
an overflow and drop the mass above (lower end 0 at epsilon 680 on the mesh 15); it now lowers that mass to the
last finite grid point. Checked against the pair's closed-form delta."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
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


@pytest.mark.parametrize("r,h", [(700.0, 7.0), (700.0, 15.0), (700.0, 30.0), (690.0, 15.0)])
def test_lower_pair_below_the_exact_curve_without_overflow(r, h):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        low = dominated(LaplaceLoss(r=r), h, 1e-12)
    losses = (low.start + np.arange(low.pmf.size)) * h + low.shift
    for eps in (650.0, 680.0, 689.0, 695.0):
        lower = float(np.sum(low.pmf * -np.expm1(np.minimum(eps - losses, 0.0))))
        assert lower <= _exact_delta(r, eps) * (1 + 1e-9) + 1e-300
    if (r, h) == (700.0, 15.0):  # the mass above e^709 is kept (lowered), not dropped
        eps = 680.0
        assert float(np.sum(low.pmf * -np.expm1(np.minimum(eps - losses, 0.0)))) > 0.9
