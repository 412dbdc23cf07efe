"""Dominating discrete privacy loss distributions on the lattice ``h Z`` (per-bucket PLDs of 000 App. D).

For one step of the Poisson-subsampled Gaussian (``tightdp.mechanisms.losses.poisson_gaussian_loss``,
001 Sec. 6.1) we build a discrete pair ``(P~, Q~)`` that *dominates* the true
pair: ``H_alpha(P || Q) <= H_alpha(P~ || Q~)`` for every ``alpha > 0``.
Dominance is preserved by composition (a Markov kernel mapping ``(P~, Q~)`` to
``(P, Q)`` exists by Blackwell's theorem, 000 App. C.6, and products of kernels
map products of pairs), so the FFT composition of these discrete PLDs bounds
the exact heterogeneous composition from above without any coupling shift.

Construction (the "connect-the-dots" pair of Doroshenko et al. 2022, written
cell by cell): with grid values ``s_i = i h`` and ``alpha_i = e^{s_i}``, every
cell ``C_i = {s_i < Y <= s_{i+1}}`` with masses ``P_i = P(C_i)``, ``Q_i = Q(C_i)``
(``e^{s_i} Q_i <= P_i <= e^{s_{i+1}} Q_i``) is replaced by two atoms at ``s_i``
and ``s_{i+1}`` whose P- and Q-masses add up to ``P_i`` and ``Q_i``::

    upper atom b_i = (P_i - alpha_i Q_i) / (1 - e^{-h}),   lower atom a_i = P_i - b_i.

Mass below the lowest grid value becomes an atom there (its Q-surplus goes to
``-inf``), mass above the highest goes to ``+inf``. ``H`` of the result equals
the true ``H`` at every ``alpha_i``, is linear in ``alpha`` in between, and is
``>=`` the true curve everywhere (the true ``H`` is convex in ``alpha``).

Floating point: the cell masses are differences of CDF values (the lower half
from the CDF, the upper half from the survival function, so there is no
cancellation in the tails). ``float_slack`` bounds ``sum_i |p~_i - p_i|``, the
l1 distance between the computed and the exact discrete PLD; a composition of
``k`` such steps is then within ``sum k_b float_slack_b`` of dominating (added
to delta by the caller).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._numerics import logsumexp
from ..mechanisms.losses import GaussianMixtureLoss

__all__ = ["DominatingPLD", "dominated_pld", "dominating_pld", "dominating_pld_core"]

_U = np.finfo(float).eps / 2


@dataclass(frozen=True, eq=False)
class DominatingPLD:
    """Atoms ``pmf[j]`` (P-masses) at loss values ``(start + j) * h + shift``; ``infinity_mass`` at ``+inf``.

    ``float_slack``: l1 distance to the exact discrete PLD it stands for; ``rel_error``: every
    mass is within a factor ``1 +- rel_error`` of it (the core's cell masses, ``tightdp.pld.dominance``);
    ``shift <= 0`` only for a *dominated* (lower-bound) pair, whose losses are lowered by ``-shift``.
    """

    h: float
    start: int
    pmf: np.ndarray
    infinity_mass: float
    float_slack: float
    rel_error: float = 0.0
    shift: float = 0.0

    @property
    def grid(self) -> np.ndarray:
        return (self.start + np.arange(self.pmf.size)) * self.h

    def log_mgf(self, thetas: np.ndarray) -> np.ndarray:
        """``log sum_j pmf_j exp(theta s_j)`` (finite part) at each ``theta`` (memoised per theta vector)."""
        thetas = np.asarray(thetas, float)
        key = thetas.tobytes()
        cache = self.__dict__.setdefault("_mgf_cache", {})
        if key not in cache:
            nz = np.nonzero(self.pmf)[0]
            lp = np.log(self.pmf[nz])
            g = (self.start + nz) * self.h
            out = np.empty(thetas.size)
            step = max(1, (1 << 22) // max(nz.size, 1))  # bounded temporary (theta block x atoms)
            for i in range(0, thetas.size, step):
                th = thetas[i:i + step]
                out[i:i + step] = logsumexp(lp[None, :] + th[:, None] * g[None, :], axis=1) if nz.size \
                    else -np.inf
            cache[key] = out
        return cache[key].copy()

    def moments(self) -> tuple[float, float]:
        """Mean and variance of the finite part (normalised)."""
        m = float(self.pmf.sum())
        if m <= 0:
            return 0.0, 0.0
        g = self.grid
        mean = float(np.dot(self.pmf, g)) / m
        var = float(np.dot(self.pmf, (g - mean) ** 2)) / m
        return mean, var


def _mixture_cdfs(loss: GaussianMixtureLoss, x: np.ndarray):
    """P- and Q-CDF and survival functions at output points ``x`` (plus magnitudes for the error bound)."""
    a = np.asarray(loss.p_means, float)
    w = np.asarray(loss.p_weights, float)
    b = np.asarray(loss.q_means, float)
    v = np.asarray(loss.q_weights, float)
    s = loss.sigma
    za = (x[:, None] - a[None, :]) / s
    zb = (x[:, None] - b[None, :]) / s
    return (special.ndtr(za) @ w, special.ndtr(-za) @ w, special.ndtr(zb) @ v, special.ndtr(-zb) @ v)


def dominating_pld(loss: GaussianMixtureLoss, h: float, *, tail: float = 1e-22) -> DominatingPLD:
    """The dominating discrete PLD of one Gaussian-mixture privacy loss on ``h Z`` (see module doc).

    ``tail`` is the P-mass allowed above the top grid value (it goes to
    ``+inf``, so it is counted in full by every delta computed from the result).
    """
    if not isinstance(loss, GaussianMixtureLoss):
        raise TypeError(f"dominating_pld needs a GaussianMixtureLoss, got {type(loss).__name__}")
    lo_s, hi_s = loss.support()
    s_lo = lo_s if math.isfinite(lo_s) else loss.lower_quantile(tail)
    s_hi = hi_s if math.isfinite(hi_s) else loss.upper_quantile(tail)
    i0 = math.floor(s_lo / h)
    i1 = max(i0 + 1, math.ceil(s_hi / h))
    s = np.arange(i0, i1 + 1) * h
    x, edge_err = loss.outputs_at(s)
    x = np.where(np.isfinite(x), x, 0.0)  # outside the support the CDFs are set below
    Pc, Ps, Qc, Qs = _mixture_cdfs(loss, x)
    tot_p, tot_q = float(np.sum(loss.p_weights)), float(np.sum(loss.q_weights))
    below = s <= lo_s
    above = s >= hi_s
    Pc = np.where(below, 0.0, np.where(above, tot_p, Pc))
    Ps = np.where(below, tot_p, np.where(above, 0.0, Ps))
    Qc = np.where(below, 0.0, np.where(above, tot_q, Qc))
    Qs = np.where(below, tot_q, np.where(above, 0.0, Qs))
    # cell masses, each from the smaller side (no cancellation in the tails)
    use_c = Pc[1:] <= 0.5
    P = np.where(use_c, Pc[1:] - Pc[:-1], Ps[:-1] - Ps[1:])
    magP = np.where(use_c, Pc[1:], Ps[:-1])
    use_cq = Qc[1:] <= 0.5
    Q = np.where(use_cq, Qc[1:] - Qc[:-1], Qs[:-1] - Qs[1:])
    magQ = np.where(use_cq, Qc[1:], Qs[:-1])
    P = np.maximum(P, 0.0)
    Q = np.maximum(Q, 0.0)
    alpha = np.exp(s[:-1])
    den = -math.expm1(-h)
    upper = np.clip((P - alpha * Q) / den, 0.0, P)
    lower = P - upper
    pmf = np.zeros(s.size)
    pmf[1:] += upper
    pmf[:-1] += lower
    pmf[0] += float(Pc[0])  # everything at or below the lowest grid value
    inf_mass = min(1.0, float(Ps[-1]) + loss.infinity_mass)
    # l1 error of the computed atoms: each CDF value has relative error <= 8u (ndtr and
    # the weighted sum), each difference then absolute error <= 16u * magnitude; the
    # division by 1 - e^{-h} amplifies the error of P - alpha Q by 1/den, and the
    # lower atom inherits both. A realised cell edge off by edge_err in loss moves at
    # most the mass of a sliver, changing H by at most edge_err per grid point.
    errP = 16 * _U * magP + 4 * _U * P
    errQ = 16 * _U * magQ * alpha * math.exp(h) + 4 * _U * alpha * Q
    err_upper = (errP + errQ) / den + 4 * _U * upper
    slack = float(np.sum(2.0 * err_upper + errP)) + 16 * _U * (float(Pc[0]) + float(Ps[-1]))
    slack += 2.0 * edge_err * (1.0 + 1e-12)
    return DominatingPLD(h=h, start=i0, pmf=pmf, infinity_mass=inf_mass, float_slack=slack)


def _from_core(d, h: float) -> DominatingPLD:
    return DominatingPLD(h=h, start=int(d.start), pmf=np.asarray(d.pmf, float), infinity_mass=float(d.infinity_mass),
                         float_slack=float(d.tv_error), rel_error=float(d.rel_error), shift=float(d.shift))


def dominating_pld_core(loss: GaussianMixtureLoss, h: float, *, tail: float = 1e-22) -> DominatingPLD:
    """The same connect-the-dots pair built by the core (``tightdp.pld.dominance.dominating``): its cell
    masses carry a certified *relative* error (``rel_error``, about 1e-14) instead of the absolute
    ``float_slack`` of ``dominating_pld`` (about 1e-11 per step at mesh 1e-3, which forced coarse meshes on
    long runs). Falls back to ``dominating_pld`` where the core refuses the loss (e.g. a step loss beyond
    the range its cell arithmetic can exponentiate)."""
    from ..errors import TightDPError
    from ..pld.dominance import dominating
    try:
        return _from_core(dominating(loss, h, tail), h)
    except (TightDPError, ArithmeticError):
        return dominating_pld(loss, h, tail=tail)


def dominated_pld(loss: GaussianMixtureLoss, h: float, *, tail: float = 1e-22) -> DominatingPLD | None:
    """A discrete pair *dominated* by ``loss`` ("merge to the grid", ``tightdp.pld.dominance.dominated``):
    its hockey-stick curve lies below the true one, and stays below under composition (a
    post-processing of each step), so composing it gives certified *lower* bounds on delta. ``shift``
    lowers every loss by the worst floating-point misplacement; ``rel_error`` bounds the masses. None if
    the core refuses the loss (the caller then uses no lower bound for that bucket: a mechanism with
    sensitivity 0, which every step dominates)."""
    from ..errors import TightDPError
    from ..pld.dominance import dominated
    try:
        return _from_core(dominated(loss, h, tail), h)
    except (TightDPError, ArithmeticError):
        return None
