"""The report's lower trade-off curve: ``tradeoff_lower_curve`` and ``tradeoff_from_accountant``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri

from .._types import ArrayLike, FloatArray
from .._validation import check_real_array
from ._geometry import (
    _EPS_CAP,
    _beta_from_c,
    _c_upper,
    _monotone,
    _upper_lines,
)

if TYPE_CHECKING:
    from ..accountants.base import Accountant


# ============================================================================== the report's lower curve
def tradeoff_lower_curve(
    epsilons: ArrayLike, delta_upper: ArrayLike, alphas: ArrayLike | None = None
) -> tuple[FloatArray, FloatArray]:
    """A certified lower bound on the f-DP trade-off curve beta(alpha) from certified upper delta(epsilon).

    An (eps, delta)-DP guarantee holding for both orders of the neighbouring pair
    gives, for every test of type-I error alpha, type-II error at least
    ``f_(eps,delta)(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))``
    (Dong, Roth, Su 2022, Prop. 2.5); a mechanism that is (eps, delta(eps))-DP for
    every eps has trade-off ``sup_eps f_(eps, delta(eps))`` (their Prop. 2.12;
    for mu-GDP exactly ``Phi(Phi^-1(1 - alpha) - mu)``, Cor. 2.13). Taking the
    supremum over the finite set ``epsilons`` with *upper* bounds on delta can only
    lower each term, so the result is a certified lower bound on the true trade-off
    curve (the attacker's best test errs at least this often). Computed in TPR space
    (``1 - beta``) with a 16-ulp relative margin, then rounded down.

    Parameters
    ----------
    epsilons : array_like
        Epsilons, each >= 0 (non-empty).
    delta_upper : array_like
        Certified upper bounds on delta at ``epsilons``, same shape, each in [0, 1].
    alphas : array_like, optional
        Where the curve is evaluated, each in [0, 1] (default: 201 points).

    Returns
    -------
    tuple of (FloatArray, FloatArray)
        ``(alphas, betas)``: the certified lower curve.

    Raises
    ------
    ValueError
        If an argument is out of its domain or the shapes differ.
    """
    eps = check_real_array("epsilons", epsilons, low=0.0)
    dl = np.asarray(delta_upper, float)
    if dl.shape != eps.shape:
        raise ValueError(f"delta_upper must have the shape of epsilons {eps.shape}, got {dl.shape}")
    if eps.size == 0:
        raise ValueError("epsilons must not be empty")
    if not np.all(np.isfinite(dl)) or np.any(dl < 0) or np.any(dl > 1):
        raise ValueError("delta_upper must be finite numbers in [0, 1] (certified upper bounds on delta)")
    a = np.linspace(0.0, 1.0, 201) if alphas is None else check_real_array("alphas", alphas, low=0.0)
    if np.any(a > 1):
        raise ValueError("alphas must be in [0, 1]")
    eps, dl = eps.reshape(-1), dl.reshape(-1)
    keep = np.isfinite(eps) & (eps <= _EPS_CAP)  # leaving lines out keeps a lower bound
    if not keep.any():
        return a, np.zeros(np.shape(a))
    e, d_up, _ = _monotone(eps[keep], dl[keep], None)
    d, s = _upper_lines(e, d_up)
    flat = np.asarray(a, float).reshape(-1)
    return a, _beta_from_c(_c_upper(flat, d, s), down=True).reshape(np.shape(a))


def tradeoff_from_accountant(
    accountant: Accountant, epsilons: ArrayLike | None = None, alphas: ArrayLike | None = None
) -> tuple[FloatArray, FloatArray]:
    """``tradeoff_lower_curve`` from a composed accountant's certified upper delta(epsilon).

    ``epsilons`` defaults to 120 points in [0, 40] (denser near 0). Entries whose
    upper delta is not certified (missing or not finite) are left out, which keeps
    the curve a lower bound. Needs an accountant whose ``delta`` answers are bounds.

    Parameters
    ----------
    accountant : Accountant
        A composed accountant with certified ``delta`` answers.
    epsilons : array_like, optional
        Epsilons, each >= 0 (default: 120 points in [0, 40]).
    alphas : array_like, optional
        Where the curve is evaluated (default: 201 points in [0, 1]).

    Returns
    -------
    tuple of (FloatArray, FloatArray)
        ``(alphas, betas)``: the certified lower curve.

    Raises
    ------
    ValueError
        If the accountant gives approximations, or no epsilon has a certified upper delta.
    """
    eps = (
        np.concatenate([np.linspace(0.0, 4.0, 60, endpoint=False), np.geomspace(4.0, 40.0, 60)])
        if epsilons is None
        else check_real_array("epsilons", epsilons, low=0.0)
    )
    b = accountant.delta(eps.tolist())
    if b.kind != "bound":
        raise ValueError(f"accountant {accountant.name!r} gives approximations, not certified delta bounds")
    up = np.asarray(b.upper, float).reshape(-1)
    ok = np.isfinite(up) & (up <= 1) & (up >= 0)
    if not ok.any():
        raise ValueError("no certified upper delta at any of the epsilons")
    return tradeoff_lower_curve(eps[ok], up[ok], alphas)


def _normal_tradeoff_for_tests(mu: float, alphas: ArrayLike) -> FloatArray:
    """Phi(Phi^-1(1 - alpha) - mu), the mu-GDP trade-off (Dong, Roth, Su 2022, Def. 2.7); for tests."""
    out: FloatArray = ndtr(ndtri(1.0 - np.asarray(alphas, float)) - mu)
    return out
