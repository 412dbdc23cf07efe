"""``TradeoffCurve`` and ``tradeoff_curve``: the certified f-DP trade-off curve of an accountant or of a
grid of certified delta(epsilon) bounds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._types import ArrayLike, FloatArray
from .._validation import check_real_array
from ..bounds import Bounds, _jsonable
from ._geometry import (
    _EPS_CAP,
    DEFAULT_ALPHAS,
    _beta_from_c,
    _c_lower,
    _c_upper,
    _check_alphas,
    _gdp_c,
    _monotone,
    _monotone_up,
    _mu_lower,
    _mu_upper,
    _segments,
    _upper_lines,
)

if TYPE_CHECKING:
    from ..accountants.base import Accountant


# ============================================================================== the curve
@dataclass(frozen=True)
class TradeoffCurve:
    """A certified f-DP trade-off curve: ``beta_lower <= f(alpha) <= beta_upper`` at every ``alpha``.

    ``f`` is the symmetrised trade-off function of the run over both orders of the neighbouring
    pair (module docstring; Dong, Roth, Su 2022, Prop. 2.12). ``mu_lower <= mu <= mu_upper``
    brackets the tightest mu-GDP statement (``mu_upper`` may be ``inf``: not certifiable from the
    grid, see ``details["mu_note"]``). ``epsilons`` / ``delta_lower`` / ``delta_upper`` are the grid
    the curves come from; ``at(alphas)`` and ``tpr(fpr)`` evaluate anywhere in [0, 1].

    Parameters
    ----------
    alpha : FloatArray
        The type-I errors the curves are reported at, in [0, 1].
    beta_lower, beta_upper : FloatArray
        Certified bounds on ``f(alpha)``.
    mu_lower, mu_upper : float
        Certified bounds on the tightest mu-GDP statement (``mu_upper`` may be ``inf``).
    epsilons : FloatArray
        The epsilon grid the curves come from.
    delta_lower, delta_upper : FloatArray
        Certified bounds on delta at ``epsilons``.
    method : str
        How the curves were computed.
    details : mapping, optional
        The accountant, the gap reached, the exact mu of a Gaussian ledger, notes.

    Raises
    ------
    TypeError
        If a field is missing (built by ``tradeoff_curve``; the values are not checked).
    """

    alpha: FloatArray
    beta_lower: FloatArray
    beta_upper: FloatArray
    mu_lower: float
    mu_upper: float
    epsilons: FloatArray
    delta_lower: FloatArray
    delta_upper: FloatArray
    method: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def max_gap(self) -> float:
        """``max(beta_upper - beta_lower)`` over ``alpha``."""
        return float(np.max(self.beta_upper - self.beta_lower))

    def at(self, alphas: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Bounds on the trade-off function at ``alphas``.

        Parameters
        ----------
        alphas : array_like
            Type-I errors, each in [0, 1].

        Returns
        -------
        tuple of (FloatArray, FloatArray)
            ``(beta_lower, beta_upper)`` at ``alphas``.

        Raises
        ------
        ValueError
            If ``alphas`` is empty or outside [0, 1].
        """
        a = _check_alphas("alphas", alphas)
        c_up, c_low = self._tpr_bounds(a)
        return _beta_from_c(c_up, down=True), _beta_from_c(c_low, down=False, alpha=a)

    def tpr(self, fpr: ArrayLike) -> tuple[FloatArray, FloatArray] | tuple[float, float]:
        """``(lower, upper)`` on the best membership-inference attack's TPR at false-positive rate ``fpr``.

        ``upper = 1 - beta_lower(fpr)``: no attack does better. ``lower = 1 - beta_upper(fpr)``: the
        (symmetrised) optimal test reaches at least this. Scalars in, scalars out.

        Parameters
        ----------
        fpr : float or array_like
            False-positive rates, each in [0, 1].

        Returns
        -------
        tuple of (float, float) or tuple of (FloatArray, FloatArray)
            ``(lower, upper)`` on the TPR.

        Raises
        ------
        ValueError
            If ``fpr`` is empty or outside [0, 1].
        """
        a = _check_alphas("fpr", fpr)
        c_up, c_low = self._tpr_bounds(a)
        if np.ndim(fpr) == 0:
            return float(c_low[0]), float(c_up[0])
        return c_low, c_up

    def _tpr_bounds(self, a: FloatArray) -> tuple[FloatArray, FloatArray]:
        mu = self.details.get("mu_exact")
        if mu is not None:
            return _gdp_c(a, self.mu_upper, up=True), _gdp_c(a, self.mu_lower, up=False)
        d, s = _upper_lines(self.epsilons, self.delta_upper)
        c_up = _c_upper(a, d, s)
        c_low = _monotone_up(a, _c_lower(a, _segments(self.epsilons, self.delta_upper, self.delta_lower)))
        return c_up, np.minimum(c_low, c_up)

    def to_dict(self) -> dict[str, Any]:
        """The curve as JSON-ready data.

        Returns
        -------
        dict
            The curves, the mu interval (``None`` for inf), the grid, the method and the details.
        """
        return {
            "alpha": _jsonable(self.alpha),
            "beta_lower": _jsonable(self.beta_lower),
            "beta_upper": _jsonable(self.beta_upper),
            "max_gap": self.max_gap,
            "mu": {"lower": _jsonable(self.mu_lower), "upper": _jsonable(self.mu_upper)},
            "epsilons": _jsonable(self.epsilons),
            "delta_lower": _jsonable(self.delta_lower),
            "delta_upper": _jsonable(self.delta_upper),
            "method": self.method,
            "details": _jsonable(dict(self.details)),
        }


# ============================================================================== building curves
def _gaussian_ledger_mu(accountant: Accountant) -> float | None:
    """``mu`` when every step of the ledger has a Gaussian privacy loss, equal in both directions
    (then exactly mu-GDP, DRS Cor. 3.3), else ``None`` (an empty ledger and an overflowing mu too)."""
    from ..accountants._gaussian_ledger import gaussian_ledger_mu

    mu = gaussian_ledger_mu(accountant.ledger) if accountant.ledger else None
    return mu if mu is not None and math.isfinite(mu) else None


def _closed_form(mu: float, alphas: FloatArray) -> TradeoffCurve:
    lo, hi = mu * (1 - 1e-12), mu * (1 + 1e-12)  # sqrt(sum c mu_i^2) is off by a few ulp at most
    c_up, c_low = _gdp_c(alphas, hi, up=True), _gdp_c(alphas, lo, up=False)
    empty = np.empty(0)
    return TradeoffCurve(
        alphas,
        _beta_from_c(c_up, down=True),
        _beta_from_c(c_low, down=False, alpha=alphas),
        lo,
        hi,
        empty,
        empty,
        empty,
        "closed form: exact mu-GDP (Dong, Roth, Su 2022, Cor. 2.13 / 3.3)",
        {"mu_exact": mu},
    )


def _from_grid(
    eps: FloatArray,
    d_lo: FloatArray,
    d_up: FloatArray,
    alphas: FloatArray,
    method: str,
    details: dict[str, Any],
) -> TradeoffCurve:
    eps, d_up, d_lo = _monotone(eps, d_up, d_lo)
    d, s = _upper_lines(eps, d_up)
    c_up = _c_upper(alphas, d, s)
    seg = _segments(eps, d_up, d_lo)
    c_low = np.minimum(_monotone_up(alphas, _c_lower(alphas, seg)), c_up)
    corners = np.concatenate([seg.a0, seg.a1])
    mu_lo = _mu_lower(
        np.concatenate([alphas, corners]),
        np.concatenate([c_low, np.minimum(_c_lower(corners, seg), _c_upper(corners, d, s))]),
    )
    if eps.size and eps[0] == 0.0 and d_up[0] == 0.0:
        # delta(0) = 0 certified: total variation 0, P = Q, the curve is 1 - alpha and mu = 0 exactly (the
        # grid check below would ask G_mu <= beta_lower within rounding of alpha = 1, where beta_lower is 0)
        mu_hi, why = 0.0, None
    else:
        mu_hi, why = _mu_upper(eps, d_up)
    details = dict(details)
    if why:
        details["mu_note"] = f"no finite mu-GDP statement certified: {why}"
    return TradeoffCurve(
        alphas,
        _beta_from_c(c_up, down=True),
        _beta_from_c(c_low, down=False, alpha=alphas),
        mu_lo,
        max(mu_hi, mu_lo),
        eps,
        d_lo,
        d_up,
        method,
        details,
    )


def _default_grid() -> FloatArray:
    result: FloatArray = np.unique(np.concatenate([np.linspace(0.0, 2.0, 17), np.geomspace(2.25, 64.0, 24)]))
    return result


def _refine(curve: TradeoffCurve, target: float, room: int) -> FloatArray:
    """New epsilons: midpoints around the lines active where the gap exceeds ``target``."""
    eps = curve.epsilons
    gap = curve.beta_upper - curve.beta_lower
    bad = gap > target
    if not bad.any() or eps.size < 2 or room <= 0:
        return np.empty(0)
    a = curve.alpha[bad]
    d, s = _upper_lines(eps, curve.delta_upper)
    vals = d[None, :] + s[None, :] * a[:, None]
    j = np.argmin(vals, axis=1) % eps.size  # a mirror line's epsilon is its own
    # where the gap is mostly the accountant's own delta width, a finer grid cannot help
    j = np.unique(j[gap[bad] > 2.0 * (curve.delta_upper[j] - curve.delta_lower[j])])
    mids = []
    for i in j:
        if i > 0:
            mids.append(0.5 * (eps[i - 1] + eps[i]))
        if i + 1 < eps.size:
            mids.append(0.5 * (eps[i] + eps[i + 1]))
    new = np.setdiff1d(np.unique(mids), eps)
    if new.size > room:  # spread the budget over the whole curve
        new = new[np.linspace(0, new.size - 1, room).astype(int)]
    return new


def tradeoff_curve(
    source: Accountant | Bounds,
    *,
    epsilons: ArrayLike | None = None,
    alphas: ArrayLike | None = None,
    max_gap: float = 2e-3,
    max_points: int = 400,
    rounds: int = 4,
) -> TradeoffCurve:
    """The certified f-DP trade-off curve of ``source`` (module docstring for what is certified).

    ``source``: a composed accountant whose ``delta`` answers are bounds (``kind == "bound"``), or
    the ``Bounds`` an accountant returned for ``delta(epsilons)`` (then ``epsilons`` is required
    and no refinement happens). ``alphas``: where the curves are reported (default
    ``DEFAULT_ALPHAS``, 131 points dense near 0). ``epsilons``: the starting grid (default 0..2 in
    steps of 1/8 and 24 points up to 64); for an accountant it is refined, in at most ``rounds``
    batched ``delta`` queries and ``max_points`` epsilons, until ``beta_upper - beta_lower <=
    max_gap`` on ``alphas`` (``max_gap = 0`` or ``rounds = 0``: no refinement). The gap cannot fall
    below ``delta_upper - delta_lower``; ``details["max_gap"]`` reports what was reached.

    A ledger of plain Gaussians is answered exactly (closed-form mu-GDP, Dong, Roth, Su 2022
    Cor. 2.13 / 3.3); so is an empty ledger (the identity trade-off ``1 - alpha``).

    Parameters
    ----------
    source : Accountant or Bounds
        A composed accountant with certified ``delta`` answers, or the delta ``Bounds`` one returned.
    epsilons : array_like, optional
        The starting epsilon grid (required with a ``Bounds`` source), each >= 0.
    alphas : array_like, optional
        Where the curves are reported, each in [0, 1] (default ``DEFAULT_ALPHAS``).
    max_gap : float, default 2e-3
        The target ``max(beta_upper - beta_lower)``, >= 0.
    max_points : int, default 400
        The most epsilons queried, >= 2.
    rounds : int, default 4
        The most refinement queries, >= 0.

    Returns
    -------
    TradeoffCurve
        The certified curves and mu-GDP interval; ``details["max_gap"]`` the gap reached.

    Raises
    ------
    ValueError
        If an argument is out of its domain, the source gives approximations rather than certified delta
        bounds, or its delta lower bounds exceed its upper bounds.

    References
    ----------
    Dong, Roth, Su 2022, "Gaussian differential privacy", Prop. 2.5, 2.12, Cor. 2.13.
    """
    from ..accountants.base import Accountant

    a = DEFAULT_ALPHAS.copy() if alphas is None else np.unique(_check_alphas("alphas", alphas))
    max_gap = float(max_gap)
    if not math.isfinite(max_gap) or max_gap < 0:
        raise ValueError(f"max_gap must be a finite number >= 0, got {max_gap!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) or max_points < 2:
        raise ValueError(f"max_points must be an integer >= 2, got {max_points!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    if isinstance(source, Bounds):
        if epsilons is None:
            raise ValueError("epsilons must be given with a Bounds source (the epsilons its delta answers are for)")
        eps = check_real_array("epsilons", epsilons, low=0.0).reshape(-1)
        lo, up = _bounds_arrays(source, eps.shape)
        ok = np.isfinite(eps) & (eps <= _EPS_CAP)
        if not ok.any():
            raise ValueError("epsilons must contain a finite value <= 700")
        return _from_grid(eps[ok], lo[ok], up[ok], a, "given delta bounds", {"source": "Bounds"})
    if not isinstance(source, Accountant):
        raise ValueError(f"source must be a tightdp accountant or a delta Bounds, got {type(source).__name__}")
    if not source.ledger:
        one = np.clip(1.0 - a, 0.0, 1.0)
        return TradeoffCurve(
            a,
            one,
            one,
            0.0,
            0.0,
            np.empty(0),
            np.empty(0),
            np.empty(0),
            "nothing composed",
            {"max_gap": 0.0, "mu_exact": 0.0},
        )  # G_0(a) = 1 - a
    mu = _gaussian_ledger_mu(source)
    if mu is not None:
        out = _closed_form(mu, a)
        return TradeoffCurve(
            out.alpha,
            out.beta_lower,
            out.beta_upper,
            out.mu_lower,
            out.mu_upper,
            out.epsilons,
            out.delta_lower,
            out.delta_upper,
            out.method,
            {**out.details, "max_gap": out.max_gap, "accountant": source.name},
        )
    if source.kind != "bound":
        raise ValueError(f"source: accountant {source.name!r} gives approximations, not certified delta bounds")
    eps = _default_grid() if epsilons is None else np.unique(check_real_array("epsilons", epsilons, low=0.0))
    kinks = getattr(source, "_curve_kinks", None)
    kinks = kinks(_EPS_CAP, max_points // 2) if epsilons is None and kinks is not None else None
    if kinks is not None:  # an atoms-only ledger: delta at its kinks makes the curve exact
        eps = np.concatenate([eps, kinks])
    eps = eps[np.isfinite(eps) & (eps <= _EPS_CAP)]
    if eps.size == 0:
        raise ValueError("epsilons must contain a finite value <= 700")
    eps = np.unique(np.concatenate([[0.0], eps]))
    source = _absolute_slack_twin(source, max_gap)
    lo, up = _bounds_arrays(source.delta(eps.tolist()), eps.shape)
    queries = 1
    # past the grid's last epsilon the curves can be apart by about delta there: extend the grid until that
    # is far below the target (k = 1e6 DP-SGD steps have delta(64) = 0.92: the default grid left a gap of 0.92)
    negligible = 1e-3 * max_gap if max_gap > 0 else 1e-12
    while up[-1] > negligible and eps[-1] < _EPS_CAP and queries <= rounds:
        new = np.geomspace(max(eps[-1], 1.0), min(_EPS_CAP, 4.0 * max(eps[-1], 1.0)), 13)[1:]
        nlo, nup = _bounds_arrays(source.delta(new.tolist()), new.shape)
        queries += 1
        eps, lo, up = np.concatenate([eps, new]), np.concatenate([lo, nlo]), np.concatenate([up, nup])
    while True:
        curve = _from_grid(
            eps, lo, up, a, f"{source.name}: certified delta(eps) on {eps.size} epsilons", {"accountant": source.name}
        )
        new = _refine(curve, max_gap, min(max_points - eps.size, 4 * eps.size)) if queries <= rounds else np.empty(0)
        if new.size == 0:
            break
        nlo, nup = _bounds_arrays(source.delta(new.tolist()), new.shape)
        queries += 1
        eps, lo, up = np.concatenate([eps, new]), np.concatenate([lo, nlo]), np.concatenate([up, nup])
        o = np.argsort(eps)
        eps, lo, up = eps[o], lo[o], up[o]
    details = {
        **dict(curve.details),
        "max_gap": curve.max_gap,
        "delta_queries": queries,
        "target_gap": max_gap,
        "reached": bool(curve.max_gap <= max_gap),
    }
    if not details["reached"]:
        width = float(np.max(curve.delta_upper - curve.delta_lower))
        details["gap_note"] = (
            f"max gap {curve.max_gap:.3g} > target {max_gap:g}: the accountant's delta intervals "
            f"are up to {width:.3g} wide (a tighter accuracy option narrows them), and the grid "
            f"has {eps.size} epsilons after {queries} delta queries (max_points, rounds)"
        )
    return TradeoffCurve(
        curve.alpha,
        curve.beta_lower,
        curve.beta_upper,
        curve.mu_lower,
        curve.mu_upper,
        curve.epsilons,
        curve.delta_lower,
        curve.delta_upper,
        curve.method,
        details,
    )


def _absolute_slack_twin(source: Accountant, max_gap: float) -> Accountant:
    """``source`` with an absolute delta slack of ``1e-4 max_gap`` when it has a ``delta_error`` option
    left at its default (the same ledger and accuracy otherwise). The curves need every delta only to
    about ``max_gap``; a relative default answers each tiny delta again with tilted compositions (four
    passes for each of the default grid's epsilons in the 1e-100 region of 1000 DP-SGD steps)."""
    opts = source.options()
    if max_gap <= 0 or "delta_error" not in opts or opts["delta_error"] is not None:
        return source
    return type(source)(**{**opts, "delta_error": 1e-4 * max_gap}).compose(source.ledger)


def _bounds_arrays(b: Bounds, shape: tuple[int, ...]) -> tuple[FloatArray, FloatArray]:
    """Certified ``(lower, upper)`` delta arrays from an accountant's answer: a missing or
    non-finite lower end becomes 0, a missing or non-finite upper end 1 (both always true)."""
    if b.kind != "bound" or getattr(b, "quantity", "delta") != "delta":
        raise ValueError("source must be certified delta bounds (quantity 'delta', kind 'bound')")
    up = np.broadcast_to(np.asarray(1.0 if b.upper is None else b.upper, float), shape).copy()
    lo = np.broadcast_to(np.asarray(0.0 if b.lower is None else b.lower, float), shape).copy()
    up = np.where(np.isfinite(up), np.clip(up, 0.0, 1.0), 1.0)
    lo = np.where(np.isfinite(lo), np.clip(lo, 0.0, 1.0), 0.0)
    if np.any(lo > up):
        raise ValueError("source: a delta lower bound exceeds its upper bound")
    return lo, up
