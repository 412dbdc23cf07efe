"""The discrete Gaussian composed on its loss lattice for 50 < sigma <= 200 (spacing Delta / sigma^2 >= 1/2500).

There every atom of the loss is a grid point and both dominance constructions are the exact composition, up to
rounding and the window's tails, so the certified interval is narrow. The reference is exact up to float
rounding: the loss ``(2 Delta x - Delta^2) / (2 sigma^2)`` is linear in the output, so ``k`` compositions are
decided by the sum ``T`` of the ``k`` outputs (a sufficient statistic: the likelihood ratio is a function of
``T``, and the hockey-stick divergence of ``T``'s laws is the composition's). ``T``'s law is the ``k``-fold
convolution of the discrete Gaussian (non-negative terms: relative error about ``k n u``), shifted by
``k Delta`` under P.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tightdp import ConnectDotsAccountant
from tightdp.mechanisms.discrete import DiscreteGaussian, DiscreteGaussianLoss

_SLACK = 1e-9  # relative, in delta: the float64 reference's rounding is far below


def _sum_law(sigma: float, k: int) -> tuple[int, np.ndarray]:
    """``(lo, pmf)``: the law of a sum of ``k`` independent ``N_Z(0, sigma^2)`` on ``lo, lo + 1, ...`` (every
    output within 14 standard deviations of each term: the mass left out is below 1e-40)."""
    m = math.ceil(14.0 * sigma) + 2
    x = np.arange(-m, m + 1, dtype=float)
    w = np.exp(-x * x / (2.0 * sigma * sigma))
    base = w / math.fsum(w.tolist())
    lo, law = -m, base
    for _ in range(k - 1):
        lo, law = lo - m, np.convolve(law, base)
    return lo, law


def _delta_exact(sigma: float, d: int, k: int, eps: float) -> float:
    """``delta(eps)`` of ``k`` compositions of the pair ``N_Z(d, sigma^2)`` against ``N_Z(0, sigma^2)``."""
    lo, law = _sum_law(sigma, k)
    t = lo + k * d + np.arange(law.size, dtype=float)  # T under P: the sum shifted by k d
    loss = (2.0 * d * t - k * d * d) / (2.0 * sigma * sigma)
    above = loss > eps
    return math.fsum((law[above] * -np.expm1(eps - loss[above])).tolist())


@pytest.mark.parametrize(
    ("sigma", "d", "k", "delta"),
    [(200.0, 150, 2, 1e-6), (200.0, 17, 3, 1e-3), (120.0, 40, 4, 1e-8), (60.0, 3, 6, 1e-5)],
)
def test_lattice_interval_contains_the_exact_composition_and_is_narrow(sigma, d, k, delta):
    assert DiscreteGaussianLoss(sigma, d).lattice_atoms()  # the route under test
    b = ConnectDotsAccountant().compose(DiscreteGaussian(sigma=sigma, sensitivity=d), k).epsilon(delta)
    assert _delta_exact(sigma, d, k, b.upper) <= delta * (1.0 + _SLACK), b
    assert _delta_exact(sigma, d, k, b.lower) >= delta * (1.0 - _SLACK), b
    # exact up to the delta slack and rounding: far inside the default accuracy (2e-3 relative)
    assert b.upper - b.lower <= 1e-4 * b.upper + 1e-6, b


def test_lattice_is_declared_where_it_is_at_least_as_coarse_as_sigma_fifty_delta_one():
    assert DiscreteGaussianLoss(50.0, 1).lattice_atoms()  # sigma <= 50: always (spacing >= 1 / 2500)
    assert DiscreteGaussianLoss(200.0, 16).lattice_atoms()  # spacing 16 / 40000 = 1 / 2500
    assert not DiscreteGaussianLoss(200.0, 15).lattice_atoms()  # a denser lattice: near-continuous
    assert not DiscreteGaussianLoss(201.0, 150).lattice_atoms()  # beyond sigma 200
    assert not DiscreteGaussianLoss(100.0, 4, q=0.5).lattice_atoms()  # subsampled: not on a lattice


def test_lattice_route_agrees_with_the_mesh_route(monkeypatch):
    """The benchmark's setting (k = 100): the exact route's interval and the one a mesh of the variance model
    gives (the lattice not declared) are both certified, so they meet; the exact one is 100 times narrower."""
    from tightdp.mechanisms import _discrete_losses

    mech = DiscreteGaussian(sigma=200.0, sensitivity=150)
    fine = ConnectDotsAccountant().compose(mech, 100).epsilon(1e-6)
    monkeypatch.setattr(_discrete_losses, "_LATTICE_SIGMA", 50.0)
    assert not DiscreteGaussianLoss(200.0, 150).lattice_atoms()
    coarse = ConnectDotsAccountant().compose(mech, 100).epsilon(1e-6)
    assert max(fine.lower, coarse.lower) <= min(fine.upper, coarse.upper), (fine, coarse)
    assert fine.upper - fine.lower <= 0.02 * (coarse.upper - coarse.lower), (fine, coarse)


def test_lattice_too_fine_for_many_steps_gives_way_to_the_mesh():
    """k = 10 000 at sigma 200, Delta 150: the lattice's window would hold about 260 000 points; the atoms go into
    the cells of a mesh of the variance model's instead (the interval within the default accuracy), and
    sigma <= 50 always keeps its lattice."""
    loss = DiscreteGaussianLoss(200.0, 150)
    assert loss.without_lattice() is not None and not loss.without_lattice().lattice_atoms()
    assert DiscreteGaussianLoss(50.0, 1).without_lattice() is None
    b = ConnectDotsAccountant().compose(DiscreteGaussian(sigma=200.0, sensitivity=150), 10_000).epsilon(1e-6)
    assert b.details["mesh"] > 2.0 * 150 / 200.0**2, b.details
    assert b.upper - b.lower <= 2e-3 * b.upper, b
