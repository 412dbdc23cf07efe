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

**Class splitting and the mixed comparison** (upper): ``tightdp.matrix.class_split``.

**Entrywise comparison from below** (lower). The interpolation covers the diagonal too: the mean of ``X_j`` is
``-G_jj / (2 sigma^2)``, so moving ``G_jj`` moves it, and the diagonal terms of ``d/dtheta E F`` are ``1/2 (G - H)_jj
E[d_j d_j F - d_j F] / sigma^2`` with ``d_j d_j F - d_j F = g''(S) e^(2 x_j) / t^2 >= 0``. Hence ``E F(X_H) <= E
F(X_G)`` whenever ``H <= G`` entry by entry, the diagonal included (both Gram matrices; no Loewner step), and
``H``'s epsilon is a certified lower bound on the explicit pair's, in both directions. When every off-diagonal
entry of ``G`` is at least ``c >= 0`` (a non-negative ``C``: ``G = X^T C^T C X`` with non-negative patterns
``X``; otherwise only where the computed entries are above their error bound) and ``m = min_j G_jj``, take ``H =
c J + (m - c) I``: ``Gaussian(sqrt c) x RandomAllocation(1 of t, sqrt(m - c))``. For ``b < t`` bands the bins
more than ``b`` apart are orthogonal, ``c = 0``, and the lower end is plain random allocation at the modes' norm:
its amplification is the run's, where the Loewner sandwich from below keeps only the modes' common component (4
bands, cycle 200, noise 1.5, delta 1e-3: 2.72 against 0.64, Monte Carlo truth about 3.0). The same identity
with weights ``w_j`` in place of ``1/t`` holds for any mixture over patterns.

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
    "MIN_ALLOCATION_SIGMA",
    "MIN_LOWER_ALLOCATION_SIGMA",
    "entrywise_lower",
    "entrywise_upper",
    "lower_sandwich",
    "mode_gram",
    "sandwich_epsilon",
    "sandwich_lower",
    "sandwich_upper",
    "square_gram",
    "upper_sandwich",
]

_U = float(np.finfo(float).eps) / 2
#: the least noise multiplier per unit sensitivity at which a candidate allocation pair is certified: random
#: allocation itself is tight down to 0.2, but the sandwiches try dozens of candidates, each 0.1 to 0.4 s below
#: 0.9 (balls-in-bins, 16 bands, cycle 64, noise 4: at 0.5 the same answer took 7.4 s instead of 2.3 s)
MIN_ALLOCATION_SIGMA = 0.9
#: the same for the one entrywise pair from below (``entrywise_lower``): one candidate, so the slower allocations
#: at low noise are affordable (8 bands, cycle 64, noise 2: noise 0.36 per unit, 3 s at the coarse accuracy)
MIN_LOWER_ALLOCATION_SIGMA = 0.3
#: the coarse accuracy (``eps_error``) at which candidate pairs are compared
_COARSE = 0.05
#: an end from a coarse evaluation (certified too) is refined at the accuracy asked only where its coarse width exceeds
_REFINE_SHARE = 0.05


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


def square_gram(g: object) -> FloatArray:
    """``g`` as a float array; a ``ValueError`` naming ``g`` unless it is a square matrix.

    Parameters
    ----------
    g : array_like
        A Gram matrix.

    Returns
    -------
    FloatArray
        ``g`` as floats.

    Raises
    ------
    ValueError
        ``g`` is not a square matrix.
    """
    out = np.asarray(g, float)
    if out.ndim != 2 or out.shape[0] != out.shape[1]:
        raise ValueError(f"g must be a square matrix, got shape {out.shape}")
    return out


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
    g = square_gram(g)
    t = g.shape[0]
    err = _error(g) if err is None else err
    m = float(np.max(np.diag(g))) + err
    if t == 1:
        return 0.0, m
    off = g[~np.eye(t, dtype=bool)]
    c = min(max(float(np.max(off)) + err, 0.0), m)
    return c, m - c


def entrywise_lower(
    g: FloatArray, *, nonnegative: bool = False, err: float | None = None
) -> tuple[float, float] | None:
    """``(c, d)`` with ``c J + d I`` below ``G`` entry by entry, diagonal included: ``m = c + d = min_j G_jj``, ``c``
    the least off-diagonal entry (module docstring, "Entrywise comparison from below").

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``), square.
    nonnegative : bool, optional
        ``G``'s exact entries are known to be non-negative (a non-negative strategy): an entry whose computed value
        lies within its error bound of 0 is then taken as 0. Otherwise ``c`` is the least off-diagonal entry less
        its error bound, and ``None`` is returned where that is negative.
    err : float or None, optional
        The bound on the entries' errors; default ``_error(g)``.

    Returns
    -------
    tuple of float or None
        ``(c, d)``, both non-negative; ``None`` where ``m`` is not positive or an off-diagonal entry may be
        negative.

    Raises
    ------
    ValueError
        ``g`` is not a square matrix.
    """
    g = square_gram(g)
    t = g.shape[0]
    err = _error(g) if err is None else err
    diag = np.diag(g)
    m = float(np.min(diag)) - err  # at most every exact diagonal entry
    if m <= 0.0:
        return None
    if t == 1:
        return 0.0, m
    c = float(np.min(g[~np.eye(t, dtype=bool)])) - err
    if c < 0.0:
        if not nonnegative:
            return None
        c = 0.0
    c = min(c, m)
    return c, m - c


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
    c: float,
    d: float,
    sigma: float,
    t: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
    gate: float = MIN_ALLOCATION_SIGMA,
) -> tuple[float, float, float] | None:
    """Bounds on epsilon of Gaussian(sqrt c) x RandomAllocation(1 of t, sqrt d); ``None`` if out of reach (the
    allocation's noise per unit sensitivity below ``gate``)."""
    if not (math.isfinite(c) and math.isfinite(d)):
        return None
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    if c > 0:
        acc.compose(Gaussian(noise_multiplier=sigma, sensitivity=math.sqrt(c)))
    if d > 0:
        if sigma / math.sqrt(d) < gate:
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


def sandwich_upper(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
    fracs: tuple[float, ...] = (0.0, 0.1),
    spectra: _Spectra | None = None,
) -> tuple[float, tuple[float, float] | None, str]:
    """``(upper, (c, d) used, how)``: the best of the entrywise comparison and Loewner sandwiches from above, picked at
    a coarse accuracy and certified at the one asked; ``upper`` is ``inf`` where the allocation is out of reach.

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``).
    sigma : float
        The noise multiplier.
    delta : float
        The target delta.
    eps_error, rel_error : float, optional
        Accuracy of the certified evaluation.
    fracs : tuple of float, optional
        The upper sandwiches tried (``upper_sandwich``'s ``frac``), default ``(0.0, 0.1)``.
    spectra : _Spectra, optional
        ``G``'s spectra, if already computed.

    Returns
    -------
    tuple
        ``(upper, (c, d) or None, how)``; ``how`` names the comparison used.

    Raises
    ------
    ValueError
        Bad accuracy arguments (from the accountant).

    References
    ----------
    Choquette-Choo et al., ICLR 2025, arXiv 2410.06266 (the dominating pair of balls-in-bins).
    """
    t = g.shape[0]
    sp = _Spectra(g) if spectra is None else spectra
    best_up: float = math.inf
    arg_up: float | None = None  # a Loewner fraction, or None for the entrywise comparison
    entrywise = entrywise_upper(g)
    r = _pair_epsilon(*entrywise, sigma, t, delta, _COARSE, None)
    if r is not None:
        best_up = r[1]
    if sp.d_floor == 0.0 or sigma / math.sqrt(sp.d_floor) >= MIN_ALLOCATION_SIGMA:
        for f in fracs:  # pick the sandwich on a coarse accuracy (unverified constants), then verify and certify it
            c, d = upper_sandwich(sp, f, verify=False)
            r = _pair_epsilon(c, d, sigma, t, delta, _COARSE, None)
            if r is not None and r[1] < best_up:  # by the estimate: the coarse ends are wide
                best_up, arg_up = r[1], f
    if not math.isfinite(best_up):
        return math.inf, None, ""
    used = entrywise if arg_up is None else upper_sandwich(sp, arg_up)
    how = "entrywise comparison (Kahane)" if arg_up is None else "Loewner sandwich"
    r = _pair_epsilon(*used, sigma, t, delta, eps_error, rel_error)
    return (r[2] if r is not None else math.inf), used, how


def sandwich_lower(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
    *,
    nonnegative: bool = False,
    upper: float = math.inf,
    spectra: _Spectra | None = None,
) -> tuple[float, tuple[float, float] | None, str]:
    """``(lower, (c', d') used, how)``: the best of the Loewner sandwiches from below and the entrywise comparison from
    below, each a certified lower end of the explicit pair (a record with a fixed unit gradient).

    The candidates are compared by their lower ends at a coarse accuracy. A Loewner candidate is then verified and
    certified at the accuracy asked; the entrywise candidate's constants are certified already, so its coarse lower
    end stands unless its coarse width exceeds ``_REFINE_SHARE`` of ``upper - lower`` (where refining could
    matter; at low noise the refinement costs seconds).

    Parameters
    ----------
    g : FloatArray
        The modes' Gram matrix (``mode_gram``).
    sigma : float
        The noise multiplier.
    delta : float
        The target delta.
    eps_error, rel_error : float, optional
        Accuracy of the certified evaluation.
    nonnegative : bool, optional
        ``G``'s exact entries are non-negative (``entrywise_lower``).
    upper : float, optional
        The run's upper end, if known (default ``inf``: always refine).
    spectra : _Spectra, optional
        ``G``'s spectra, if already computed.

    Returns
    -------
    tuple
        ``(lower, (c', d') or None, how)``: ``lower`` 0 and ``None`` where no candidate is in reach.

    Raises
    ------
    ValueError
        Bad accuracy arguments (from the accountant).
    """
    t = g.shape[0]
    sp = _Spectra(g) if spectra is None else spectra
    best: tuple[float, float | None, tuple[float, float, float]] | None = None  # (coarse lower, Loewner frac, r)
    for f in (1.0, 0.0):
        r = _pair_epsilon(*lower_sandwich(sp, f, verify=False), sigma, t, delta, _COARSE, None)
        if r is not None and (best is None or r[0] > best[0]):
            best = (r[0], f, r)
    below = entrywise_lower(g, nonnegative=nonnegative)
    entry: tuple[float, tuple[float, float], str] = (0.0, (0.0, 0.0), "")  # the entrywise pair's certified end
    if below is not None:
        r = _pair_epsilon(*below, sigma, t, delta, _COARSE, None, gate=MIN_LOWER_ALLOCATION_SIGMA)
        if r is not None:
            entry = (r[0], below, "entrywise comparison from below (Kahane)")
            if best is None or r[0] > best[0]:
                best = (r[0], None, r)
    if best is None:
        return 0.0, None, ""
    _, frac, coarse = best
    if frac is None:  # the entrywise pair: its coarse end is certified (its constants are)
        if coarse[2] - coarse[0] <= _REFINE_SHARE * max(upper - coarse[0], 0.0):
            return entry
        r = _pair_epsilon(*entry[1], sigma, t, delta, eps_error, rel_error, gate=MIN_LOWER_ALLOCATION_SIGMA)
        return (max(r[0], entry[0]) if r is not None else entry[0]), entry[1], entry[2]
    used = lower_sandwich(sp, frac)  # verified now: its coarse end came from unverified constants
    r = _pair_epsilon(*used, sigma, t, delta, eps_error, rel_error)
    low = r[0] if r is not None else 0.0
    return (low, used, "Loewner sandwich from below") if low >= entry[0] else entry


def sandwich_epsilon(
    g: FloatArray,
    sigma: float,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
    fracs: tuple[float, ...] = (0.0, 0.1),
    *,
    nonnegative: bool = False,
) -> tuple[float, float, tuple[float, float] | None, tuple[float, float] | None, str]:
    """``(lower, upper, (c, d) used above, (c', d') used below, how above)``: ``sandwich_upper`` and
    ``sandwich_lower`` on one Gram matrix. ``upper`` is ``inf`` (and ``lower`` 0) where the allocation is out of
    reach (tiny noise).

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
    nonnegative : bool, optional
        ``G``'s exact entries are non-negative (``entrywise_lower``).

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
    sp = _Spectra(g)
    up, used_up, how_up = sandwich_upper(g, sigma, delta, eps_error, rel_error, fracs, spectra=sp)
    lo, used_lo, _ = sandwich_lower(
        g, sigma, delta, eps_error, rel_error, nonnegative=nonnegative, upper=up, spectra=sp
    )
    return lo, up, used_up, used_lo, how_up
