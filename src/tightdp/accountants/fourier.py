"""The Fourier accountant (Koskela, Jälkö, Honkela 2020; Koskela et al. 2020), certified or paper-faithful.

The grid is that of Koskela et al. 2020, Alg. 1: ``n`` points on ``[-L, L)`` (mesh ``2L/n``);
the composition is one circular FFT on that window, powered for
self-composition and multiplied across distinct mechanisms (Koskela et al. 2020, Sec. 5.5).
Two discretisations, chosen by ``discretisation``:

* ``"certified"`` (default): cell masses with the mean-preserving shift of
  Gopi et al. 2021, Alg. 2 instead of density samples, so that the coupling argument of
  Gopi et al. 2021, Thm 5.5 (with explicit aliasing and round-off terms) turns the grid's
  answer into proven bounds ``lower <= truth <= upper`` (``kind="bound"``).
  Its estimate is *not* the paper's number: cell masses make an
  ``O((2L/n)^2)`` error, while Koskela et al. 2020's point evaluation (a Riemann sum of a
  smooth, rapidly decaying density) converges much faster once the mesh
  resolves the density. On Koskela et al. 2020, Table 1's setting (L = 12) the estimate here
  errs by 2.0e-5 / 1.3e-6 / 8.0e-8 at n = 5e4 / 2e5 / 8e5 (a factor 16 per
  factor 4 in n), the paper's by 4.8e-4 / 2.6e-8 / 2e-12
  (``examples/papers/p001_fourier.py`` prints both). So the two do *not*
  converge at the same rate; the bounds are what this mode is for.
* ``"paper"``: Koskela et al. 2020, Alg. 1 itself. The PLD density ``omega`` is evaluated at
  the grid points (Koskela et al. 2020, Sec. 5.2), the vector ``D omega dx`` is transformed,
  powered and multiplied (Koskela et al. 2020, Sec. 5.2, 5.5), and ``delta(eps)`` is the
  Riemann sum (5.2); ``eps(delta)`` is the root of (5.2), which Koskela et al. 2020, Sec. 5.4
  finds by Newton's method (we solve it exactly: (5.2) is ``A - e^eps B`` between
  grid points). The answer is an ``approximation`` (no interval), and
  ``details`` carry the paper's error estimate ``err(L, n) = 2 |I_n - I_2n|``
  (Koskela et al. 2020, eq. 7.4, from a second run on ``2n`` points) and, for one
  Poisson-subsampled Gaussian under the remove relation, the tail estimate
  (7.3). Only mechanisms whose privacy loss has a density qualify (the
  Gaussian and every subsampled Gaussian); atoms (Laplace, randomized
  response, pure DP) are refused at compose time.

Choosing ``L``. Koskela et al. 2020, Sec. 7.2 bounds the mass of the composed PLD beyond ``L``
by the Chernoff bound ``P(S >= L) <= exp(K(lambda) - lambda L)``. With
``L=None`` (the default) the accountant evaluates that bound with the exact
cumulant generating function ``K`` of the discretised PLDs (a proven bound for
what the FFT composes, unlike the approximate (7.3)) and takes the smallest
``L`` (rounded up to a quarter) for which the mass outside ``[-L, L)`` is below
``1e-3`` of the query's delta slack on each side. The same exact Chernoff bound,
minimised over a grid of ``lambda``, is what the certified answer charges for
aliasing, so a user-fixed ``L`` that is too small widens the interval (and the
answer says which ``L`` would do) but is never wrong.

Tiny deltas. An untilted FFT's round-off is about 1e-16 of the whole mass per grid point, so below
``delta`` about 1e-11 no certified upper end survived it (a single Gaussian at noise 1 and delta 1e-12
answered ``inf``). Epsilon queries below ``delta = 1e-9`` therefore compose the exponentially tilted
masses (``tightdp.pld.compose(tilt=...)``, the tilt from ``saddle_epsilon``: round-off becomes
relative to the mass where ``delta`` is decided), and the chosen ``L`` is widened until the window holds
all but 1e-8 of each tilted composition (tilted Chernoff bounds with the exact CGF). This departs from
Koskela et al. 2020's grid only in that weighting; the certified terms are the same (``details["tilts"]``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
from scipy import fft as sfft

from .._types import ArrayLike, FloatArray
from .._validation import check_choice, check_count, check_delta, check_positive
from ..bounds import Bounds, Kind
from ..errors import PrecisionError, UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, PrivacyLoss
from ..mechanisms import Gaussian, Mechanism, PoissonSampled
from ..pld import ComposedPLD, compose, delta_bounds, discretise, epsilon_bounds, saddle_epsilon
from ._fourier_tails import chernoff_cgfs, outside_mass, round_L, tilted_window, window_for
from ._pld import Directions, PLDAccountant, Terms, check_mechanism

__all__ = ["FourierAccountant", "paper_pld_density"]

_DISCRETISATIONS = ("certified", "paper")
_MAX_N = 1 << 25  # the error estimate composes on 2n points; compose() caps windows at 2^26
_L_MAX = 650.0  # exp(+-L) must stay representable
_SQRT2PI = math.sqrt(2.0 * math.pi)
_UNTILTED_DELTA = 1e-9  # epsilon queries below this delta tilt the FFT towards the answer (``_tilted_plan``)
_TILTED_TAU = 1e-8  # tilted mass left outside the window on each side (the tilted law is centred on the answer)


# ------------------------------------------------------------------------ Koskela et al. 2020, Alg. 1 (point evaluation)
def _mixture_density(loss: GaussianMixtureLoss, s: FloatArray) -> FloatArray:
    """``omega(s) = f_P(x) / L'(x)`` at ``x = L^{-1}(s)`` (Koskela et al. 2020, Def. 4, change of variables)."""
    lo, hi = loss.support()
    out = np.zeros(s.shape)
    inside = (s > lo) & (s < hi)
    if not np.any(inside):
        return out
    x = loss.inverse(s[inside])
    sig = loss.sigma
    a, w = np.asarray(loss.p_means, float), np.asarray(loss.p_weights, float)
    b, v = np.asarray(loss.q_means, float), np.asarray(loss.q_weights, float)
    a, w = a[w > 0], w[w > 0]
    b, v = b[v > 0], v[v > 0]
    xs = x[:, None]
    ep = np.log(w) - 0.5 * ((xs - a) / sig) ** 2  # log of the P components (without 1/(sigma sqrt(2 pi)))
    eq = np.log(v) - 0.5 * ((xs - b) / sig) ** 2
    mp, mq = ep.max(axis=1, keepdims=True), eq.max(axis=1, keepdims=True)
    pp, pq = np.exp(ep - mp), np.exp(eq - mq)
    # L'(x) = (E_post_P[a] - E_post_Q[b]) / sigma^2 (the loss is non-decreasing)
    slope = ((pp @ a) / pp.sum(axis=1) - (pq @ b) / pq.sum(axis=1)) / sig**2
    f_p = np.exp(mp[:, 0]) * pp.sum(axis=1) / (sig * _SQRT2PI)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        dens = np.where(slope > 0, f_p / slope, 0.0)
    out[inside] = np.where(np.isfinite(dens), dens, 0.0)
    return out


def paper_pld_density(loss: PrivacyLoss, s: ArrayLike) -> FloatArray:
    """The privacy loss distribution's density ``omega(s)`` (Koskela et al. 2020, Def. 4) at the points ``s``.

    Gaussian: ``N(mu^2/2, mu^2)``. Gaussian mixtures (every subsampled Gaussian, Koskela et al. 2020,
    Sec. 6.1-6.3): ``f_P(L^{-1}(s)) d L^{-1}(s)/ds``. Other losses have atoms and no density.

    Parameters
    ----------
    loss : PrivacyLoss
        A Gaussian or Gaussian-mixture privacy loss.
    s : array_like
        Privacy-loss values.

    Returns
    -------
    numpy.ndarray
        The density at each ``s`` (float array of the shape of ``s``).

    Raises
    ------
    UnsupportedMechanismError
        A loss without a density (atoms: Laplace, randomized response, pure DP).

    References
    ----------
    Koskela et al. 2020, Def. 4, Sec. 6.1-6.3.
    """
    s = np.asarray(s, float)
    if isinstance(loss, GaussianLoss):
        z = (s - loss.mean) / loss.mu
        return np.exp(-0.5 * z * z) / (loss.mu * _SQRT2PI)
    if isinstance(loss, GaussianMixtureLoss):
        return _mixture_density(loss, s)
    raise UnsupportedMechanismError(
        f"{type(loss).__name__} has atoms, not a density: Koskela et al. 2020, Alg. 1 cannot "
        "evaluate it pointwise (use discretisation='certified')"
    )


class _PaperPLD:
    """The composed masses ``dx C^k`` of Koskela et al. 2020, Alg. 1 on ``x_l = -L + l dx`` and the Riemann sum (5.2)."""

    def __init__(self, terms: Terms, L: float, n: int) -> None:
        dx = 2.0 * L / n
        self.L, self.n, self.dx = L, n, dx
        self.x = -L + dx * np.arange(n)
        half = n // 2
        spec = None
        p_fin = 0.0  # log P(no step lands at +inf)
        for loss, c in terms:
            w = paper_pld_density(loss, self.x) * dx
            phi = sfft.rfft(np.roll(w, -half))  # D omega dx: index j holds loss j dx (mod 2L)
            pw = phi**c if c > 1 else phi
            spec = pw if spec is None else spec * pw
            p_fin += c * math.log1p(-min(loss.infinity_mass, 1.0 - 1e-16))
        self.masses = np.roll(sfft.irfft(spec, n), half)  # D F^{-1}(...): back to x_0 = -L
        self.p_inf = -math.expm1(p_fin)
        pos = self.x > 0.0  # delta(eps) for eps >= 0 only sums points x > eps >= 0
        self.i0 = int(np.argmax(pos))
        xm = self.x[self.i0 :]
        mm = self.masses[self.i0 :]
        self.A = np.concatenate([np.cumsum(mm[::-1])[::-1], [0.0]])
        self.B = np.concatenate([np.cumsum((mm * np.exp(-xm))[::-1])[::-1], [0.0]])

    def start(self, eps: float) -> int:
        """``l_eps = min{l : -L + l dx > eps}`` (Koskela et al. 2020, Sec. 5.3)."""
        return int(np.searchsorted(self.x, eps, side="right"))

    def delta(self, eps: float) -> float:
        """Koskela et al. 2020, eq. (5.2), plus the probability of an infinite loss (0 for Poisson sampling)."""
        j = self.start(eps)
        if j >= self.n:
            return self.p_inf
        xs, ms = self.x[j:], self.masses[j:]
        return self.p_inf + float(np.dot(-np.expm1(eps - xs), ms))

    def epsilon(self, target: float) -> float:
        """The root of ``delta(eps) = target`` (5.2); ``inf`` if the grid ends first (Koskela et al. 2020, Sec. 5.4)."""
        t = target - self.p_inf
        if t <= 0:
            return math.inf
        if self.delta(0.0) <= target:
            return 0.0
        xm = self.x[self.i0 :]
        # delta at the grid points (eps = x_l: the sum starts at l + 1)
        with np.errstate(over="ignore"):
            d_grid = self.A[1:] - np.exp(xm) * self.B[1:]
        below = np.nonzero(d_grid <= t)[0]
        if below.size == 0:
            return math.inf
        k = int(below[0])  # first grid point where delta <= target; the root lies in [x_{k-1}, x_k]
        lo = 0.0 if k == 0 else float(xm[k - 1])
        hi = float(xm[k])
        a, b = self.A[k], self.B[k]  # for eps in [x_{k-1}, x_k) the sum starts at x_k
        if b <= 0 or a - t <= 0:
            return hi
        return min(max(math.log((a - t) / b), lo), hi)


class FourierAccountant(PLDAccountant):
    """PLD accountant on the grid ``[-L, L)`` with ``n`` points (Koskela et al. 2020).

    Parameters
    ----------
    L : float, optional
        Truncation of the privacy-loss domain, ``> 0``; ``None`` (default) chooses it per query from the
        Chernoff bound of Koskela et al. 2020, Sec. 7.2 (see the module docstring). Koskela et al. 2020
        uses 12 in Table 1.
    n : int, default 1_000_000
        Number of grid points (even, at least 16, at most 2^25).
    delta_error : float, optional
        Delta slack for the coupling failure probability and truncation (default: ``1e-3 * delta`` for
        epsilon queries, ``1e-10`` for delta queries; certified mode).
    discretisation : {"certified", "paper"}, default "certified"
        ``"certified"`` (cell masses, proven bounds, Gopi et al. 2021, Thm 5.5) or ``"paper"`` (Koskela et
        al. 2020, Alg. 1's point evaluation, an approximation with the error estimate err(L, n) of Koskela
        et al. 2020, eq. 7.4).

    Raises
    ------
    ValueError
        An argument out of its domain, naming it.

    References
    ----------
    Koskela et al. 2020 (Fourier accountant), Alg. 1, Sec. 5.2-5.5, eq. (7.4); Gopi et al. 2021, Alg. 2, Thm 5.5.
    """

    name = "fourier"

    def __init__(
        self,
        *,
        L: float | None = None,
        n: int = 1_000_000,
        delta_error: float | None = None,
        discretisation: str = "certified",
    ) -> None:
        self.L = None if L is None else check_positive("L", L)
        if self.L is not None and self.L > _L_MAX:
            raise ValueError(f"L must be at most {_L_MAX:g} (exp(L) must be representable), got {L!r}")
        n = check_count("n", n, minimum=16)
        if n % 2:
            raise ValueError(f"n must be even, got {n}")
        if n > _MAX_N:
            raise ValueError(f"n must be at most {_MAX_N} (the error estimate composes on 2n points), got {n}")
        self.n = n
        self.delta_error = None if delta_error is None else check_delta("delta_error", delta_error)
        self.discretisation = check_choice("discretisation", discretisation, _DISCRETISATIONS)
        super().__init__()
        self._ledger_changed()

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        """``"bound"`` for the certified discretisation, ``"approximation"`` for the paper's."""
        return "approximation" if self.discretisation == "paper" else "bound"

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready), as ``to_dict`` stores them.

        Returns
        -------
        dict
            Option name to value; ``type(self)(**options())`` is an accountant with the same settings.
        """
        return {"L": self.L, "n": self.n, "delta_error": self.delta_error, "discretisation": self.discretisation}

    def _supports(self, mechanism: Mechanism) -> bool:
        check_mechanism(mechanism)
        if self.discretisation == "paper":
            pair = mechanism.privacy_losses()
            for loss in (pair.remove, pair.add):
                if not isinstance(loss, (GaussianLoss, GaussianMixtureLoss)):
                    raise UnsupportedMechanismError(
                        f"the paper-faithful Fourier accountant (Koskela et al. 2020, Alg. 1) evaluates privacy loss densities "
                        f"at grid points; {type(mechanism).__name__} has a privacy loss with atoms "
                        f"({type(loss).__name__}); use discretisation='certified'"
                    )
        return True

    # --------------------------------------------------------------------- certified mode
    def _disc(self, terms: Terms, h: float, trunc: float) -> Any:
        k = sum(c for _, c in terms)
        return [(discretise(loss, h, trunc / k), c) for loss, c in terms]

    def _auto_L(self, directions: Directions, trunc: float, tau: float, at_least: float = 0.0) -> float:
        """The smallest quarter ``L`` whose window ``[-L, L)`` leaves at most ``tau`` outside on each side,
        by the exact Chernoff bound of the discretised compositions (Koskela et al. 2020, Sec. 7.2).

        A first pass on a coarse mesh (cheap: its cost is the number of cells) proposes ``L``; the next
        passes check it on the mesh ``2L/n`` that the composition will use (the same discretisations,
        cached), and widen it if needed.
        """

        def needed(h: float) -> float:
            need = at_least
            for terms in directions:
                lo, hi = window_for(chernoff_cgfs(self._disc(terms, h, trunc)), tau)
                need = max(need, hi, -lo)
            new = round_L(1.02 * need + 2.0 * h)  # a margin for the change of mesh
            if new > _L_MAX:
                raise PrecisionError(
                    f"the composed privacy loss needs L = {new:.4g} > {_L_MAX:g} to hold "
                    f"all but {tau:.2g} of its mass: epsilon is too large for the Fourier "
                    "accountant; use the PRV or connect-dots accountant"
                )
            return new

        L = needed(max(1e-2, 24.0 / self.n))
        for _ in range(3):
            new = needed(2.0 * L / self.n)
            if new <= L:  # verified on the composition's own mesh
                return L
            L = new
        return L

    def _composition(
        self, direction: int, terms: Terms, L: float, n: int, trunc: float, tilt: float = 0.0
    ) -> ComposedPLD:
        h = 2.0 * L / n

        def build() -> ComposedPLD:
            disc = self._disc(terms, h, trunc)
            comp = compose(disc, tilt=tilt, window=(-L, L), size=n)
            # compose() bounds the (tilted) mass outside the window with block-wise CGF bounds; the exact CGFs
            # minimised over a grid of lambda are often far tighter (both are proven bounds: keep the smaller)
            exact = outside_mass(chernoff_cgfs(disc), float(comp.x[0]), float(comp.x[-1]), tilt)
            if exact < comp.alias_mass:
                comp = dataclasses.replace(comp, alias_mass=exact)
            return comp

        return self._memo(("fa", direction, L, n, trunc, tilt), build)

    def _tilted_plan(self, L: float, trunc: float, tau: float, delta: float) -> tuple[float, tuple[float, ...]]:
        """``(L, tilts)`` for an epsilon query: for ``delta >= _UNTILTED_DELTA`` the query's ``L`` and no tilt;
        below, per direction the tilt that centres the FFT where ``delta`` is decided (``saddle_epsilon``),
        and ``L`` widened until ``[-L, L)`` holds all but ``tau`` of each *tilted* composition on each side
        (tilted Chernoff bounds, ``tilted_window``). An untilted FFT's round-off is about 1e-16 of the whole
        mass times the grid's size, which leaves no certified upper end below about 1e-11.

        Only accuracy depends on these choices (a fixed ``L`` is kept as the user gave it): ``compose``
        bounds the tilted mass outside the window, and the answer pays for it. The coarse mesh of
        ``_auto_L``'s first pass serves to choose them.
        """
        if delta >= _UNTILTED_DELTA:
            return L, tuple(0.0 for _ in self._directions())
        coarse = max(1e-2, 24.0 / self.n)
        tilts, need = [], L
        for terms in self._directions():
            disc = self._disc(terms, coarse, trunc)
            tilt = round(saddle_epsilon(disc, delta)[1], 3)
            tilts.append(tilt)
            if tilt > 0.0 and self.L is None:
                lo, hi = tilted_window(chernoff_cgfs(disc), tilt, tau)
                need = max(need, round_L(1.02 * max(hi, -lo) + 4.0 * coarse))
        if need > _L_MAX:
            need = L  # the untilted window stands; the answer pays for what falls outside
        return need, tuple(tilts)

    def _query_L(self, trunc: float, tau: float, at_least: float = 0.0) -> float:
        if self.L is not None:
            return self.L
        key = ("L", trunc, tau, at_least)
        return self._memo(key, lambda: self._auto_L(self._directions(), trunc, tau, at_least))

    def _needed_L_note(self, trunc: float, tau: float) -> str:
        try:
            need = self._auto_L(self._directions(), trunc, tau)
        except PrecisionError as exc:
            return str(exc)
        return f"L = {self.L:g} is too small for this composition; the Chernoff bound (Koskela et al. 2020, Sec. 7.2) asks for L >= {need:g}"

    def _tail_estimate(self, L: float) -> float | None:
        """Koskela et al. 2020, eq. (7.3) when the ledger is one Poisson-subsampled Gaussian under the remove relation."""
        if len(self._ledger) != 1:
            return None
        mech, k = self._ledger[0]
        if not (
            isinstance(mech, PoissonSampled)
            and mech.relation == "remove"
            and mech.sampling_rate < 1
            and isinstance(mech.mechanism, Gaussian)
        ):
            return None
        g: Gaussian = mech.mechanism
        q, s = mech.sampling_rate, g.noise_multiplier / g.sensitivity
        expo = k * q * q * (L / 2 + 1) * (L / 2) / ((1 - q) * s * s) - L * L / 2
        return math.exp(min(expo, 700.0))

    def _epsilon(self, delta: float) -> Bounds:
        if self.discretisation == "paper":
            return self._paper_epsilon(delta)
        return super()._epsilon(delta)

    def _delta(self, epsilons: FloatArray) -> Bounds:
        if self.discretisation == "paper":
            return self._paper_delta(epsilons)
        return super()._delta(epsilons)

    def _epsilon_numeric(self, delta: float) -> Bounds:
        t0 = time.perf_counter()
        aim = self._finite_share(delta)  # what the finite losses decide (``PLDAccountant._finite_share``)
        slack = self.delta_error if self.delta_error is not None else 1e-3 * aim
        eta, trunc = 0.5 * slack, 0.25 * slack
        L, tilts = self._tilted_plan(self._query_L(trunc, 1e-3 * slack), trunc, _TILTED_TAU, aim)
        parts, ests2, tails = [], [], 0.0
        for d, terms in enumerate(self._directions()):
            tilt = tilts[d]
            comp = self._composition(d, terms, L, self.n, trunc, tilt)
            parts.append(epsilon_bounds(comp, delta, eta))
            comp2 = self._composition(d, terms, L, 2 * self.n, trunc, tilt)
            ests2.append(epsilon_bounds(comp2, delta, eta, need="estimate").estimate)
            tails = max(tails, comp.alias_mass)
        out = self._combine_eps(parts, {})
        err = 2.0 * abs(out.estimate - max(ests2)) if math.isfinite(out.estimate) else None
        details = {
            "L": L,
            "L_chosen": self.L is None,
            "n": self.n,
            "tilts": tilts,
            "discretisation_error": err,
            "tail_bound": tails,
            "tail_estimate": self._tail_estimate(L),
            "seconds": time.perf_counter() - t0,
            **dict(out.details),
        }
        if math.isinf(out.upper) and self.L is not None:
            details["note"] = f"{details.get('note', '')}; {self._needed_L_note(trunc, 1e-3 * slack)}".lstrip("; ")
        return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound", details)

    def _delta_numeric(self, epsilons: FloatArray) -> Bounds:
        t0 = time.perf_counter()
        slack = self.delta_error if self.delta_error is not None else 1e-10
        eta, trunc = 0.5 * slack, 0.25 * slack
        L = self._query_L(trunc, 1e-3 * slack, float(np.max(epsilons)) + 1.0)
        parts, ests2, tails = [], [], 0.0
        for d, terms in enumerate(self._directions()):
            comp = self._composition(d, terms, L, self.n, trunc)
            parts.append(delta_bounds(comp, epsilons, eta))
            comp2 = self._composition(d, terms, L, 2 * self.n, trunc)
            ests2.append(comp2.infinity_mass + comp2.delta_disc(epsilons))
            tails = max(tails, comp.alias_mass)
        out = self._combine_delta(parts, {})
        err = 2.0 * np.abs(out.estimate - np.max(ests2, axis=0))
        details = {
            "L": L,
            "L_chosen": self.L is None,
            "n": self.n,
            "discretisation_error": err,
            "tail_bound": tails,
            "tail_estimate": self._tail_estimate(L),
            "seconds": time.perf_counter() - t0,
        }
        return Bounds(out.lower, out.estimate, out.upper, "delta", "bound", details)

    # --------------------------------------------------------------------- paper mode (Koskela et al. 2020, Alg. 1)
    def _paper_L(self, at_least: float = 0.0) -> float:
        """User ``L``, or the Chernoff choice of the certified mode at the tail level 1e-14 (Koskela et al. 2020, Sec. 7.2)."""
        if self.L is not None:
            return self.L
        return self._memo(("paperL", at_least), lambda: self._auto_L(self._directions(), 1e-15, 1e-14, at_least))

    def _paper(self, direction: int, terms: Terms, L: float, n: int) -> _PaperPLD:
        return self._memo(("paper", direction, L, n), lambda: _PaperPLD(terms, L, n))

    def _paper_details(self, L: float) -> dict[str, Any]:
        return {
            "method": "Koskela et al. 2020, Alg. 1 (point evaluation, Riemann sum 5.2)",
            "L": L,
            "L_chosen": self.L is None,
            "n": self.n,
            "tail_estimate": self._tail_estimate(L),
            "note": "paper-faithful approximation: no certified interval; discretisation_error is "
            "err(L, n) = 2|I_n - I_2n| (Koskela et al. 2020, eq. 7.4), an estimate",
        }

    def _paper_delta(self, epsilons: FloatArray) -> Bounds:
        t0 = time.perf_counter()
        L = self._paper_L(float(np.max(epsilons)) + 1.0)
        est = np.zeros(epsilons.shape)
        est2 = np.zeros(epsilons.shape)
        for d, terms in enumerate(self._directions()):
            one, two = self._paper(d, terms, L, self.n), self._paper(d, terms, L, 2 * self.n)
            est = np.maximum(est, [one.delta(float(e)) for e in epsilons])
            est2 = np.maximum(est2, [two.delta(float(e)) for e in epsilons])
        details = self._paper_details(L)
        details["discretisation_error"] = 2.0 * np.abs(est - est2)
        details["seconds"] = time.perf_counter() - t0
        return Bounds(None, np.clip(est, 0.0, 1.0), None, "delta", "approximation", details)

    def _paper_epsilon(self, delta: float) -> Bounds:
        t0 = time.perf_counter()
        L = self._paper_L()
        est, est2 = 0.0, 0.0
        for d, terms in enumerate(self._directions()):
            est = max(est, self._paper(d, terms, L, self.n).epsilon(delta))
            est2 = max(est2, self._paper(d, terms, L, 2 * self.n).epsilon(delta))
        details = self._paper_details(L)
        if math.isinf(est):
            details["note"] = (
                f"the grid [-{L:g}, {L:g}) ends before the Riemann sum (5.2) falls to delta={delta:g}"
                " (or delta is below the probability of an infinite loss): increase L"
            )
            details["discretisation_error"] = None
        else:
            details["discretisation_error"] = 2.0 * abs(est - est2) if math.isfinite(est2) else None
        details["seconds"] = time.perf_counter() - t0
        return Bounds(None, est, None, "epsilon", "approximation", details)
