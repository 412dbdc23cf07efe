"""Two-level (hierarchical) self-composition: compose blocks on a fine grid, re-bin them on a coarse one.

With one grid, the coupling of Gopi et al. 2021, Thm 5.5 forces a mesh ``h ~ eps_error / sqrt(k)``
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
Hoeffding tail of Gopi et al. 2021, Lemma 5.3 applies with ``coupling_range = sqrt(m) h1 + h2``
per block. The FFT round-off and aliasing of each block are an l1 error between
the computed and the exact block distribution; it is carried as ``tv_error`` and
paid on both sides of the final bounds.

The two-level *dominance* composition of the connect-the-dots accountant (``compose_two_level``,
``dominating_block``, ``dominated_block``) lives in ``pld._two_level`` and is exported here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, cast

import numpy as np

from .._types import FloatArray
from ._two_level import BlockError as BlockError
from ._two_level import _check_mesh
from ._two_level import compose_two_level as compose_two_level
from ._two_level import dominated_block as dominated_block
from ._two_level import dominating_block as dominating_block
from .composition import ComposedPLD, compose
from .discretise import DiscretisedLoss

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
    """Mean-preserving re-discretisation of an untilted composition on the coarse mesh ``h``.

    Parameters
    ----------
    comp : ComposedPLD
        An untilted composition (``tilt == 0``).
    h : float
        The coarse mesh (> 0).

    Returns
    -------
    DiscretisedLoss
        The block as one step (its FFT errors in ``tv_error``, its coupling in ``coupling_range``).

    Raises
    ------
    ValueError
        If ``comp`` is tilted.

    References
    ----------
    Gopi et al. 2021, Alg. 2 (mean-preserving discretisation) and Lemma 5.3 (Hoeffding).
    """
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
    """``count`` copies of ``d`` as re-binned blocks of ``block`` copies (plus one remainder block).

    Parameters
    ----------
    d : DiscretisedLoss
        One step.
    count : int
        The number of steps.
    block : int
        Steps per block (>= 1).
    h_coarse : float
        The coarse mesh.
    tau : float, default 1e-15
        The blocks' Chernoff window level.

    Returns
    -------
    list of (DiscretisedLoss, int)
        The re-binned blocks and their multiplicities.

    Raises
    ------
    ZeroDivisionError
        If ``block == 0``.
    GridTooLargeError
        As ``compose``, for a block's window.
    """
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
    variance proxies (see ``compose_tree``); Gopi et al. 2021, Alg. 2's shift only preserves the unconditional mean.

    Works in the tilted measure of ``comp`` (tilt ``lam >= 0``): the untilted mass of an atom is
    ``tilted * exp(log_norm - lam x)``, evaluated in logs. Returns ``(loss, norm, lost)``:

    * ``norm = exp(lam^2 g^2 / 8)`` bounds the l1 operator norm of the split in the ``lam``-tilted
      measure (an atom's tilted mass is multiplied by ``E[exp(lam (X - x))] <= exp(lam^2 g^2 / 8)``,
      Hoeffding's lemma again), so l1 errors of the input grow at most by that factor; the split also
      never decreases tilted mass (Jensen), so relative errors are not inflated by normalisation;
    * ``lost``: the tilted mass (relative to the normalised input) of atoms whose untilted mass
      underflows a double (dropped; callers count it as l1 error).

    Parameters
    ----------
    comp : ComposedPLD
        The composition (any tilt).
    g : float
        The coarse mesh (> 0).

    Returns
    -------
    tuple
        ``(loss, norm, lost)`` as above: a ``DiscretisedLoss`` and two floats.

    Raises
    ------
    ValueError
        If ``g`` is not positive and finite.

    The loss carries ``coupling_range = sqrt(hoeffding_sq + g^2)``: its square is four times the
    block's variance proxy plus this rounding's, the quantity ``compose`` sums.
    """
    _check_mesh(g)
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

    Why it is certified (Gopi et al. 2021, Lemma 5.3 / Thm 5.5 extended):

    * coupling: ``S - S~ = sum_i D_i + sum_levels sum_blocks E_b``, with ``D_i`` the independent fine
      discretisation errors of Gopi et al. 2021, Alg. 2 (range ``coupling_range``, mean within ``mean_error`` of 0)
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

    Parameters
    ----------
    fine : list of (DiscretisedLoss, int)
        The fine discretisations and their counts.
    radices : list of int
        The tree's radices (each >= 2).
    meshes : list of float
        The meshes of the levels, ``len(radices) + 1`` of them.
    tilt : float
        The tilt of every composition.
    tau : float
        The top composition's Chernoff window level.
    block_tau : float
        The blocks' Chernoff window level.

    Returns
    -------
    tuple
        ``(composition, info)``: the ``ComposedPLD`` (the blocks' errors in ``input_error``) and a dict of
        plan figures (levels, radices, meshes, block and top points, block error).

    Raises
    ------
    ValueError
        If ``meshes`` and ``radices`` do not match or a radix is below 2, or there is nothing to compose.
    GridTooLargeError
        As ``compose``.

    References
    ----------
    Gopi et al. 2021, Alg. 2, Lemma 5.3 and Thm 5.5 (extended to the tree above); Koskela et al. 2020, Sec. 5
    (FFT composition).
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
