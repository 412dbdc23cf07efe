"""Class splitting and the mixed comparison: upper ends for balls-in-bins with a matrix mechanism whose modes'
correlations fall with the cyclic distance of their bins (``tightdp.matrix.allocation`` states the pair and the
entrywise comparison these build on).

**Class splitting** (upper). Put the bins in ``s`` classes, the residues of ``j`` mod ``s``, and release the
record's class with the output: a richer release whose pair is the mixture over classes ``r`` (weights ``|r| /
t`` on both sides) of the class pairs ``(P_r, Q)``, ``P_r`` the mixture over the bins of class ``r``. So every
hockey-stick divergence of the run, in both directions, is at most the largest of the classes'. Each class is a
balls-in-bins pair of ``|r|`` bins with ``G`` restricted to them, bounded by the entrywise comparison. Within a
class the bins are ``s`` apart (cyclically when ``s`` divides ``t``), so for correlations that fall with the
distance the class's largest entry is much smaller; the price is fewer bins. A few ``s`` are tried.

**Mixed comparison** (upper, within a class). The entrywise comparison pays the largest correlation ``c_max``
for every pair. A Loewner step first can lower it: with ``P`` circulant over the class's index cycle (zero
diagonal, ``P[i, i + d] <= c - f(d)``, ``f(d)`` the class's largest entry at cyclic index distance ``d``) and
``P + p I >= 0``, ``G_class <= G_class + D + P + p I`` (a post-processing, as above) has diagonal ``m + p`` and
off-diagonal entries at most ``c``: compare it entrywise with ``c J + (m + p - c) I``. ``P`` carries negative
entries where ``G`` is above ``c`` (near bins) and positive ones where it is below (far bins); the least ``p`` is a
linear programme on ``P``'s symbol (``circulant_lift``), certified by an eigenvalue solve of the clipped solution.
``c = c_max`` gives ``p = 0``, the plain comparison.
"""

from __future__ import annotations

import math

import numpy as np

from .._types import FloatArray
from .allocation import _COARSE, _REFINE_SHARE, _error, _pair_epsilon, entrywise_upper, square_gram

__all__ = ["LOW_NOISE_SIGMA", "MAX_CLASSES", "circulant_lift", "class_split_upper", "low_noise_upper"]


#: the most classes ``class_split_upper`` tries
MAX_CLASSES = 16
#: the allocation gate of ``low_noise_upper`` (two candidates only; 8 bands, cycle 64, noise 2: the entrywise
#: comparison at noise 0.57 per unit costs 2 s at the coarse accuracy, class splitting at 0.49 would cost 8 s)
LOW_NOISE_SIGMA = 0.5


def _cyclic_profile(blocks: list[FloatArray], err: float) -> FloatArray:
    """``f[d]``: the largest entry ``B[i, (i + d) mod k]`` over the blocks (equal size ``k``) and ``i``, plus ``err``
    (``f[0]`` unused)."""
    k = blocks[0].shape[0]
    i = np.arange(k)
    return np.array([max(float(b[i, (i + d) % k].max()) for b in blocks) + err for d in range(k)])


def circulant_lift(profile: FloatArray, c: float) -> tuple[float, FloatArray] | None:
    """The least ``p`` (certified) such that a circulant ``P`` over the class's index cycle with zero diagonal and
    ``P[i, (i + d) mod k] <= c - profile[d]`` has ``P + p I >= 0``, by a linear programme on ``P``'s symbol
    (module docstring, "Mixed comparison"); ``None`` when the programme fails.

    Parameters
    ----------
    profile : FloatArray
        ``_cyclic_profile``'s ``f`` (length ``k >= 2``).
    c : float
        The off-diagonal level aimed at.

    Returns
    -------
    tuple or None
        ``(p, P)``: ``p`` the smallest eigenvalue of the clipped solution ``P``, negated, plus the solver's error
        bound.

    Raises
    ------
    numpy.linalg.LinAlgError
        The eigenvalue solver fails to converge.
    """
    from scipy.optimize import linprog

    k = profile.size
    half = k // 2
    dist = np.minimum(np.arange(1, k), k - np.arange(1, k))  # 1 .. half, each d and k - d
    cos = np.cos(2 * np.pi * np.outer(np.arange(k), np.arange(1, k)) / k)
    a = np.zeros((k, half + 1))
    for j in range(half):
        a[:, j] = cos[:, dist == j + 1].sum(axis=1)
    a[:, half] = 1.0
    cap = np.array([c - max(profile[d], profile[k - d]) for d in range(1, half + 1)])
    res = linprog(np.r_[np.zeros(half), 1.0], A_ub=-a, b_ub=np.zeros(k), bounds=[(None, u) for u in cap] + [(0, None)])
    if not res.success:
        return None
    sym = np.minimum(res.x[:half], cap)  # the constraint checked exactly, whatever the solver's tolerance
    row = np.zeros(k)
    row[1:] = sym[dist - 1]
    circ = np.array([np.roll(row, i) for i in range(k)])
    lam = float(np.linalg.eigvalsh(circ)[0])
    return max(0.0, -lam) + _error(circ), circ


def _setup(g: object) -> tuple[FloatArray, int, float, float]:
    """``(G, t, err, m)``: the checked Gram matrix, its size, its entries' error bound and its largest diagonal entry
    raised by that bound (every class's diagonal is raised to ``m``)."""
    gram = square_gram(g)
    err = _error(gram)
    return gram, gram.shape[0], err, float(np.max(np.diag(gram))) + err


def _plain_classes(
    g: FloatArray, s: int, err: float, m: float
) -> tuple[dict[int, FloatArray], list[tuple[int, float, float]]]:
    """The residues mod ``s`` as classes: their cyclic profiles per class size ``k >= 2`` and the plain entrywise
    constants ``(k, c, m - c)``, ``c`` the largest off-diagonal entry of any class of the size (diagonals raised to
    ``m``); a class of one bin has no allocation left, the whole diagonal is one Gaussian."""
    t = g.shape[0]
    blocks: dict[int, list[FloatArray]] = {}
    for r in range(s):
        idx = np.arange(r, t, s)
        blocks.setdefault(idx.size, []).append(g[np.ix_(idx, idx)])
    profiles = {k: _cyclic_profile(b, err) for k, b in blocks.items() if k >= 2}
    tops = {k: min(max(float(f[1:].max()), 0.0), m) for k, f in profiles.items()}
    consts = [(k, c, m - c) for k, c in tops.items()]
    if 1 in blocks:
        consts.append((1, 0.0, m))
    return profiles, consts


def low_noise_upper(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> tuple[float, str]:
    """An upper end for runs in which no candidate of the usual search (``sandwich_upper``, ``class_split_upper``)
    reaches ``MIN_ALLOCATION_SIGMA``: the entrywise comparison over all ``t`` bins and class splitting into two
    classes (at low noise the most bins win), each certified down to ``LOW_NOISE_SIGMA`` per unit sensitivity.
    Only these two, at the coarse accuracy: each costs seconds at that noise. A coarse end is certified too; the
    better one is refined at the accuracy asked only where its coarse width exceeds ``_REFINE_SHARE`` of it.

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``), ``t x t``.
    sigma : float
        The noise multiplier.
    delta : float
        The target delta.
    eps_error, rel_error : float, optional
        Accuracy of a refinement.

    Returns
    -------
    tuple
        ``(upper, how)``: ``inf`` and ``""`` where neither is in reach.

    Raises
    ------
    ValueError
        ``g`` is not a square matrix, or bad accuracy arguments (from the accountant).
    """
    g, t, err, m = _setup(g)
    candidates = [("entrywise comparison (Kahane)", [(t, *entrywise_upper(g, err))])]
    if t >= 4:
        candidates.append(
            ("class splitting (bins mod 2), entrywise comparison within each class", _plain_classes(g, 2, err, m)[1])
        )

    def evaluate(consts: list[tuple[int, float, float]], eps: float | None, rel: float | None) -> tuple[float, float]:
        ends = [_pair_epsilon(c, d, sigma, k, delta, eps, rel, gate=LOW_NOISE_SIGMA) for k, c, d in consts]
        if any(r is None for r in ends):
            return math.inf, math.inf
        return max(r[2] for r in ends if r is not None), max(r[2] - r[0] for r in ends if r is not None)

    best, how, width, used = math.inf, "", math.inf, None
    for name, consts in candidates:
        up, w = evaluate(consts, _COARSE, None)
        if up < best:
            best, how, width, used = up, name, w, consts
    if used is not None and width > _REFINE_SHARE * best:
        best = min(best, evaluate(used, eps_error, rel_error)[0])
    return best, how


def class_split_upper(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
    max_classes: int = MAX_CLASSES,
) -> tuple[float, int, list[tuple[int, float, float]]]:
    """The certified upper end by class splitting (module docstring): for each ``s`` in ``2 .. max_classes`` (at
    most ``t / 2``), the bins' residues mod ``s`` as classes; per class size ``k``, ``c`` the largest off-diagonal
    entry of ``G`` within any class of that size and ``m`` the largest diagonal entry (both with the Gram matrix's
    error bound), bounded by ``Gaussian(sqrt c) x RandomAllocation(1 of k, sqrt(m - c))``. For the three best
    ``s`` a lower ``c`` is also tried, paid by ``circulant_lift``'s ``p`` (the mixed comparison: ``d = m + p -
    c``). The ``s`` and ``c`` are picked on a coarse accuracy, then certified.

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``), ``t x t``.
    sigma : float
        The noise multiplier.
    delta : float
        The target delta.
    eps_error, rel_error : float, optional
        Accuracy of the certified evaluation.
    max_classes : int, optional
        The most classes tried (default ``MAX_CLASSES``).

    Returns
    -------
    tuple
        ``(upper, s, [(k, c, d), ...])``: the upper end (``inf`` when no ``s`` is in reach), the classes used and
        the constants per class size.

    Raises
    ------
    ValueError
        ``g`` is not a square matrix, or bad accuracy arguments (from the accountant).
    """
    g, t, err, m = _setup(g)

    def coarse(consts: list[tuple[int, float, float]]) -> float:
        worst = -math.inf
        for k, c, d in consts:
            r_ = _pair_epsilon(c, d, sigma, k, delta, _COARSE, None)
            worst = max(worst, r_[1] if r_ is not None else math.inf)
        return worst

    tried: list[tuple[float, int, list[tuple[int, float, float]]]] = []
    profiles: dict[int, dict[int, FloatArray]] = {}
    for s in range(2, min(max_classes, t // 2) + 1):
        profiles[s], consts = _plain_classes(g, s, err, m)
        tried.append((coarse(consts), s, consts))
    tried.sort(key=lambda x: x[0])
    for score, s, plain in list(tried[:3]):  # the mixed comparison: a lower c, paid on the diagonal
        if not math.isfinite(score):
            continue
        for theta in (0.75, 0.5):
            consts = []
            for k, c_top, _d in plain:
                if k < 3:  # nothing to gain from a two-bin cycle
                    consts.append((k, c_top, m - c_top))
                    continue
                f = profiles[s][k]
                c_low = max(float(f[1:].min()), 0.0)
                c = c_low + theta * (c_top - c_low)
                lift = circulant_lift(f, c)
                consts.append((k, c_top, m - c_top) if lift is None else (k, c, m + lift[0] - c))
            tried.append((coarse(consts), s, consts))
    if not tried:  # fewer than four bins: no split into two classes or more
        return math.inf, 0, []
    best, best_s, best_consts = min(tried, key=lambda x: x[0])
    if not math.isfinite(best):
        return math.inf, 0, []
    up = -math.inf
    for k, c, d in best_consts:
        r_ = _pair_epsilon(c, d, sigma, k, delta, eps_error, rel_error)
        up = max(up, r_[2] if r_ is not None else math.inf)
    return up, best_s, best_consts
