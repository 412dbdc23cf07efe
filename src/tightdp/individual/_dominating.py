"""Per-bucket discrete PLDs on the lattice ``h Z`` (Koskela et al. 2023, App. D), as the engine builds them.

The constructions themselves live in one place, ``tightdp.pld.dominance`` (``dominating``: the
connect-the-dots pair below; ``dominated``: merge to the grid); this module wraps their results as
``DominatingPLD`` (atoms, shift, relative mass error) with the moment helpers the per-example
population code needs.

For one step of the Poisson-subsampled Gaussian (``tightdp.losses.poisson_gaussian_loss``,
Koskela et al. 2020, Sec. 6.1) we build a discrete pair ``(P~, Q~)`` that *dominates* the true
pair: ``H_alpha(P || Q) <= H_alpha(P~ || Q~)`` for every ``alpha > 0``.
Dominance is preserved by composition (a Markov kernel mapping ``(P~, Q~)`` to
``(P, Q)`` exists by Blackwell's theorem, Koskela et al. 2023, App. C.6, and products of kernels
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

Lower ends (attained pairs, ``tightdp.mechanisms.base.Mechanism``): ``dominated_pld`` is built at a bucket's
*lower* ratio ``r_low``, the Poisson-subsampled Gaussian of sensitivity ``r_low``: the exact pair of the data
sets in which this example's clipped gradient is a fixed vector of norm ``r_low`` at that step and every other
example's is 0. Every ratio recorded into the bucket is at least ``r_low``, and the pair at a smaller norm is a
garbling of the pair at a larger one (``N(r) -> N(r_low)`` by scaling and added noise, on both sides), so its
curve lies below the example's; a composition of such pairs is realised by one pair of data sets at every
step, so the per-example lower ends are certified.

Floating point (``tightdp.pld.dominance``): cell masses carry a relative error
``rel_error``; ``float_slack`` is the l1 error of the cells without one (usually 0);
a composition of ``k`` such steps is within those factors and ``sum k_b float_slack_b``
of dominating (both charged by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .._numerics import logsumexp
from .._types import FloatArray
from ..losses import GaussianMixtureLoss

__all__ = ["DominatingPLD", "dominated_pld", "dominating_pld_core"]

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
    pmf: FloatArray
    infinity_mass: float
    float_slack: float
    rel_error: float = 0.0
    shift: float = 0.0

    @property
    def grid(self) -> FloatArray:
        return (self.start + np.arange(self.pmf.size)) * self.h

    def log_mgf(self, thetas: FloatArray) -> FloatArray:
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
                th = thetas[i : i + step]
                out[i : i + step] = logsumexp(lp[None, :] + th[:, None] * g[None, :], axis=1) if nz.size else -np.inf
            cache[key] = out
        return cast("FloatArray", cache[key].copy())

    def moments(self) -> tuple[float, float]:
        """Mean and variance of the finite part (normalised)."""
        m = float(self.pmf.sum())
        if m <= 0:
            return 0.0, 0.0
        g = self.grid
        mean = float(np.dot(self.pmf, g)) / m
        var = float(np.dot(self.pmf, (g - mean) ** 2)) / m
        return mean, var


def _from_core(d: Any, h: float) -> DominatingPLD:
    return DominatingPLD(
        h=h,
        start=int(d.start),
        pmf=np.asarray(d.pmf, float),
        infinity_mass=float(d.infinity_mass),
        float_slack=float(d.tv_error),
        rel_error=float(d.rel_error),
        shift=float(d.shift),
    )


def dominating_pld_core(loss: GaussianMixtureLoss, h: float, *, tail: float = 1e-22) -> DominatingPLD:
    """The connect-the-dots pair of one bucket's step, built by the engine's one implementation
    (``tightdp.pld.dominance.dominating``): cell masses with a certified *relative* error
    (``rel_error``, about 1e-14) and the edge error as a loss shift. Where the engine refuses the loss
    (a step loss beyond what double precision can exponentiate, a grid too large) the refusal
    propagates: there is no second construction to fall back on."""
    from ..pld.dominance import dominating

    return _from_core(dominating(loss, h, tail), h)


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
