"""The renewal chain of b-min-sep sampling (jax_privacy's ``BMinSepSampling``; Dong & Ganesh 2026): the
exact law of a record's participation count in a window, by dynamic programming, with its rounding bound.

The sampler is a renewal process per record: at every step a record that did not take part in the previous
``min_sep - 1`` steps ("eligible") joins the batch with probability ``p``, on a fresh coin. The chain's state
is ``d``, the number of steps until the record is eligible again (``0``: eligible now); a participation sets
``d = min_sep - 1``. A cold start is ``d = 0``; the warm (stationary) start is jax_privacy's: ``d = 0`` with
probability ``1 / (1 + (min_sep - 1) p)`` and ``d = k`` (``k = 1 .. min_sep - 1``) with ``p / (1 + (min_sep - 1)
p)`` each.
"""

from __future__ import annotations

import numpy as np

from .._types import FloatArray

__all__ = ["initial_state", "law_error", "participation_law"]

_U = float(np.finfo(float).eps) / 2


def initial_state(p: float, min_sep: int, warm_start: bool) -> FloatArray:
    """The law of the chain's state ``d`` (steps until eligible) at step 0.

    Parameters
    ----------
    p : float
        The rate ``p`` in ``(0, 1]``.
    min_sep : int
        The least distance between two participations (``>= 1``).
    warm_start : bool
        The stationary start (jax_privacy's ``warm_start=True``) or eligible at step 0.

    Returns
    -------
    numpy.ndarray
        ``min_sep`` probabilities, index ``d``.
    """
    out = np.zeros(min_sep)
    if not warm_start or min_sep == 1:
        out[0] = 1.0
        return out
    out[0] = 1.0 / (1.0 + (min_sep - 1) * p)
    out[1:] = p * out[0]
    return out


def participation_law(
    n: int, p: float, min_sep: int, warm_start: bool, start: int = 0, stop: int | None = None
) -> FloatArray:
    """The exact law of the number of participations in steps ``[start, stop)`` of an ``n``-step run.

    A dynamic program over the renewal chain (module docstring): ``law[d, k]`` is the probability of state
    ``d`` with ``k`` participations counted so far. Every entry is a sum of at most two non-negative terms,
    each a product by ``p`` or ``1 - p``, so in floating point each computed entry is within relative
    ``(3 t + 8) u`` of the exact one after ``t`` steps (``law_error`` bounds the total).

    Parameters
    ----------
    n : int
        Steps of the run (the window must lie in ``[0, n]``).
    p : float
        The rate in ``(0, 1]``.
    min_sep : int
        The least distance between two participations.
    warm_start : bool
        The stationary start.
    start, stop : int, optional
        The window (default the whole run).

    Returns
    -------
    numpy.ndarray
        ``pmf[k]``, ``k = 0 .. ceil((stop - start) / min_sep)``.

    Raises
    ------
    ValueError
        A window outside ``[0, n]``.
    """
    stop = n if stop is None else stop
    if not 0 <= start <= stop <= n:
        raise ValueError(f"window [{start}, {stop}) must lie in [0, {n}]")
    # state d is stored at index (ptr + d) % min_sep: one step moves ptr on (d -> d - 1), the eligible
    # state's mass splits into "stay eligible" (new d = 0) and "participate" (new d = min_sep - 1)
    law = initial_state(p, min_sep, warm_start)
    q = 1.0 - p
    ptr = 0
    for _ in range(start):  # before the window: the state only
        eligible = law[ptr]
        law[ptr] = eligible * p
        ptr = (ptr + 1) % min_sep
        law[ptr] += eligible * q
    kmax = -(-(stop - start) // min_sep)
    joint = np.zeros((min_sep, kmax + 1))
    joint[:, 0] = law
    for t in range(stop - start):
        top = min(kmax, t // min_sep + 1)  # counts above are still zero
        eligible = joint[ptr, : top + 1].copy()
        joint[ptr, 0] = 0.0
        joint[ptr, 1 : top + 1] = eligible[:top] * p
        ptr = (ptr + 1) % min_sep
        joint[ptr, : top + 1] += eligible * q
    return np.asarray(joint.sum(axis=0), dtype=np.float64)


def law_error(n: int, min_sep: int) -> float:
    """A bound on the relative error of every probability ``participation_law`` computes (so also on the l1
    distance to the exact law).

    Parameters
    ----------
    n : int
        Steps of the run.
    min_sep : int
        The least distance (the final sum over states adds ``min_sep`` terms).

    Returns
    -------
    float
        The bound ``1.01 (3 n + min_sep + 16) u`` (``u`` the unit roundoff).
    """
    return 1.01 * (3 * n + min_sep + 16) * _U
