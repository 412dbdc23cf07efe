"""Balls-in-bins with a matrix mechanism, certified deterministically by comparing the modes' Gram matrix with
compound-symmetric ones (a Loewner sandwich; entrywise and mixed comparisons above).

Balls-in-bins (jax_privacy ``BallsInBinsSampling``; Choquette-Choo et al., ICLR 2025, arXiv 2410.06266;
Chua et al. 2412.16802): each record is put once in a uniform bin ``j`` of ``t = cycle_length`` and takes
part at steps ``j, j + t, j + 2t, ...``. With ``x_j`` that pattern's indicator and ``mu_j = C x_j`` (the
"modes"), the run of a record with a fixed unit gradient is the pair

    ``P = (1/t) sum_j N(mu_j, sigma^2 I)``  versus  ``Q = N(0, sigma^2 I)``,

which for a non-negative ``C`` dominates the run (2410.06266; the pair jax_privacy's Monte Carlo accountant
samples). Its privacy loss depends on the output only through ``<mu_j, y>``, so only the Gram matrix
``G = [<mu_j, mu_k>]`` matters.

**Sandwich lemma.** If ``G_nu`` and ``G_mu`` are Gram matrices with ``G_mu <= G_nu`` (Loewner order), there is a
contraction ``A`` with ``A nu_j = mu_j`` for all ``j``, and ``y = A w + N(0, sigma^2 (I - A A^T))`` maps
``N(nu_j, sigma^2 I)`` to ``N(mu_j, sigma^2 I)`` and ``N(0, sigma^2 I)`` to itself: the ``mu`` pair is a
post-processing of the ``nu`` pair, in both directions. For ``G_nu = c J + d I`` (``J`` all ones) the modes
``nu_j = sqrt(c) u + sqrt(d) e_j`` (orthonormal ``u, e_j``) split the pair into independent parts: a Gaussian
mechanism of sensitivity ``sqrt(c)`` and one 1-of-``t`` random allocation of Gaussians of sensitivity
``sqrt(d)`` (``tightdp.mechanisms.RandomAllocation``, certified both ways). Hence

* ``G <= c J + d I`` gives a certified **upper** bound (given the dominating pair above);
* ``c' J + d' I <= G`` gives a certified **lower** bound: the ``(c', d')`` pair is then a post-processing of
  the explicit pair above (a record with a fixed unit gradient), so its epsilon is below the run's.

**Entrywise comparison** (Kahane's Gaussian comparison, for the upper end). Under ``Q`` the likelihood ratio is
``L = (1/t) sum_j e^(X_j)`` with ``X = (<mu_j, y> / sigma^2 - |mu_j|^2 / (2 sigma^2))_j`` Gaussian, covariance
``G / sigma^2``; both directions of the hockey-stick divergence are ``E_Q[g(L)]`` with ``g`` convex
(``(s - alpha)_+`` and ``(1 - alpha s)_+``). For ``F(x) = g((1/t) sum_j e^(x_j))`` the mixed second derivatives
``g''(S) e^(x_i + x_j) / t^2`` (``i != j``) are non-negative, so by Gaussian interpolation
(``d/dtheta E F(X_theta) = 1/2 sum_(i,j) (H - G)_(ij) E[d_i d_j F] / sigma^2`` along ``X_theta = sqrt(theta) X_H +
sqrt(1 - theta) X_G``, smoothing ``g``) ``E F`` grows with the off-diagonal entries of the covariance when the
diagonal (hence the mean) is held. First raise every diagonal entry of ``G`` to ``m = max_j G_jj`` (``G + D``,
``D >= 0`` diagonal: a Loewner step, the pair above); then ``H = c J + (m - c) I`` with ``c`` the largest
off-diagonal entry (at least 0, at most ``m`` by Cauchy-Schwarz) has the same diagonal and larger off-diagonal
entries: a certified **upper** bound with the same product form. It needs no eigenvalues and wins when ``G``'s
spectrum is spread (banded Toeplitz ``C``: correlations that fall with the cyclic distance of the bins), where
the Loewner step must cover the top eigenvalue with ``d``.

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

Both are exact when ``G`` is compound symmetric (a diagonal ``C``: plain random allocation); for banded ``C``
the interval widens with how far ``G`` is from ``c J + d I``. Every semidefinite inequality is checked
numerically and the constants are moved to the safe side by the eigenvalue solver's error bound.
"""

from __future__ import annotations

import math

import numpy as np

from .._types import FloatArray
from ..accountants.connect_dots import ConnectDotsAccountant
from ..errors import PrecisionError
from ..mechanisms.allocation import RandomAllocation
from ..mechanisms.basic import Gaussian
from .strategies import Strategy

__all__ = [
    "MAX_CLASSES",
    "MIN_ALLOCATION_SIGMA",
    "class_split_upper",
    "entrywise_upper",
    "circulant_lift",
    "lower_sandwich",
    "mode_gram",
    "sandwich_epsilon",
    "upper_sandwich",
]

_U = float(np.finfo(float).eps) / 2
#: the least noise multiplier per unit sensitivity at which a candidate allocation pair is certified: random
#: allocation itself is tight down to 0.2, but the sandwiches try dozens of candidates, each 0.1 to 0.4 s below
#: 0.9 (balls-in-bins, 16 bands, cycle 64, noise 4: at 0.5 the same answer took 7.4 s instead of 2.3 s)
MIN_ALLOCATION_SIGMA = 0.9


def mode_gram(strategy: Strategy, n: int, t: int) -> FloatArray:
    """``G = [<C x_j, C x_k>]`` for the cyclic patterns ``x_j`` (``j < t``) of ``n`` steps.

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``.
    n : int
        Steps (``>= 1``).
    t : int
        The cycle length (``1 <= t <= n``).

    Returns
    -------
    FloatArray
        The ``t x t`` Gram matrix of the modes ``C x_j``.

    Raises
    ------
    ValueError
        ``n`` beyond the strategy's reach (from ``strategy.matrix``).
    """
    x = np.zeros((n, t))
    idx = np.arange(n)
    x[idx, idx % t] = 1.0
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:  # C x by FFT convolution along the steps
        size = 1 << (2 * n - 1).bit_length()
        v = np.fft.irfft(np.fft.rfft(coefs, size)[:, None] * np.fft.rfft(x, size, axis=0), size, axis=0)[:n]
    else:
        v = strategy.matrix(n) @ x
    return np.asarray(v.T @ v, dtype=np.float64)


def _error(g: FloatArray, extra: float = 0.0) -> float:
    """A bound on eigenvalue errors of symmetric matrices of ``G``'s size and scale (Weyl + backward stability),
    padded generously; the FFT's own error is covered by the same margin (relative 1e-10 of the norm)."""
    t = g.shape[0]
    return float((64.0 * t * _U + 1e-10) * (float(np.linalg.norm(g, "fro")) + extra))


class _Spectra:
    """The eigen-decompositions every sandwich needs, computed once: ``G`` and ``G`` restricted to the complement
    of the ones vector (orthonormal basis ``Q`` from a Householder reflection)."""

    def __init__(self, g: FloatArray) -> None:
        t = g.shape[0]
        self.g, self.t = g, t
        self.w, self.v = np.linalg.eigh(g)
        self.proj = self.v.T @ np.ones(t)
        u = np.ones(t) / math.sqrt(t)
        u[0] -= 1.0  # Householder: I - 2 u u^T / |u|^2 maps e_0 to the normalised ones vector (up to sign)
        nu = float(u @ u)
        h = np.eye(t) - (2.0 / nu) * np.outer(u, u) if nu > 0 else np.eye(t)
        q = h[:, 1:]
        self.beta: FloatArray
        self.u: FloatArray
        self.beta, self.u = np.linalg.eigh(q.T @ g @ q) if t > 1 else (np.zeros(0), np.zeros((0, 0)))
        self.bq = self.u.T @ (q.T @ g @ np.ones(t)) / t if t > 1 else np.zeros(0)
        self.mean = float(np.ones(t) @ g @ np.ones(t)) / t**2
        self.d_floor = max(float(self.beta[-1]), 0.0) if t > 1 else 0.0


def upper_sandwich(sp: _Spectra, frac: float, *, verify: bool = True) -> tuple[float, float]:
    """``(c, d)`` with ``G <= c J + d I``: ``d`` a fraction ``frac`` of the way from the least admissible value (the
    top eigenvalue of ``G`` on the complement of the ones vector) to the largest eigenvalue, ``c`` the least then
    admissible, ``max_{1^T a = 1} a^T (G - d I) a`` (a Schur complement). ``verify``: the inequality is checked by
    an eigenvalue solve and ``d`` raised by the residual and the solver's error bound.

    Parameters
    ----------
    sp : _Spectra
        The spectra of ``G``.
    frac : float
        In ``[0, 1]``: where ``d`` lies between its least admissible value and ``lambda_max(G)``.
    verify : bool, optional
        Check the inequality and move the constants to the safe side (default ``True``).

    Returns
    -------
    tuple of float
        ``(c, d)``; ``c`` is ``inf`` where no finite ``c`` exists at this ``d``.

    Raises
    ------
    numpy.linalg.LinAlgError
        The eigenvalue solver fails to converge.
    """
    t, g = sp.t, sp.g
    lam_top = float(sp.w[-1])
    d = sp.d_floor + max(frac, 1e-9) * max(lam_top - sp.d_floor, 1e-12 * lam_top)
    c = sp.mean - d / t
    if t > 1:
        gap = d - sp.beta
        live = sp.bq != 0.0
        if np.any(live & (gap <= 0.0)):
            return math.inf, d  # no finite c at this d (refused by _pair_epsilon)
        c += float(np.sum(sp.bq[live] ** 2 / gap[live]))
    c = max(c, 0.0)
    if verify:
        resid = float(np.linalg.eigvalsh(c * np.ones((t, t)) + d * np.eye(t) - g)[0])
        d += max(0.0, -resid) + _error(g, c * t + d)
    return c, d


def entrywise_upper(g: FloatArray, err: float | None = None) -> tuple[float, float]:
    """``(c, d)`` with ``c J + d I`` above ``G`` after its diagonal is raised to ``m = max_j G_jj`` (equal diagonals,
    off-diagonal entries at least ``G``'s): ``c`` the largest off-diagonal entry, ``d = m - c``, both moved to the
    safe side by the Gram matrix's error bound (module docstring, "Entrywise comparison").

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``), square.
    err : float or None, optional
        The bound on its entries' errors; default ``_error(g)`` (pass the whole matrix's for a block of it).

    Returns
    -------
    tuple of float
        ``(c, d)``, both non-negative.

    Raises
    ------
    ValueError
        ``g`` is not a square matrix.
    """
    g = np.asarray(g, float)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"g must be a square matrix, got shape {g.shape}")
    t = g.shape[0]
    err = _error(g) if err is None else err
    m = float(np.max(np.diag(g))) + err
    if t == 1:
        return 0.0, m
    off = g[~np.eye(t, dtype=bool)]
    c = min(max(float(np.max(off)) + err, 0.0), m)
    return c, m - c


#: the most classes ``class_split_upper`` tries
MAX_CLASSES = 16


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
    g = np.asarray(g, float)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise ValueError(f"g must be a square matrix, got shape {g.shape}")
    t = g.shape[0]
    err = _error(g)
    m = float(np.max(np.diag(g))) + err

    def coarse(consts: list[tuple[int, float, float]]) -> float:
        worst = -math.inf
        for k, c, d in consts:
            r_ = _pair_epsilon(c, d, sigma, k, delta, 0.05, None)
            worst = max(worst, r_[1] if r_ is not None else math.inf)
        return worst

    tried: list[tuple[float, int, list[tuple[int, float, float]]]] = []
    profiles: dict[int, dict[int, FloatArray]] = {}
    for s in range(2, min(max_classes, t // 2) + 1):
        blocks: dict[int, list[FloatArray]] = {}
        for r in range(s):
            idx = np.arange(r, t, s)
            blocks.setdefault(idx.size, []).append(g[np.ix_(idx, idx)])
        profiles[s] = {k: _cyclic_profile(b, err) for k, b in blocks.items() if k >= 2}
        # plain entrywise: c the largest off-diagonal entry of any class of the size (diagonals raised to m)
        tops = {k: min(max(float(f[1:].max()), 0.0), m) for k, f in profiles[s].items()}
        consts = [(k, c, m - c) for k, c in tops.items()]
        if 1 in blocks:  # a class of one bin: no allocation left, the whole diagonal is one Gaussian
            consts.append((1, 0.0, m))
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


def lower_sandwich(sp: _Spectra, frac: float, *, verify: bool = True) -> tuple[float, float]:
    """``(c', d')`` with ``c' J + d' I <= G``: ``d'`` a fraction ``frac`` of ``lambda_min(G)``, ``c'`` the largest then
    admissible, ``1 / (1^T (G - d' I)^+ 1)`` (zero when ``1`` leaves the range). ``verify``: checked as above, the
    constants lowered by the residual and the solver's error bound.

    Parameters
    ----------
    sp : _Spectra
        The spectra of ``G``.
    frac : float
        In ``[0, 1]``: ``d'`` as a fraction of ``lambda_min(G)``.
    verify : bool, optional
        Check the inequality and move the constants to the safe side (default ``True``).

    Returns
    -------
    tuple of float
        ``(c', d')``, both non-negative.

    Raises
    ------
    numpy.linalg.LinAlgError
        The eigenvalue solver fails to converge.
    """
    t, g, w = sp.t, sp.g, sp.w
    d = max(0.0, frac * float(w[0]))
    lam = w - d
    tol = 1e-9 * max(float(w[-1]), 1e-300)
    if np.any((lam <= tol) & (np.abs(sp.proj) > 1e-9 * math.sqrt(t))):
        c = 0.0
    else:
        keep = lam > tol
        c = 1.0 / float(np.sum(sp.proj[keep] ** 2 / lam[keep]))
    if verify:
        resid = float(np.linalg.eigvalsh(g - c * np.ones((t, t)) - d * np.eye(t))[0])
        eta = max(0.0, -resid) + _error(g, c * t + d)
        if d >= eta:
            d -= eta
        else:
            c = max(0.0, c - (eta - d) / t)
            d = 0.0
    return c, d


def _pair_epsilon(
    c: float, d: float, sigma: float, t: int, delta: float, eps_error: float | None, rel_error: float | None
) -> tuple[float, float, float] | None:
    """Bounds on epsilon of Gaussian(sqrt c) x RandomAllocation(1 of t, sqrt d); ``None`` if out of reach."""
    if not (math.isfinite(c) and math.isfinite(d)):
        return None
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    if c > 0:
        acc.compose(Gaussian(noise_multiplier=sigma, sensitivity=math.sqrt(c)))
    if d > 0:
        if sigma / math.sqrt(d) < MIN_ALLOCATION_SIGMA:
            return None
        acc.compose(
            RandomAllocation(mechanism=Gaussian(noise_multiplier=sigma, sensitivity=math.sqrt(d)), steps_per_epoch=t)
        )
    if c <= 0 and d <= 0:
        return 0.0, 0.0, 0.0
    try:
        b = acc.epsilon(delta)
    except PrecisionError:
        return None
    return b.lower, b.estimate, b.upper


def sandwich_epsilon(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
    fracs: tuple[float, ...] = (0.0, 0.1),
) -> tuple[float, float, tuple[float, float] | None, tuple[float, float] | None, str]:
    """``(lower, upper, (c, d) used above, (c', d') used below, how above)``: the best of a few comparisons (the
    entrywise one and Loewner sandwiches above, Loewner sandwiches below), each certified.
    ``upper`` is ``inf`` (and ``lower`` 0) where the allocation is out of reach (tiny noise).

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``).
    sigma : float
        The noise multiplier.
    delta : float
        The target delta.
    eps_error, rel_error : float, optional
        Accuracy of the certified evaluations.
    fracs : tuple of float, optional
        The upper sandwiches tried (``upper_sandwich``'s ``frac``), default ``(0.0, 0.1)``.

    Returns
    -------
    tuple
        ``(lower, upper, (c, d) or None, (c', d') or None, how)``; ``how`` names the upper comparison used.

    Raises
    ------
    ValueError
        Bad accuracy arguments (from the accountant).

    References
    ----------
    Choquette-Choo et al., ICLR 2025, arXiv 2410.06266 (the dominating pair of balls-in-bins).
    """
    t = g.shape[0]
    sp = _Spectra(g)
    best_up: float = math.inf
    arg_up: float | None = None  # a Loewner fraction, or None for the entrywise comparison
    coarse = 0.05
    entrywise = entrywise_upper(g)
    r = _pair_epsilon(*entrywise, sigma, t, delta, coarse, None)
    if r is not None:
        best_up = r[1]
    if sp.d_floor == 0.0 or sigma / math.sqrt(sp.d_floor) >= MIN_ALLOCATION_SIGMA:
        for f in fracs:  # pick the sandwich on a coarse accuracy (unverified constants), then verify and certify it
            c, d = upper_sandwich(sp, f, verify=False)
            r = _pair_epsilon(c, d, sigma, t, delta, coarse, None)
            if r is not None and r[1] < best_up:  # by the estimate: the coarse ends are wide
                best_up, arg_up = r[1], f
    up, used_up, how_up = math.inf, None, ""
    if math.isfinite(best_up):
        used_up = entrywise if arg_up is None else upper_sandwich(sp, arg_up)
        how_up = "entrywise comparison (Kahane)" if arg_up is None else "Loewner sandwich"
        r = _pair_epsilon(*used_up, sigma, t, delta, eps_error, rel_error)
        up = r[2] if r is not None else math.inf
    best_lo, arg_lo = -math.inf, None
    for f in (1.0, 0.0):
        c, d = lower_sandwich(sp, f, verify=False)
        r = _pair_epsilon(c, d, sigma, t, delta, coarse, None)
        if r is not None and r[1] > best_lo:
            best_lo, arg_lo = r[1], f
    lo, used_lo = 0.0, None
    if arg_lo is not None:
        used_lo = lower_sandwich(sp, arg_lo)
        r = _pair_epsilon(*used_lo, sigma, t, delta, eps_error, rel_error)
        lo = r[0] if r is not None else 0.0
    return lo, up, used_up, used_lo, how_up
