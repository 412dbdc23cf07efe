"""Papernot & Steinke 2022's Renyi-DP bounds for a random number of runs, on a given Renyi curve.

``tuned_rdp`` maps one run's ``(lambda, eps(lambda))``-RDP curve to the curve of the procedure that runs it
``K`` times (``K`` random) and releases the best run: Theorem 2 (truncated negative binomial ``K``, the
geometric and logarithmic laws included) and Theorem 6 (Poisson ``K``). ``tightdp.tuning.tuning_epsilon``
feeds it the certified curve of a run's ledger; users holding only a Renyi curve (e.g. the one a paper
publishes) call it directly.
"""

from __future__ import annotations

import math

import numpy as np

from ._types import ArrayLike, FloatArray
from ._validation import check_choice, check_real
from .accountants import _rdp_math as rm

__all__ = ["tuned_rdp", "truncated_negative_binomial_mean"]


def truncated_negative_binomial_mean(*, gamma: float, shape: float) -> float:
    """``E K`` of the truncated negative binomial law (Papernot & Steinke 2022, Def. 1).

    Parameters
    ----------
    gamma : float
        The law's ``gamma`` in (0, 1] (``1``: ``K = 1`` surely).
    shape : float
        The law's shape ``eta >= 0`` (``1``: geometric, ``0``: logarithmic).

    Returns
    -------
    float
        ``1/gamma`` for ``shape = 1``, ``(1/gamma - 1) / log(1/gamma)`` for ``shape = 0``,
        ``shape (1/gamma - 1) / (1 - gamma^shape)`` otherwise.

    Raises
    ------
    ZeroDivisionError
        If ``gamma`` is 0: the arguments are not checked (the helper of ``tuning_epsilon``, exported for those
        who set ``gamma`` themselves).
    """
    if shape == 1.0:
        return 1.0 / gamma
    if shape == 0.0:
        return (1.0 / gamma - 1.0) / -math.log(gamma) if gamma < 1.0 else 1.0
    if gamma >= 1.0:
        return 1.0
    return shape * (1.0 / gamma - 1.0) / -math.expm1(shape * math.log(gamma))


_SHAPES = {"geometric": 1.0, "logarithmic": 0.0}


def tuned_rdp(
    *,
    orders: ArrayLike,
    rdp: ArrayLike,
    distribution: str,
    gamma: float | None = None,
    shape: float | None = None,
    mean: float | None = None,
    delta_hat: ArrayLike | None = None,
) -> FloatArray:
    """The Renyi curve of tuning with a random number of runs, from one run's Renyi curve.

    One run is ``(lambda, rdp(lambda))``-RDP at every order of ``orders``; the procedure draws ``K``, runs it
    ``K`` times and releases the best run (Papernot & Steinke 2022). The returned curve is non-increasing
    towards small orders (an ``(lambda, e)``-RDP procedure is ``(lambda', e)``-RDP for ``lambda' < lambda``).

    Parameters
    ----------
    orders : array_like of float
        The Renyi orders, each finite and ``> 1`` (1-D).
    rdp : array_like of float
        One run's Renyi divergence bound at each order, ``>= 0`` (``inf`` allowed), same length.
    distribution : str
        ``"geometric"`` (shape 1), ``"logarithmic"`` (shape 0), ``"negative-binomial"`` (``shape``) or
        ``"poisson"`` (``mean``).
    gamma : float, optional
        The truncated negative binomial law's ``gamma`` in (0, 1) (required for the three
        negative-binomial laws, refused for ``"poisson"``).
    shape : float, optional
        The shape ``eta > 0`` for ``"negative-binomial"`` (required there, refused otherwise).
    mean : float, optional
        ``E K >= 1`` for ``"poisson"`` (required there, refused otherwise). Below 1 Theorem 6's
        ``log(mean) / (lambda - 1)`` term can drive the bound below 0, which no Renyi divergence is: refused.
    delta_hat : array_like of float, optional
        ``"poisson"`` only: one run's ``delta`` at ``eps^ = log(1 + 1/(lambda - 1))`` for each order, in
        ``[0, 1]``. Default: converted from ``rdp`` (Canonne, Kamath, Steinke 2020 Prop. 12, capped by
        Bretagnolle-Huber), the conversion Papernot & Steinke's code uses.

    Returns
    -------
    numpy.ndarray
        The procedure's Renyi bound at each order: Theorem 2,
        ``rdp(lambda) + log(E K)/(lambda - 1) + (1 + eta) min_l [(1 - 1/l) rdp(l) + log(1/gamma)/l]``
        (the minimum over the grid); Theorem 6, ``rdp(lambda) + mean delta^(lambda) + log(mean)/(lambda - 1)``.

    Raises
    ------
    ValueError
        ``orders`` / ``rdp`` / ``delta_hat`` malformed or out of range, an unknown ``distribution``, or a
        parameter missing, out of range or not meaningful for the law (named).

    References
    ----------
    Papernot & Steinke 2022, "Hyperparameter tuning with Renyi differential privacy" (ICLR), Theorem 2 and
    Theorem 6.

    Examples
    --------
    >>> import numpy as np
    >>> orders = np.array([2.0, 4.0, 8.0])
    >>> out = tuned_rdp(orders=orders, rdp=orders / 8.0, distribution="geometric", gamma=0.1)
    >>> bool(np.all(out > orders / 8.0))
    True
    """
    check_choice("distribution", distribution, ("geometric", "logarithmic", "negative-binomial", "poisson"))
    lam = np.asarray(orders, dtype=float)
    eps = np.asarray(rdp, dtype=float)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)) or not np.all(lam > 1.0):
        raise ValueError("orders must be a non-empty 1-D array of finite orders > 1")
    if eps.shape != lam.shape or np.any(np.isnan(eps)) or np.any(eps < 0.0):
        raise ValueError("rdp must be an array of Renyi bounds >= 0 (inf allowed), one per order")
    if distribution == "poisson":
        if gamma is not None or shape is not None:
            raise ValueError("gamma and shape apply to the negative-binomial laws, not to distribution='poisson'")
        if mean is None:
            raise ValueError("mean is required for distribution='poisson'")
        mu = check_real("mean", mean, low=1.0, low_open=False)
        if delta_hat is None:
            d_hat, _ = rm.delta_from_rdp(orders=lam, rdp=eps, epsilons=np.log1p(1.0 / (lam - 1.0)))
        else:
            d_hat = np.asarray(delta_hat, dtype=float)
            if d_hat.shape != lam.shape or not np.all((d_hat >= 0.0) & (d_hat <= 1.0)):
                raise ValueError("delta_hat must be an array of deltas in [0, 1], one per order")
        out: FloatArray = eps + mu * d_hat + math.log(mu) / (lam - 1.0)
    else:
        if mean is not None or delta_hat is not None:
            raise ValueError("mean and delta_hat apply to distribution='poisson'")
        if gamma is None:
            raise ValueError(f"gamma is required for distribution={distribution!r}")
        g = check_real("gamma", gamma, low=0.0, high=1.0)
        if distribution == "negative-binomial":
            if shape is None:
                raise ValueError("shape is required for distribution='negative-binomial'")
            eta = check_real("shape", shape, low=0.0)
        elif shape is not None:
            raise ValueError(f"shape is fixed by distribution={distribution!r}; leave it out")
        else:
            eta = _SHAPES[distribution]
        out = theorem_2(lam, eps, gamma=g, shape=eta)
    return np.minimum.accumulate(out[::-1])[::-1]


def theorem_2(orders: FloatArray, rdp: FloatArray, *, gamma: float, shape: float) -> FloatArray:
    """Papernot & Steinke 2022 Theorem 2 at every order, ``lambda^`` minimised over the grid (unchecked)."""
    e_k = truncated_negative_binomial_mean(gamma=gamma, shape=shape)
    c = (1.0 + shape) * float(np.min((1.0 - 1.0 / orders) * rdp - math.log(gamma) / orders))
    out: FloatArray = rdp + math.log(e_k) / (orders - 1.0) + c
    return out


def gamma_for_mean(mean: float, shape: float) -> float:
    """The largest ``gamma`` whose mean is at least ``mean`` (bisection; a smaller ``gamma`` only raises the
    Theorem 2 bound, so rounding this way keeps it an upper bound)."""
    if shape == 1.0:
        return 1.0 / mean
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= 0.0 or mid >= 1.0:
            break
        if truncated_negative_binomial_mean(gamma=mid, shape=shape) >= mean:
            lo = mid
        else:
            hi = mid
    return lo
