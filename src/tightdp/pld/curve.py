"""Certified bounds on delta(eps) and eps(delta) from a composed PLD (Gopi et al. 2021, Thm 5.5, made explicit).

For the composed PRV ``S`` and its discretisation ``S~`` (a ``ComposedPLD``):

* coupling (Gopi et al. 2021, Lemma 5.2-5.3): ``P(S - S~ > t) <= eta`` and ``P(S~ - S > t) <= eta``;
* the hockey-stick integrand ``f_eps(s) = (1 - e^{eps - s})_+`` is non-decreasing
  and bounded by 1, so
  ``delta(eps) <= p_inf + delta_disc(eps - t) + err(eps - t) + eta`` and
  ``delta(eps) >= p_inf + delta_disc(eps + t) - err(eps + t) - eta - truncated``,
  where ``p_inf`` is the mass at +inf (including mass truncated above, which the
  upper variant sends there), ``err`` bounds aliasing, window truncation and FFT
  round-off, and ``truncated`` is all mass the truncation moved (the lower bound
  pays for it because ``Y`` and ``Y^U`` differ only there); ``tv`` is the l1 error
  of re-binned blocks (hierarchical composition) and of cells whose mass is not
  known to relative precision, paid on both sides; the computed cell masses are
  otherwise within a relative error ``r`` of the exact ones, so the composed
  masses are within the factors ``[(1 + r)^-k, (1 - r)^-k]`` (``up_rel``,
  ``low_factor``).

``eps(delta)`` bounds invert these monotone envelopes exactly (the discrete
``delta_disc`` is continuous and piecewise ``A - e^eps B``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import ArrayLike, FloatArray
from .composition import ComposedPLD

__all__ = ["CurveBounds", "delta_bounds", "epsilon_bounds"]


_U = float(np.finfo(float).eps) / 2


@dataclass(frozen=True)
class CurveBounds:
    """Certified ``(lower, estimate, upper)`` on ``eps(delta)`` of one composed PLD (``epsilon_bounds``).

    Parameters
    ----------
    lower : float
        Certified lower bound (0 when not asked for or not certifiable).
    estimate : float
        The discrete PLD's own epsilon, clipped into ``[lower, upper]`` (no guarantee).
    upper : float
        Certified upper bound (``inf`` with a ``note`` when none is finite).
    note : str or None, default None
        Why ``upper`` is infinite, when it is.
    numerical_error : float, default 0.0
        The aliasing / round-off allowance the bounds include.

    Raises
    ------
    TypeError
        A missing field (the dataclass constructor; the fields are not validated).
    """

    lower: float
    estimate: float
    upper: float
    note: str | None = None
    numerical_error: float = 0.0  # the aliasing/round-off allowance the bounds include


def delta_bounds(comp: ComposedPLD, eps: ArrayLike, eta: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Arrays ``(lower, estimate, upper)`` of delta at each ``eps``.

    Parameters
    ----------
    comp : ComposedPLD
        The composition.
    eps : array_like
        Epsilons (any shape).
    eta : float
        The coupling's failure probability in (0, 1): the bounds pay ``eta`` on each side.

    Returns
    -------
    tuple of FloatArray
        ``(lower, estimate, upper)``, each the shape of ``eps``, in [0, 1].

    Raises
    ------
    ValueError
        If ``eps`` is not numeric, or as ``ComposedPLD.coupling_shift`` for a bad ``eta``.
    ZeroDivisionError
        As ``ComposedPLD.coupling_shift`` (``eta == 0``).

    References
    ----------
    Gopi, Lee, Wutschitz 2021, Thm 5.5, with every error term explicit (module docstring).
    """
    e: FloatArray = np.asarray(eps, float)
    t = comp.coupling_shift(eta)
    p_inf = comp.infinity_mass
    # the mass at infinity is a float of 1 - prod (1 - m_i)^c: relative 1e-12 covers its rounding on either side
    inf_low, inf_high = p_inf * (1.0 - 1e-12), p_inf * (1.0 + 1e-12)
    tv, up, lo_f = comp.tv_error, 1.0 + comp.up_rel, comp.low_factor
    upper = inf_high + (comp.delta_disc(e - t) + comp.numerical_error(e - t)) * up + eta + tv
    lower = inf_low + (comp.delta_disc(e + t) - comp.numerical_error(e + t)) * lo_f - eta - tv - comp.truncated_mass
    est = p_inf + comp.delta_disc(e)
    upper = np.minimum(upper, 1.0)
    lower = np.clip(lower, 0.0, 1.0)
    est = np.clip(est, lower, upper)
    return lower, est, upper


def epsilon_bounds(comp: ComposedPLD, delta: float, eta: float, *, need: str = "lower estimate upper") -> CurveBounds:
    """Certified ``(lower, estimate, upper)`` on ``eps(delta)`` for one composed PLD.

    ``need`` names the fields to compute (the dominance accountant wants only
    the upper bound and estimate of one composition and the lower bound of
    another); the others are returned as ``0`` (lower) or ``inf``.

    Parameters
    ----------
    comp : ComposedPLD
        The composition.
    delta : float
        The target delta in (0, 1).
    eta : float
        The coupling's failure probability in (0, 1).
    need : str, default "lower estimate upper"
        The fields to compute, by name.

    Returns
    -------
    CurveBounds
        The bounds and the numerical allowance they include.

    Raises
    ------
    ValueError
        As ``ComposedPLD.coupling_shift`` for a bad ``eta``.
    ZeroDivisionError
        As ``ComposedPLD.coupling_shift`` (``eta == 0``).
    PrecisionError
        If a root finder meets NaN (``tightdp._numerics.falling_root``).

    References
    ----------
    Gopi, Lee, Wutschitz 2021, Thm 5.5, inverted on the monotone envelopes of the module docstring.
    """
    t = comp.coupling_shift(eta)
    p_inf = comp.infinity_mass
    note = None
    used = 0.0
    # upper: smallest eps with p_inf + delta_disc(eps - t) + err(eps - t) + eta <= delta (p_inf rounded up, as
    # below)
    target_u = delta - p_inf * (1.0 + 1e-12) - eta - comp.tv_error
    if "upper" not in need:
        upper = math.inf
    elif target_u <= 0:
        upper = math.inf
        terms = {
            "the probability of an infinite privacy loss": p_inf,
            "the error budget": eta,
            "the discretisation's floating-point error (tv_error)": comp.tv_error,
        }
        cause = max(terms, key=lambda name: terms[name])
        note = (
            f"delta={delta:g} is not above {cause} ({terms[cause]:.3g}); the terms: infinite loss {p_inf:.3g}, "
            f"error budget {eta:.2g}, floating-point error {comp.tv_error:.3g}: no finite epsilon can be "
            "certified"
        )
    else:
        up = 1.0 + comp.up_rel
        e_u = comp.solve_epsilon(target_u / up, comp.numerical_error, eps_min=-t)
        # the condition holds at e_u itself (solve_epsilon evaluates it there); 1e-12 more to the safe side
        upper = max(0.0, e_u + t + 1e-12) if math.isfinite(e_u) else math.inf
        if math.isfinite(e_u):
            used = float(comp.numerical_error(e_u))
        if not math.isfinite(upper):
            note = "the composition window ended before delta was reached"
    # estimate
    target_e = delta - p_inf
    if "estimate" not in need:
        est = math.inf
    else:
        est = math.inf if target_e <= 0 else max(0.0, comp.solve_epsilon(target_e, eps_min=0.0))
    # lower: largest eps with p_inf + delta_disc(eps + t) - err(eps + t) - eta - truncated >= delta
    # (the mass at infinity is a float of a product of (1 - m_i)^c: relative 1e-12 covers its rounding)
    target_l = (delta + eta + comp.tv_error + comp.truncated_mass - p_inf * (1.0 - 1e-12)) / comp.low_factor
    if "lower" not in need:
        lower = 0.0
    elif target_l < 0:
        lower = math.inf  # the mass at infinity alone exceeds delta: eps is infinite
    else:
        # target 0 (the mass at infinity equals delta): the curve must exceed delta *strictly* for eps to be
        # above the point, so the least positive target (delta(eps) = delta is allowed at the answer itself)
        target_l = max(target_l, math.ulp(0.0))
        e0 = comp.solve_epsilon(target_l, eps_min=-t)
        if not math.isfinite(e0):
            lower = 0.0
        else:
            # the allowance c = err(ref) is evaluated at some ref <= the solution e1: err is
            # non-increasing, so err(e1) <= c and delta_disc(e1) - err(e1) >= target_l. Far in the
            # tail (tilted FFTs) err grows fast below e0, so ref steps down from e0 until the
            # solution lands above it (one fixed jump to ref = -t made the bound vacuous there)
            gap = 2.0 * max(t, comp.h)
            ref = e0 - gap
            for _ in range(64):
                c = float(comp.numerical_error(ref))
                e1 = comp.solve_epsilon(target_l + c, eps_min=-t)
                if not math.isfinite(e1) or e1 >= ref or ref <= -t:
                    break
                gap *= 2.0
                ref = max(-t, min(e1, e0 - gap) - gap)
            if math.isfinite(e1) and e1 < ref:  # never found: the allowance everywhere above -t
                c = float(comp.numerical_error(-t))
                e1 = comp.solve_epsilon(target_l + c, eps_min=-t)
            # e1 lies within 1e-13 + 4 u |e1| above the crossing (solve_epsilon's bracket): step below it
            lower = max(0.0, e1 - t - 1e-12 - 8.0 * _U * abs(e1)) if math.isfinite(e1) else 0.0
            if e1 - t > 0:
                used = max(used, c)
    if math.isfinite(upper):
        lower = min(lower, upper)
    est = min(max(est, lower), upper)
    return CurveBounds(lower, est, upper, note, used)
