"""Two-level dominance composition (what the connect-the-dots accountant uses at long horizons).

Blocks of steps' dominating (or dominated) pairs are composed on a fine mesh, each block re-discretised as a
connect-the-dots pair (or a merge-to-the-grid pair) on a coarse mesh, and the blocks composed there
(``compose_two_level``); the blocks' FFT errors are carried as input errors of the final composition.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple, cast

import numpy as np

from .._types import FloatArray
from .composition import ComposedPLD, compose
from .discretise import DiscretisedLoss, Terms
from .dominance import merge_cells, split_cells

__all__ = ["BlockError", "compose_two_level", "dominated_block", "dominating_block"]

_U = cast(float, np.finfo(float).eps / 2)  # unit round-off (a numpy float64)


def _check_mesh(g: float) -> None:
    """Refuse a coarse mesh that is not a positive finite number (``ValueError`` naming ``g``)."""
    if not (g > 0.0 and math.isfinite(g)):
        raise ValueError(f"the coarse mesh g must be positive and finite, got {g!r}")


def _block_cells(
    comp: ComposedPLD, g: float, upper: bool
) -> tuple[FloatArray, FloatArray, FloatArray, float, float, float, int] | None:
    """The cells ``(s_j, s_(j+1)]`` of ``g Z`` holding a composed block's atoms: ``(s, P, Q, r, l1, inf, j0)``.

    The computed block differs from the exact composition of its steps' pairs by at most
    ``err = float_error + 2 alias_mass`` in l1 in its tilted measure (round-off, the mass wrapped into the
    window and the mass outside it), and pointwise by at most ``float_error + alias_mass``; the relative
    errors of the steps' masses add the factors ``[low_factor, 1 + up_rel]``.

    * ``upper``: the computed masses times ``1 + up_rel``; the l1 error is the caller's to charge
      (``compose_two_level``). Adding the pointwise bound to every atom instead would put about
      ``N err`` of mass into the block's far tails, where a thousand blocks make it count.
    * lower: a pointwise *lower envelope* of the exact masses (the pointwise error subtracted, clipped at
      0, times ``low_factor``). A sub-measure with each atom's Q-mass ``e^(-x)`` times its P-mass has a
      smaller hockey-stick divergence than the exact block, for every composition, and merging its atoms
      is a post-processing (the argument of ``dominated``), so no l1 term is needed: the merge's
      fractions would turn one into an error of ``e^eps`` times the Q-side's.
    """
    lam, x, t = comp.tilt, comp.x, comp.tilted
    if upper:
        t = t * (1.0 + comp.up_rel)
    else:
        point = (
            comp.l1_error
            if comp.pointwise_error is None
            else (comp.pointwise_error + comp.input_error + comp.input_round_off[1])
        )
        t = np.maximum(t - (point + comp.alias_mass), 0.0) * comp.low_factor
    nz = np.flatnonzero(t)
    if nz.size == 0 or not math.isfinite(comp.log_norm):
        return None
    x, t = x[nz[0] : nz[-1] + 1], t[nz[0] : nz[-1] + 1]
    arg = comp.log_norm - lam * x
    if not (np.all(np.abs(arg) < 700.0) and np.all(np.abs(x) < 700.0)):
        return None  # masses beyond double precision: the caller composes on one level
    w = t * np.exp(arg)
    j = np.ceil(x / g).astype(np.int64) - 1  # s_j < x <= s_(j+1), up to the rounding of x / g
    j0 = int(j[0])
    P = cast(FloatArray, np.bincount(j - j0, weights=w))  # float64: weighted
    Q = cast(FloatArray, np.bincount(j - j0, weights=w * np.exp(-x)))
    s: FloatArray = (j0 + np.arange(P.size + 1)) * g
    per_cell = math.ceil(g / comp.h) + 1
    xmax = float(np.max(np.abs(x)))
    # sums of at most per_cell non-negative terms; exp's argument rounded (|log_norm| + |lam x| + |x| units);
    # log_norm sums the steps' log-normalisations (a few units of round-off each)
    r = _U * (per_cell + 2 + 4.0 * (2.0 + abs(comp.log_norm) + abs(lam) * xmax + xmax) + 8.0 * comp.compositions)
    return s, P, Q, r, comp.tv_error, comp.infinity_mass, j0


class BlockError(NamedTuple):
    """How far a re-discretised block (``dominating_block``) may be from the pair of the exact block, in the
    pair's own normalised tilted measure: ``window`` in l1 only (the block's aliasing), ``round_off`` in l1
    and ``pointwise`` entry by entry (the block's FFT round-off, carried through the split)."""

    window: float
    round_off: float
    pointwise: float

    @property
    def l1(self) -> float:
        return self.window + self.round_off


def dominating_block(comp: ComposedPLD, g: float) -> tuple[DiscretisedLoss, BlockError] | None:
    """A connect-the-dots pair on ``g Z`` for a composed block ``comp`` of dominating pairs on a finer mesh
    (``pld.dominance.split_cells`` on its cells), and its distance from the pair of the exact block, which
    dominates it (``BlockError``, in the pair's own normalised ``comp.tilt``-tilted measure). The split is
    linear and, tilted, multiplies an atom's mass by at most ``e^(|tilt| (g + 2e))``; it never lowers the
    tilted total (Jensen: it keeps each atom's Q-mass, ``E[e^(-X)] = e^(-x)``, and ``t -> t^(-tilt)`` is
    convex). Entry by entry: a coarse atom takes the upper part of one cell and the lower part of the next,
    each part moving by at most its cell's errors (the split's fractions lie in ``[0, 1]``; its safety term
    ``r (P + alpha Q) / den`` moves by ``2 r / den`` of them), so at most ``(3 + 4 r / den)`` cells' worth,
    ``ceil(g / h) + 1`` fine atoms each. ``None`` where the block's masses leave double precision.

    Parameters
    ----------
    comp : ComposedPLD
        A composed block of dominating pairs.
    g : float
        The coarse mesh (> 0).

    Returns
    -------
    tuple or None
        ``(pair, error)``: the ``DiscretisedLoss`` and its ``BlockError``; or ``None``.

    Raises
    ------
    ValueError
        If ``g`` is not positive and finite.

    References
    ----------
    Doroshenko et al. 2022 (connect-the-dots); Koskela et al. 2023, App. C.6 (dominance under composition).
    """
    _check_mesh(g)
    cells = _block_cells(comp, g, upper=True)
    if cells is None:
        return None
    s, P, Q, r, l1, inf, j0 = cells
    # cell edges: an atom within rounding of s_(j+1) may have gone to cell j + 1; the edge margin covers it
    e = 8.0 * _U * (1.0 + float(np.max(np.abs(s))))
    out = split_cells(g, s, P, Q, r, l1, 0.0, 0.0, inf, j0, e, 0.0)
    total = float(np.sum(comp.tilted))
    scale = (1.0 + comp.up_rel) * math.exp(abs(comp.tilt) * (g + 2.0 * e)) / max(total * (1.0 - 1e-12), 1e-300)
    point = comp.float_error if comp.pointwise_error is None else comp.pointwise_error
    per_cell = math.ceil(g / comp.h) + 1
    spread = (3.0 + 4.0 * (r + 4.0 * _U) / -math.expm1(-(g + 2.0 * e))) * per_cell
    err = BlockError(
        window=(2.0 * comp.alias_mass + comp.input_error) * scale,
        round_off=(comp.float_error + comp.input_round_off[0]) * scale,
        pointwise=(point + comp.input_round_off[1]) * spread * scale,
    )
    return replace(out, truncated_mass=comp.truncated_mass), err


def dominated_block(comp: ComposedPLD, g: float, *, top_down: bool = False) -> DiscretisedLoss | None:
    """A merge-to-the-grid pair on ``g Z`` dominated by the exact composition that ``comp`` (a composition
    of dominated pairs on a finer mesh) approximates: ``pld.dominance.merge_cells`` on the cells of a
    pointwise lower envelope of its masses (``_block_cells``). ``None`` as for ``dominating_block``.

    Parameters
    ----------
    comp : ComposedPLD
        A composed block of dominated pairs.
    g : float
        The coarse mesh (> 0).
    top_down : bool, default False
        Merge downwards instead of upwards (``pld.dominance.dominated``).

    Returns
    -------
    DiscretisedLoss or None
        The dominated pair, or ``None``.

    Raises
    ------
    ValueError
        If ``g`` is not positive and finite.
    """
    _check_mesh(g)
    cells = _block_cells(comp, g, upper=False)
    if cells is None:
        return None
    s, P, Q, r, l1, inf, j0 = cells
    out = merge_cells(g, s, (P, Q, None), r, l1, 0.0, inf, j0, 0.0, top_down=top_down)
    return replace(out, truncated_mass=comp.truncated_mass)


def compose_two_level(
    parts: Terms,
    count_block: int,
    g: float,
    *,
    upper: bool,
    tilt: float,
    tau: float,
    block_tau: float,
    top_down: bool = False,
) -> ComposedPLD | None:
    """The composition of ``parts`` (``(step, count)``, the dominating or dominated pairs of the steps on one
    fine mesh) on two levels: blocks of at most ``count_block`` steps composed on the fine mesh (window
    level ``block_tau``), re-discretised on the coarse mesh ``g`` (``dominating_block`` /
    ``dominated_block``; each step's remainder one block of its own), and the blocks composed (``tilt``,
    ``tau``). ``None`` if a block leaves double precision (compose on one level then).

    Each re-discretisation costs one step's worth of ``g``-discretisation error per block, so a count
    ``k`` on meshes ``h`` (fine) and ``g = sqrt(count_block) h`` errs like ``2 k h^2`` where one level
    erred like ``k h^2``; the windows hold ``O(sqrt(count_block))`` and ``O(sqrt(k / count_block))``
    standard deviations of mesh, not ``O(sqrt(k))``: at ``count_block ~ sqrt(k)``, ``O(k^(1/4))`` points
    per composition instead of ``O(k^(1/2))``. The blocks are composed at the final ``tilt``, so that
    their error terms, like the final one's, are relative where the answer is decided.

    The upper pairs' errors (``dominating_block``) add up over the blocks (a product of measures moves
    in l1 by at most the sum of its factors' moves, times ``(1 + err)^(n - 1)``, and entry by entry by at
    most the sum of their entrywise moves times the same) and are charged to the result's ``input_error``
    (window) and ``input_round_off`` (round-off, l1 and entrywise), which ``numerical_error`` turns into
    delta at every epsilon.

    Parameters
    ----------
    parts : sequence of (DiscretisedLoss, int)
        The steps' pairs on one fine mesh and their counts.
    count_block : int
        The most steps per block (>= 1).
    g : float
        The coarse mesh.
    upper : bool
        Dominating pairs (``True``) or dominated ones.
    tilt : float
        The tilt of every composition.
    tau : float
        The final composition's Chernoff window level.
    block_tau : float
        The blocks' Chernoff window level.
    top_down : bool, default False
        For dominated pairs: merge downwards.

    Returns
    -------
    ComposedPLD or None
        The composition, or ``None`` if a block leaves double precision.

    Raises
    ------
    ZeroDivisionError
        If ``count_block == 0``.
    GridTooLargeError
        As ``compose``.
    ValueError
        If there is nothing to compose.

    References
    ----------
    Doroshenko et al. 2022 (connect-the-dots); Koskela et al. 2020 (FFT composition).
    """
    blocks: list[tuple[DiscretisedLoss, int]] = []
    window, round_off, point = 0.0, 0.0, 0.0
    b: DiscretisedLoss | None
    for d, c in parts:
        q, rest = divmod(int(c), int(count_block))
        for size, mult in ((count_block, q), (rest, 1)):
            if size and mult:
                comp = compose([(d, size)], tilt=tilt, tau=block_tau)
                if upper:
                    out = dominating_block(comp, g)
                    if out is None:
                        return None
                    b, e = out
                    window += mult * e.window
                    round_off += mult * e.round_off
                    point += mult * e.pointwise
                else:
                    b = dominated_block(comp, g, top_down=top_down)
                    if b is None:
                        return None
                blocks.append((b, mult))
    final = compose(blocks, tilt=tilt, tau=tau)
    err = window + round_off
    if err > 0.0:
        if err >= 0.5:
            return None
        # a product of measures moves by at most the sum of its factors' moves times (1 + err)^(n - 1)
        # <= 1 + 2 err, in l1 and entry by entry (sup of a convolution <= sup of one factor x l1 of the rest)
        grow = 1.0 + 2.0 * err
        final = replace(
            final,
            input_error=final.input_error + window * grow,
            input_round_off=(final.input_round_off[0] + round_off * grow, final.input_round_off[1] + point * grow),
        )
    return final
