"""Closed-form bounds on a composition's ``delta(eps)`` from each step alone, with no grid.

* **Upper**: the total variation distance of a product of pairs is at most the sum of the pairs' (couple the steps
  one by one), and ``delta(eps) <= delta(0) = TV`` for ``eps >= 0`` (for ``eps < 0``, ``delta(eps) = sup_E P(E) -
  Q(E) + (1 - e^eps) Q(E) <= TV + 1 - e^eps``). Each step's ``PrivacyLoss.total_variation`` is a certified bound.
* **Lower**: for any set ``E`` of outputs, ``delta(eps) >= P(E) - e^eps Q(E)``. With ``E_i`` the outputs where step
  ``i``'s loss exceeds ``t = eps`` (``PrivacyLoss.event_masses``, at every epsilon in one call: lower bounds on the
  P-masses of ``E_i`` and its complement, upper ones on the Q-masses) and the steps independent, ``E`` is the
  outputs where *some* step's ``E_i`` occurs, or one step's ``E_i`` alone, the larger value counting
  (``_events.event_delta_lower``: the composed masses, their rounding, and Q-masses that underflowed).

Where every step's loss is small except on rare outputs (a record sampled once in a billion, a Laplace step of
loss 1000 behind a rate of 1e-9), both ends are within ``O(k q)`` relative of each other, and of the truth: a grid
would need a mesh at the scale of the common outputs' loss (1e-9) across the rare ones' (up to 700 and beyond).
Elsewhere they are loose, and only narrow what the grids certify (intervals are intersected).
"""

from __future__ import annotations

import numpy as np

from .._types import FloatArray
from ._events import StepEvent, event_delta_lower
from ._pld import Directions

__all__ = ["step_delta_bounds", "total_variation_bound"]

_U = float(np.finfo(float).eps) / 2


def total_variation_bound(directions: Directions) -> float | None:
    """A certified upper bound on ``delta(0)`` of the composition (the larger of the directions'): the sum of its
    steps' ``total_variation``, or ``None`` where a step has none.

    Parameters
    ----------
    directions : list of list of (PrivacyLoss, int)
        Per direction, the distinct losses and their counts.

    Returns
    -------
    float or None
        The bound, in ``[0, 1]``.
    """
    worst = 0.0
    for terms in directions:
        total = 0.0
        for loss, c in terms:
            tv = loss.total_variation()
            if tv is None or not tv >= 0.0:  # (a NaN from a loss at the edge of double precision: no bound)
                return None
            total += c * tv
        worst = max(worst, total * (1.0 + (len(terms) + 2) * 4 * _U))  # the sum's rounding
    return min(worst, 1.0)


def step_delta_bounds(directions: Directions, epsilons: FloatArray) -> tuple[FloatArray, FloatArray] | None:
    """``(lower, upper)`` on ``delta`` at each of ``epsilons`` (module docstring), or ``None`` where a step gives no
    total variation bound or no event masses.

    Parameters
    ----------
    directions : list of list of (PrivacyLoss, int)
        Per direction, the distinct losses and their counts.
    epsilons : FloatArray
        The epsilons, one-dimensional.

    Returns
    -------
    tuple of FloatArray or None
        Certified lower and upper ends, each the shape of ``epsilons``.
    """
    tv = total_variation_bound(directions)
    if tv is None:
        return None
    eps = np.asarray(epsilons, float)
    upper = np.minimum(1.0, tv + np.maximum(0.0, -np.expm1(np.minimum(eps, 0.0))) * (1.0 + 4 * _U))
    lower = np.zeros_like(eps)
    floor = eps - 1e-9 * (1.0 + np.abs(eps))  # the true loss on E: the computed one within 1e-9 (1 + |t|)
    for terms in directions:
        steps = []
        for loss, c in terms:
            m = loss.event_masses(eps)
            if m is None:
                return None
            # (NaN from a loss at the edge of double precision: the trivial ends, 0 below and 1 above)
            p, q, p_out, q_out = (np.where(np.asarray(v, float) >= 0.0, v, d) for v, d in zip(m, (0.0, 1.0, 0.0, 1.0)))
            steps.append(StepEvent(p, q, p_out, q_out, floor, c))
        lower = np.maximum(lower, event_delta_lower(steps, eps, "union"))
    return lower, upper
