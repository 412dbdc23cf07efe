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

import numpy as np

from .composition import ComposedPLD, compose
from .discretise import DiscretisedLoss

__all__ = ["rebin", "coarsen"]

_U = np.finfo(float).eps / 2


def rebin(comp: ComposedPLD, h: float) -> DiscretisedLoss:
    """Mean-preserving re-discretisation of an untilted composition on the coarse mesh ``h``."""
    if comp.tilt != 0.0:
        raise ValueError("only untilted compositions can be re-binned")
    x = comp.x
    w = comp.tilted * math.exp(comp.log_norm) if math.isfinite(comp.log_norm) else comp.tilted * 0.0
    keep = w > 0
    x, w = x[keep], w[keep]
    if w.size == 0:
        return DiscretisedLoss(h, 0, np.zeros(1), 0.0, comp.infinity_mass, comp.truncated_mass,
                               comp.mean_error, math.sqrt(comp.hoeffding_sq) + h, comp.tv_error)
    cells = np.ceil(x / h - 0.5).astype(np.int64)  # x in (j h - h/2, j h + h/2]
    j0 = int(cells[0])
    pmf = np.bincount(cells - j0, weights=w)
    total = float(w.sum())
    mean = float(np.dot(w, x)) / total
    grid = (j0 + np.arange(pmf.size)) * h
    shift = mean - float(np.dot(pmf, grid)) / total
    arith = 4 * _U * (float(np.dot(w, np.abs(x))) / total + float(np.dot(pmf, np.abs(grid))) / total) * math.log2(
        max(2, x.size))
    # l1 error of the block: aliasing (tilted mass outside the window; untilted here) and FFT round-off
    block_err = (comp.alias_mass + comp.float_error) * math.exp(min(comp.log_norm, 0.0)) + comp.tv_error
    # exact / computed lies in [low_factor, 1 + up_rel]; as computed = exact (1 + e), |e| <= rel:
    rel = max(1.0 - 1.0 / (1.0 + comp.up_rel), 1.0 / comp.low_factor - 1.0)
    return DiscretisedLoss(h=h, start=j0, pmf=pmf, shift=shift, infinity_mass=comp.infinity_mass,
                           truncated_mass=comp.truncated_mass, mean_error=comp.mean_error + arith,
                           coupling_range=math.sqrt(comp.hoeffding_sq) + h, tv_error=block_err, rel_error=rel)


def coarsen(d: DiscretisedLoss, count: int, block: int, h_coarse: float, *, tau: float = 1e-15
            ) -> list[tuple[DiscretisedLoss, int]]:
    """``count`` copies of ``d`` as re-binned blocks of ``block`` copies (plus one remainder block)."""
    q, r = divmod(count, block)
    out = []
    for size, mult in ((block, q), (r, 1)):
        if size and mult:
            out.append((rebin(compose([(d, size)], tilt=0.0, tau=tau), h_coarse), mult))
    return out
