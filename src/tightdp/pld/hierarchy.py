"""Two-level (hierarchical) self-composition: compose blocks on a fine grid, re-bin them on a coarse one.

With one grid, the coupling of 003 Thm 5.5 forces a mesh ``h ~ eps_error / sqrt(k)``
while the composition spreads over O(sqrt(k)) loss units, so the FFT needs
O(k) points... per unit of spread, O(sqrt(k)) in total. Here ``m`` steps are
composed on a fine mesh ``h1`` (a window of width O(sqrt(m)) only), and the
block's distribution is re-discretised, mean-preserving, on a coarse mesh
``h2 = sqrt(m) h1``; the ``k / m`` blocks are then composed on the coarse grid.

Why the bounds stay certified: per block, the fine rounding errors sum to a
mean-zero sub-Gaussian variable with variance proxy ``m h1^2 / 4`` (Hoeffding's
lemma), the coarse rounding is mean-zero and confined to an interval of length
``h2`` (proxy ``h2^2 / 4``), and the sum of two sub-Gaussian variables, however
dependent, has proxy ``(s1 + s2)^2`` (Hölder). Blocks are independent, so the
Hoeffding tail of 003 Lemma 5.3 applies with ``coupling_range = sqrt(m) h1 + h2``
per block. The FFT round-off and aliasing of each block are an l1 error between
the computed and the exact block distribution; it is carried as ``tv_error`` and
paid on both sides of the final bounds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple, cast

import numpy as np

from .._types import FloatArray
from .composition import ComposedPLD, compose
from .discretise import DiscretisedLoss, Terms
from .dominance import merge_cells, split_cells

__all__ = [
    "rebin",
    "coarsen",
    "split_rebin",
    "compose_tree",
    "dominating_block",
    "dominated_block",
    "compose_two_level",
]

_U = cast(float, np.finfo(float).eps / 2)  # unit round-off (a numpy float64)
_TINY = math.exp(-740.0)  # untilted masses below this (subnormal) are dropped and counted as lost


def rebin(comp: ComposedPLD, h: float) -> DiscretisedLoss:
    """Mean-preserving re-discretisation of an untilted composition on the coarse mesh ``h``."""
    if comp.tilt != 0.0:
        raise ValueError("only untilted compositions can be re-binned")
    x = comp.x
    w = comp.tilted * math.exp(comp.log_norm) if math.isfinite(comp.log_norm) else comp.tilted * 0.0
    keep = w > 0
    x, w = x[keep], w[keep]
    if w.size == 0:
        return DiscretisedLoss(
            h,
            0,
            np.zeros(1),
            0.0,
            comp.infinity_mass,
            comp.truncated_mass,
            comp.mean_error,
            math.sqrt(comp.hoeffding_sq) + h,
            comp.tv_error,
            coupling_tails=comp.coupling_tails,
        )
    cells = np.ceil(x / h - 0.5).astype(np.int64)  # x in (j h - h/2, j h + h/2]
    j0 = int(cells[0])
    pmf = cast(FloatArray, np.bincount(cells - j0, weights=w))  # float64: weighted
    total = float(w.sum())
    mean = float(np.dot(w, x)) / total
    grid = (j0 + np.arange(pmf.size)) * h
    shift = mean - float(np.dot(pmf, grid)) / total
    arith = (
        4
        * _U
        * (float(np.dot(w, np.abs(x))) / total + float(np.dot(pmf, np.abs(grid))) / total)
        * math.log2(max(2, x.size))
    )
    # l1 error of the block: aliasing (untilted here) counts twice, as in ``_block_error``: ``alias_mass``
    # bounds both the mass the window misses and the mass that wraps into it; plus FFT round-off
    block_err = (2.0 * comp.alias_mass + comp.l1_error) * math.exp(min(comp.log_norm, 0.0)) + comp.tv_error
    # exact / computed lies in [low_factor, 1 + up_rel]; as computed = exact (1 + e), |e| <= rel:
    rel = max(1.0 - 1.0 / (1.0 + comp.up_rel), 1.0 / comp.low_factor - 1.0)
    return DiscretisedLoss(
        h=h,
        start=j0,
        pmf=pmf,
        shift=shift,
        infinity_mass=comp.infinity_mass,
        truncated_mass=comp.truncated_mass,
        mean_error=comp.mean_error + arith,
        coupling_range=math.sqrt(comp.hoeffding_sq) + h,
        tv_error=block_err,
        rel_error=rel,
        coupling_tails=comp.coupling_tails,
    )


def coarsen(
    d: DiscretisedLoss, count: int, block: int, h_coarse: float, *, tau: float = 1e-15
) -> list[tuple[DiscretisedLoss, int]]:
    """``count`` copies of ``d`` as re-binned blocks of ``block`` copies (plus one remainder block)."""
    q, r = divmod(count, block)
    out = []
    for size, mult in ((block, q), (r, 1)):
        if size and mult:
            out.append((rebin(compose([(d, size)], tilt=0.0, tau=tau), h_coarse), mult))
    return out


# ---------------------------------------------------------------------------------------------------------
# Multi-level, tilted, conditionally mean-preserving hierarchy (what the PRV accountant uses)
# ---------------------------------------------------------------------------------------------------------


def split_rebin(comp: ComposedPLD, g: float) -> tuple[DiscretisedLoss, float, float]:
    """Re-discretise a (possibly tilted) composition on the coarse mesh ``g`` by *splitting* each atom.

    An atom at ``x`` with ``j g <= x < (j + 1) g`` and ``a = x / g - j`` sends the fraction
    ``1 - a`` of its mass to ``j g`` and ``a`` to ``(j + 1) g``: the coarse value ``X`` given the
    block value ``B = x`` has conditional mean ``x`` and lies in an interval of length ``g``
    containing ``x``, so by Hoeffding's lemma ``E[exp(s (B - X)) | B] <= exp(s^2 g^2 / 8)`` for every
    ``s``. This conditional (martingale) form is what lets the roundings of all levels add their
    variance proxies (see ``compose_tree``); 003 Alg. 2's shift only preserves the unconditional mean.

    Works in the tilted measure of ``comp`` (tilt ``lam >= 0``): the untilted mass of an atom is
    ``tilted * exp(log_norm - lam x)``, evaluated in logs. Returns ``(loss, norm, lost)``:

    * ``norm = exp(lam^2 g^2 / 8)`` bounds the l1 operator norm of the split in the ``lam``-tilted
      measure (an atom's tilted mass is multiplied by ``E[exp(lam (X - x))] <= exp(lam^2 g^2 / 8)``,
      Hoeffding's lemma again), so l1 errors of the input grow at most by that factor; the split also
      never decreases tilted mass (Jensen), so relative errors are not inflated by normalisation;
    * ``lost``: the tilted mass (relative to the normalised input) of atoms whose untilted mass
      underflows a double (dropped; callers count it as l1 error).

    The loss carries ``coupling_range = sqrt(hoeffding_sq + g^2)``: its square is four times the
    block's variance proxy plus this rounding's, the quantity ``compose`` sums.
    """
    lam = comp.tilt
    norm = math.exp(lam * lam * g * g / 8.0)
    x = comp.x
    t = comp.tilted
    nz = np.flatnonzero(t)
    if not math.isfinite(comp.log_norm) or nz.size == 0:
        empty = DiscretisedLoss(
            g,
            0,
            np.zeros(1),
            0.0,
            comp.infinity_mass,
            comp.truncated_mass,
            comp.mean_error,
            math.sqrt(comp.hoeffding_sq + g * g),
            comp.tv_error,
            0.0,
            comp.coupling_tails,
        )
        return empty, norm, 0.0
    x, t = x[nz[0] : nz[-1] + 1], t[nz[0] : nz[-1] + 1]  # zero atoms inside add nothing to the bincounts
    f_ends = (comp.log_norm - lam * float(x[0]), comp.log_norm - lam * float(x[-1]))
    if min(f_ends) > -700.0 and max(f_ends) < 700.0:
        # untilt as t * exp(log_norm - lam x): exp's argument is moderate, so no log pass is needed
        w = np.multiply(x, -lam)
        w += comp.log_norm
        np.exp(w, out=w)
        w *= t
    else:
        with np.errstate(divide="ignore", under="ignore", over="ignore"):
            w = np.exp(np.log(t) + (comp.log_norm - lam * x))
    under = w < _TINY  # (and the zero atoms, which lose nothing)
    lost = 0.0
    if np.any(under):
        lost = float(t[under].sum()) * math.exp(lam * g) / max(float(comp.tilted.sum()), 1e-300)
        w[under] = 0.0
    u = x / g
    j = np.floor(u)
    a = u - j  # in [0, 1)
    j = j.astype(np.int64)
    j0 = int(j[0])
    j -= j0
    wa = w * a
    w -= wa  # w (1 - a), and the two parts add up to w up to one rounding
    pmf = cast(FloatArray, np.bincount(j, weights=w, minlength=int(j[-1]) + 2))  # float64: weighted
    j += 1
    pmf += np.bincount(j, weights=wa, minlength=pmf.size)[: pmf.size]
    # the split fractions are rounded: the conditional mean moves by at most ~2u (|x| + g) per atom
    arith = 4.0 * _U * (max(abs(float(x[0])), abs(float(x[-1]))) + g)
    # masses: the untilting (exp of an argument known to 2u (|log_norm| + |lam x|)), the split and the
    # bincount sums of at most g / h + 1 non-negative terms, relative
    f_abs = abs(comp.log_norm) + abs(lam) * max(abs(float(x[0])), abs(float(x[-1])))
    rel_round = 2.0 * _U * f_abs + (g / comp.h + 10.0) * _U
    rel = max(1.0 - 1.0 / (1.0 + comp.up_rel), 1.0 / comp.low_factor - 1.0)
    rel = (1.0 + rel) * (1.0 + rel_round) - 1.0
    out = DiscretisedLoss(
        h=g,
        start=j0,
        pmf=pmf,
        shift=0.0,
        infinity_mass=comp.infinity_mass,
        truncated_mass=comp.truncated_mass,
        mean_error=comp.mean_error + arith,
        coupling_range=math.sqrt(comp.hoeffding_sq + g * g),
        tv_error=comp.tv_error,
        rel_error=rel,
        coupling_tails=comp.coupling_tails,
    )
    return out, norm, lost


def _block_error(comp: ComposedPLD, inputs: list[tuple[float, int]]) -> float:
    """Relative l1 error (tilted measure) of a computed composition against the exact composition of
    the exact inputs, each input known to relative l1 error ``e`` (``(e, count)`` pairs).

    Exact inputs have norms within ``1 + e`` of the computed ones, so the exact convolution is within
    ``prod (1 + e)^c - 1`` of the convolution of the computed inputs (all normalised to 1); the FFT
    output is within ``2 alias_mass + float_error`` of that (``alias_mass`` bounds both the mass the
    window misses and the mass that wraps into it; ``float_error`` the round-off, see ``compose``).
    """
    prop = math.expm1(sum(c * math.log1p(e) for e, c in inputs))
    return prop + 2.0 * comp.alias_mass + comp.float_error


def _split_block(comp: ComposedPLD, g: float, e_in: float) -> tuple[DiscretisedLoss, float]:
    """``split_rebin`` of a block with its relative l1 error (``e_in`` from ``_block_error``)."""
    out, norm, lost = split_rebin(comp, g)
    return out, norm * e_in / max(1.0 - 2.0 * comp.alias_mass - comp.l1_error, 0.5) + lost


def compose_tree(
    fine: list[tuple[DiscretisedLoss, int]],
    radices: list[int],
    meshes: list[float],
    *,
    tilt: float,
    tau: float,
    block_tau: float,
) -> tuple[ComposedPLD, dict[str, Any]]:
    """Compose ``count`` copies of each fine discretisation through a mixed-radix tree of re-binned blocks.

    ``M_0 = 1`` and ``M_l = M_(l-1) radices[l-1]`` (``l = 1 .. L``, ``L = len(radices)``,
    ``len(meshes) = L + 1``). Level ``l`` composes ``radices[l-1]`` copies of the level ``l - 1``
    block (``M_(l-1)`` steps) on mesh ``meshes[l-1]`` and splits the result onto ``meshes[l]``
    (``split_rebin``); the counts' mixed-radix digits go into one remainder block per level, built
    the same way. The top level composes ``count // M_L`` top blocks and the remainder, all terms
    together, on ``meshes[L]`` with tilt ``tilt`` and window level ``tau``. Every block is composed
    with the same tilt (tilting commutes with convolution), so FFT round-off stays relative to the
    mass that decides ``delta(eps)``. A large first radix pays when the loss has a heavy tail: the
    Chernoff window of a block of ``m`` steps is then set by the tail, not by ``sqrt(m)`` standard
    deviations, so many steps cost no more points than a few (see ``PRVAccountant._tree_plan``).

    Why it is certified (003 Lemma 5.3 / Thm 5.5 extended):

    * coupling: ``S - S~ = sum_i D_i + sum_levels sum_blocks E_b``, with ``D_i`` the independent fine
      discretisation errors of 003 Alg. 2 (range ``coupling_range``, mean within ``mean_error`` of 0)
      and ``E_b`` each split's rounding, conditionally mean-zero with range ``g`` given everything
      below it. Conditioning level by level (tower property) and Hoeffding's lemma give
      ``E exp(s (S - S~ - mean)) <= exp(s^2 H / 8)`` with ``H = sum_i r_i^2 + sum_b g_b^2``: the
      ``hoeffding_sq`` of the returned composition, so ``coupling_shift`` is a valid Hoeffding tail;
      the radices change only which roundings occur, never this argument;
    * numerics: each block is known to a relative l1 error ``e`` in the ``tilt``-tilted measure
      (``_block_error``; the split multiplies it by ``exp(tilt^2 g^2 / 8)``; underflowed atoms add).
      The top composition's inputs contribute ``F = prod (1 + e)^c - 1``, its ``input_error``:
      ``numerical_error(eps) = exp(log_norm - tilt eps) (alias + input_error + round-off)`` then bounds the
      change of ``delta_disc`` at every ``eps' >= eps``, because an l1 error ``F`` of the normalised
      tilted composition is at most ``exp(log_norm - tilt eps) F`` of untilted mass above ``eps``;
    * infinity, truncated and ``tv`` masses and the relative cell-mass factors pass through unchanged.
    """
    L = len(radices)
    if len(meshes) != L + 1 or any(int(r) < 2 for r in radices):
        raise ValueError("compose_tree needs len(meshes) == len(radices) + 1 and radices >= 2")
    top_terms: list[tuple[DiscretisedLoss, int]] = []
    top_err: list[tuple[float, int]] = []
    info: dict[str, Any] = {
        "levels": L,
        "radices": [int(r) for r in radices],
        "block_points": 0,
        "meshes": list(meshes),
    }
    for d, count in fine:
        block: DiscretisedLoss | None = d
        e_block = 0.0
        rem: DiscretisedLoss | None = None
        e_rem = 0.0
        size = 1
        for lvl in range(1, L + 1):
            assert block is not None  # the loop stops once no block is left
            r = int(radices[lvl - 1])
            digit = (count // size) % r
            g = meshes[lvl]
            if size * r <= count:
                comp = compose([(block, r)], tilt=tilt, tau=block_tau)
                info["block_points"] += comp.tilted.size
                new_block, new_e = _split_block(comp, g, _block_error(comp, [(e_block, r)]))
            else:
                new_block, new_e = None, 0.0
            parts = [(block, digit, e_block)] if digit else []
            if rem is not None:
                parts.append((rem, 1, e_rem))
            if parts:
                comp = compose([(p, c) for p, c, _ in parts], tilt=tilt, tau=block_tau)
                info["block_points"] += comp.tilted.size
                rem, e_rem = _split_block(comp, g, _block_error(comp, [(pe, c) for _, c, pe in parts]))
            block, e_block = new_block, new_e
            size *= r
            if block is None:
                break
        n_top = count // size if block is not None else 0
        if n_top and block is not None:  # (n_top is 0 without a block)
            top_terms.append((block, n_top))
            top_err.append((e_block, n_top))
        if rem is not None:
            top_terms.append((rem, 1))
            top_err.append((e_rem, 1))
    if not top_terms:
        raise ValueError("nothing to compose")
    # terms of different lengths may end on different levels: split them all onto the coarsest mesh
    hs = {round(t.h, 300) for t, _ in top_terms}
    if len(hs) > 1:
        g = max(t.h for t, _ in top_terms)
        moved = []
        for (t, c), (e, _) in zip(top_terms, top_err):
            if abs(t.h - g) > 1e-15 * g:
                comp = compose([(t, 1)], tilt=tilt, tau=block_tau)
                t, e = _split_block(comp, g, _block_error(comp, [(e, 1)]))
            moved.append((t, c, e))
        top_terms = [(t, c) for t, c, _ in moved]
        top_err = [(e, c) for _, c, e in moved]
    final = compose(top_terms, tilt=tilt, tau=tau)
    info["top_points"] = int(final.tilted.size)
    F = math.expm1(sum(c * math.log1p(e) for e, c in top_err))
    info["block_error"] = F
    return replace(final, input_error=final.input_error + F), info


# ---------------------------------------------------------------------------------------------------------
# Two-level dominance (what the connect-the-dots accountant uses at long horizons)
# ---------------------------------------------------------------------------------------------------------


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
    ``ceil(g / h) + 1`` fine atoms each. ``None`` where the block's masses leave double precision."""
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
    pointwise lower envelope of its masses (``_block_cells``). ``None`` as for ``dominating_block``."""
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
