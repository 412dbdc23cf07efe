"""The distributed discrete Gaussian beyond the exact grid: the law of the sum and its block sums, proven (Lemmas A-C),
for ``_ddg_large``'s cells.

``DistributedDiscreteGaussianLoss`` enumerates one atom per output of a window of about ``37 s`` outputs
(``s = sigma sqrt(clients)``) and refuses beyond 8 million (``s`` above about 2.2e5). This module describes the same
pair, ``P = law of S + Delta`` against ``Q = law of S`` (``S`` the sum of ``clients`` independent ``N_Z(0, sigma^2)``;
subsampled, the mixtures of ``DiscreteGaussianLoss``), through the masses of *blocks of consecutive outputs*, which
is all the dominance engine asks for (``cell_masses``): no enumeration, a cost linear in the number of cells.

Notation. ``v = sigma^2``, ``s^2 = clients v`` (exact reals: ``sigma`` is a double), ``phi(y) = exp(-y^2 / (2 s^2)) /
(s sqrt(2 pi))``, ``p(z) = P(S = z)``, ``u`` the unit round-off, ``E(w) = 2 sum_(k >= 1) exp(-2 pi^2 w k^2)``.

**Lemma A (pointwise law of the sum).** For every integer ``z``, ``e^-T <= p(z) / phi(z) <= e^T`` with
``T = t_n + e``, ``t_n = 3 (n - 1) e / (1 - e)``, ``n = clients`` and ``e = 2 exp(-pi^2 v) / (1 - exp(-3 pi^2 v))``
(requires ``e < 1``).

*Proof.* Poisson summation: for ``tau > 0`` and real ``c``, ``theta(tau, c) = sum_(x in Z) exp(-(x - c)^2 / (2 tau))
= sqrt(2 pi tau) (1 + 2 sum_(k >= 1) exp(-2 pi^2 tau k^2) cos(2 pi k c))``, so ``theta(tau, c) / sqrt(2 pi tau)`` lies
in ``[1 - E(tau), 1 + E(tau)]``, and ``Z(w) = theta(w, 0)`` (the normaliser of ``N_Z(0, w)``) in ``sqrt(2 pi w) [1, 1 +
E(w)]`` (every cosine is 1). Let ``g_w(x) = exp(-x^2 / (2 w))`` and ``S_j`` the sum of ``j`` of the variables; claim
``p_j(z) = P(S_j = z)`` is within ``e^(+-t_j)`` of ``g_(jv)(z) / Z(jv)`` at every ``z``, ``t_1 = 0`` (``S_1`` is
``N_Z(0, v)``). Completing the square, ``x^2 / (jv) + (z - x)^2 / v = z^2 / ((j+1) v) + (x - c)^2 / tau`` with
``c = z j / (j+1)`` and ``tau = j v / (j+1)``, so ``sum_x g_(jv)(x) g_v(z - x) = g_((j+1)v)(z) theta(tau, c)`` and
``p_(j+1)(z) = sum_x p_j(x) p_1(z - x)`` lies within ``e^(+-t_j)`` of ``g_((j+1)v)(z) theta(tau, c) / (Z(jv) Z(v))``.
Divided by ``g_((j+1)v)(z) / Z((j+1)v)`` this is ``theta(tau, c) Z((j+1)v) / (Z(jv) Z(v))``, whose factors
``sqrt(2 pi tau) sqrt(2 pi (j+1) v) / (sqrt(2 pi j v) sqrt(2 pi v))`` cancel exactly (``tau (j+1) v = j v^2``): the
ratio lies in ``[(1 - E(tau)) / ((1 + E(jv)) (1 + E(v))), (1 + E(tau)) (1 + E((j+1) v))]``. ``E`` decreases and
``tau, jv, (j+1) v >= v / 2``, so with ``e >= E(v / 2)`` the ratio lies in ``[(1 - e) / (1 + e)^2, (1 + e)^2]``, whose
logarithms are at most ``2e`` and ``e / (1 - e) + 2e <= 3e / (1 - e)`` in size: ``t_(j+1) = t_j + 3e / (1 - e)``. And
``E(v / 2) = 2 sum_(k >= 1) exp(-pi^2 v k^2) <= 2 exp(-pi^2 v) sum_(m >= 0) exp(-3 pi^2 v m) = e`` because ``k^2 - 1
>= 3 (k - 1)`` (``(k - 1)(k - 2) >= 0``). Finally ``phi(z) = g_(s^2)(z) / (s sqrt(2 pi))`` and ``s sqrt(2 pi) / Z(s^2)``
lies in ``[1 / (1 + E(s^2)), 1] ⊂ [e^-e, 1]`` (``s^2 >= v / 2``): ``T = t_n + e``. QED. (Kairouz, Liu, Steinke 2021
analyse the same sum in Rényi divergence; this pointwise form is what the cells below need, tails included.)

**Lemma B (block sums).** For any scale ``r > 0`` let ``f(y) = exp(-y^2 / (2 r^2)) / (r sqrt(2 pi))``. For integers
``a <= b`` and ``A = a - 1/2``, ``B = b + 1/2``, ``sum_(x=a..b) f(x) = J + R`` with ``J = int_A^B f + (B f(B) - A
f(A)) / (24 r^2)`` and ``|R| <= sum_(x=a..b) kappa(x) f(x)``, ``kappa(x) = (13 / 5760) e^(|x| / (2 r^2)) H((|x| +
1/2) / r) / r^4``, ``H(w) = w^4 + 6 w^2 + 3``.

*Proof.* Taylor's theorem with integral remainder at ``x``, for ``|t| <= 1/2``: ``f(x + t) = f(x) + t f'(x) + t^2
f''(x) / 2 + t^3 f'''(x) / 6 + R_4(t)``, ``|R_4(t)| <= M(x) t^4 / 24`` with ``M(x) = max_(|t| <= 1/2) |f''''(x + t)|``;
integrated over ``t`` in ``[-1/2, 1/2]`` the odd terms vanish: ``int_(x-1/2)^(x+1/2) f = f(x) + f''(x) / 24 + R_1``,
``|R_1| <= M(x) / 1920``. Likewise ``f''(x + t) = f''(x) + t f'''(x) + R_2(t)``, ``|R_2(t)| <= M(x) t^2 / 2``:
``int_(x-1/2)^(x+1/2) f'' = f''(x) + R_3``, ``|R_3| <= M(x) / 24``. Summed over ``x = a..b`` (the cells tile ``[A,
B]``): ``int_A^B f = sum f(x) + (1/24) sum f''(x) + sum R_1`` and ``f'(B) - f'(A) = sum f''(x) + sum R_3``, so ``sum
f(x) = int_A^B f - (f'(B) - f'(A)) / 24 + sum (R_3 / 24 - R_1)``, and ``-f'(y) / 24 = y f(y) / (24 r^2)`` gives ``J``;
``|R_3| / 24 + |R_1| <= M(x) (1/576 + 1/1920) = (13 / 5760) M(x)``. Now ``f''''(y) = f(y) He_4(y / r) / r^4``,
``He_4(w) = w^4 - 6 w^2 + 3``, ``|He_4(w)| <= H(w)``, ``H`` increasing in ``|w|``; and for ``|t| <= 1/2``, ``f(x + t)
/ f(x) = exp(-(2 x t + t^2) / (2 r^2)) <= exp(|x| / (2 r^2))``: ``M(x) <= f(x) e^(|x| / (2 r^2)) H((|x| + 1/2) / r) /
r^4``. QED. So if ``kappa <= K < 1`` on the block, ``J >= (1 - K) sum f(x) >= 0`` and ``sum f(x)`` lies in ``[J / (1 +
K), J / (1 - K)]`` (the first-order midpoint rule alone errs by ``(1 + z^2) / (24 s^2)``, 1e-11 at ``s = 2e5``: above
the engine's cap of 1e-12 on relative errors, ``losses.REL_CAP``; ``K`` is below 3e-19 there, 19 standard deviations
out).

**Lemma C (the computed scale).** ``s_hat = fl(sqrt(fl(n fl(sigma sigma))))`` has ``|s_hat / s - 1| <= eps = 2.01 u``
(each of the three roundings multiplies by ``1 +- u``, the square root halves the first two). For every real ``y``,
``phi(y) / phi_hat(y)`` (``phi_hat`` with scale ``s_hat``) equals ``(s_hat / s) exp(-(y^2 / 2) (1 / s^2 - 1 /
s_hat^2))``, within ``e^(+-eps_s(y))``, ``eps_s(y) = 1.01 eps (1 + (y / s_hat)^2)``: ``|log(s_hat / s)| <= 1.0001 eps``
and ``|1 / s^2 - 1 / s_hat^2| <= (2 eps + eps^2) / s_hat^2``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .._types import FloatArray
from ..losses import gaussian_cell_masses_and_errors, split_errors
from ..losses._cells import _NARROW

__all__ = ["block_sums", "reference_window", "sum_law_bound", "unit_block_sums"]

_U = float(np.finfo(float).eps) / 2
_SQRT2PI = math.sqrt(2.0 * math.pi)
#: the window's half-width in standard deviations (``M = ceil(19 s_hat) + 1``)
_WINDOW_Z = 19.0
#: Lemma B's constant ``1/576 + 1/1920``
_C4 = 13.0 / 5760.0
#: the relative scale error of ``s_hat`` (Lemma C)
_EPS_SCALE = 2.01 * _U
#: the largest ``T``, ``eps_s`` or ``K`` for which ``zeta = 1.01 (T + eps_s + K)`` is proven (module docstring)
_ZETA_MAX = 1e-3


def sum_law_bound(sigma: float, clients: int) -> float:
    """An upper bound ``T`` on ``|log(P(S = z) / phi(z))|`` over all integers ``z`` (Lemma A of the module docstring),
    ``S`` the sum of ``clients`` independent ``N_Z(0, sigma^2)`` and ``phi`` the normal density of variance ``clients
    sigma^2``.

    ``T = (3 (n - 1) / (1 - e) + 1) e`` with ``e = 2 exp(-pi^2 sigma^2) / (1 - exp(-3 pi^2 sigma^2))``, rounded up by a
    relative ``1e-10`` (``e`` is ``exp`` of an exponent of size at most ``713`` computed within about ``6u`` of its size,
    1e-12 relative, and the rest adds a few ``u``); where ``log e`` is below ``-700 - log(3 n + 2)``, ``T <= (3 n + 2)
    e < e^-700 <= 1e-300`` and ``1e-300`` is returned: never 0, so the bound is never lost to an underflow.

    Parameters
    ----------
    sigma : float
        Scale of each client's discrete Gaussian, positive.
    clients : int
        Number of clients, a positive integer.

    Returns
    -------
    float
        ``T``, at least ``1e-300``; ``inf`` where ``e >= 1/2`` (Lemma A needs ``e < 1``; below 1/2 it says little).

    Raises
    ------
    ValueError
        Not raised: the arguments are the caller's to validate.
    """
    c = math.pi * math.pi * sigma * sigma
    log_e = math.log(2.0) - c - math.log1p(-math.exp(-3.0 * c)) if c > 1e-3 else math.inf
    if log_e < -700.0 - math.log(3.0 * clients + 2.0):
        return 1e-300
    e = math.exp(log_e) * (1.0 + 1e-10) if log_e < 0.0 else math.inf
    if not e < 0.5:
        return math.inf
    return max((3.0 * (clients - 1) / (1.0 - e) + 1.0) * e * (1.0 + 1e-10), 1e-300)


def reference_window(s_hat: float, delta: int) -> tuple[int, int]:
    """``(lo, hi) = (-M, Delta + M)``, ``M = ceil(19 s_hat) + 1``: the outputs the cells cover (module docstring).

    Parameters
    ----------
    s_hat : float
        The computed scale ``sigma sqrt(clients)``.
    delta : int
        The shift ``Delta``.

    Returns
    -------
    tuple of int
        ``(lo, hi)``.
    """
    m = int(math.ceil(_WINDOW_Z * s_hat)) + 1
    return -m, delta + m


def unit_block_sums(x_edges: FloatArray, mean: float, s_hat: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(J, err_J, kappa_s)`` for one component: Lemma B's ``J`` of the normal density of scale ``s_hat`` centred at
    the integer ``mean``, over the blocks of integers between consecutive half-integer ``x_edges``, a bound on the
    computed ``J``'s absolute error, and ``kappa_s = K + eps_s`` bounding the block's relative factors (Lemmas B and C).

    Block ``j`` holds the integers ``x_edges[j] + 1/2 .. x_edges[j+1] - 1/2``, none where the two edges are equal: then
    ``J = err_J = kappa_s = 0`` (the sum is empty), and only the distinct edges are worked on (a fine mesh leaves most
    blocks empty: a loss lattice of spacing ``Delta / s^2`` holds one output per many cells). ``int_A^B phi_hat``
    and its error come from ``gaussian_cell_masses_and_errors``: Gauss-Legendre on narrow blocks (width below
    ``0.05 s_hat``), whose edges enter exactly; CDF differences on wide ones, where the rounding of ``z = (x - m) /
    s_hat`` (``x - m`` is exact: half-integers below ``2^51``), at most ``u |z|``, moves an edge's CDF by at most
    ``1.01 u |z| phi_1(z)`` (``phi_1`` at most ``e^(u z^2)`` larger across that interval), charged here. The
    correction ``(B phi_hat(B) - A phi_hat(A)) / (24 s_hat^2)`` is computed as ``z phi_1(z) / (24 s_hat^2)`` at each
    edge, within ``(2 z^2 + 10) u`` of its size (the rounding of ``z`` moves ``z phi_1(z)`` by ``|1 - z^2| u``
    relative; the square, the exponent, ``exp``, the division by ``sqrt(2 pi)``, the product and ``24 s_hat^2`` add
    ``0.5 z^2 u`` and about ``7u``), and ``J`` as the sum within ``2u`` of the terms' sizes. ``K = 1.01 (13 / 5760)
    e^(w / (2 s_hat)) H(w) / s_hat^4`` (Lemma B, each float operation's rounding inside the ``1.01``) and ``eps_s =
    1.01 (2.01 u) (1 + w^2)`` (Lemma C) with ``w = (max(|A - m|, |B - m|) + 1) / s_hat``, which bounds ``(|x - m| +
    1/2) / s_hat`` over the block's outputs ``x``.

    Parameters
    ----------
    x_edges : numpy.ndarray of float
        Non-decreasing half-integers, exact doubles (``|x| < 2^51``).
    mean : float
        The component's integer mean.
    s_hat : float
        The computed scale (Lemma C).

    Returns
    -------
    tuple of numpy.ndarray
        ``(J, err_J, kappa_s)``, one entry per block.
    """
    x_all = np.asarray(x_edges, dtype=float)
    distinct = np.concatenate([[True], x_all[1:] > x_all[:-1]])  # the edges are sorted: no sort needed
    x, at = x_all[distinct], np.cumsum(distinct) - 1  # the non-empty blocks tile [x_0, x_last] between distinct edges
    if x.size < x_all.size:
        full = x_all[1:] > x_all[:-1]  # block j is the distinct edges' block at[j] when non-empty
        if x.size < 2:
            zero = np.zeros(full.size)
            return zero, zero.copy(), zero.copy()
        j_u, e_u, k_u = unit_block_sums(x, mean, s_hat)
        pick = np.minimum(at[:-1], j_u.size - 1)
        return np.where(full, j_u[pick], 0.0), np.where(full, e_u[pick], 0.0), np.where(full, k_u[pick], 0.0)
    m = np.array([float(mean)])
    one = np.ones(1)
    z = (x - float(mean)) / s_hat
    cdf, sf = special.ndtr(z), special.ndtr(-z)
    mass, err = gaussian_cell_masses_and_errors(x, m, one, s_hat, cdf, sf)
    width = x[1:] - x[:-1]
    wide = ~(width < _NARROW * s_hat)
    dens = np.exp(-0.5 * z * z) * (1.0 / _SQRT2PI)  # phi_1(z) at each edge
    if np.any(wide):
        moved = 1.01 * _U * np.abs(z) * dens
        err = np.where(wide, err + moved[:-1] + moved[1:], err)
    term = z * dens / (24.0 * s_hat * s_hat)
    term_err = (2.0 * z * z + 10.0) * _U * np.abs(term)
    corr = term[1:] - term[:-1]
    j = mass + corr
    err_j = err + term_err[1:] + term_err[:-1] + 2.0 * _U * (np.abs(mass) + np.abs(corr))
    az = np.abs(z)
    far = np.maximum(az[:-1], az[1:]) + 1.0 / s_hat
    kappa = (1.01 * _C4 / s_hat**4) * np.exp(far / (2.0 * s_hat)) * (far**4 + 6.0 * far**2 + 3.0)
    eps_s = (1.01 * _EPS_SCALE) * (1.0 + far * far)
    return j, err_j, np.where(width > 0, kappa + eps_s, 0.0)


def block_sums(
    x_edges: FloatArray,
    means: tuple[float, ...],
    weights: tuple[float, ...],
    s_hat: float,
    law: float,
    units: dict[float, tuple[FloatArray, FloatArray, FloatArray]] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Masses of the blocks of integers between consecutive half-integer ``x_edges`` under the mixture ``sum_c w_c
    p(. - m_c)`` (``p`` the law of the sum of the clients' noises) and bounds on their absolute errors (Lemmas A-C of
    the module docstring).

    ``J = sum_c w_c J_c`` from ``unit_block_sums``, within ``sum_c w_c err_c`` plus ``(C + 2) u sum_c w_c |J_c|`` (``C``
    products and sums, and the weight ``1 - q``, rounded once, while the mixture's weight is exactly ``1 - q``);
    with ``kappa_s`` the components' largest ``K + eps_s`` on the block, the true mass lies within ``err_J + zeta (J +
    err_J)`` of ``J``, ``zeta = 1.01 (law + kappa_s)``, where ``law``, ``K`` and ``eps_s`` are each at most ``1e-3``
    (module docstring); elsewhere the trivial bound ``J + err_J + 1``.

    Parameters
    ----------
    x_edges : numpy.ndarray of float
        Non-decreasing half-integers, exact doubles (``|x| < 2^51``).
    means, weights : tuple of float
        The mixture's integer means and non-negative weights.
    s_hat : float
        The computed scale (Lemma C).
    law : float
        ``T`` of Lemma A (``sum_law_bound``).
    units : dict, optional
        ``unit_block_sums`` of these edges by mean, where already computed (both sides of a pair share them).

    Returns
    -------
    tuple of numpy.ndarray
        ``(masses, errors)``, one per block, masses clipped at 0 (the error bound still holds: the true mass is not
        negative).

    Raises
    ------
    ValueError
        If the arrays' shapes do not match (numpy's error).
    """
    x = np.asarray(x_edges, dtype=float)
    units = {} if units is None else units
    j = np.zeros(x.size - 1)
    err_j = np.zeros(x.size - 1)
    size = np.zeros(x.size - 1)
    ks = np.zeros(x.size - 1)
    for m, w in zip(means, weights):
        if m not in units:
            units[m] = unit_block_sums(x, m, s_hat)
        jc, ec, kc = units[m]
        j = j + w * jc
        err_j = err_j + w * ec
        size = size + w * np.abs(jc)
        ks = np.maximum(ks, kc)
    err_j = err_j + (len(means) + 2) * _U * size
    bound = err_j + 1.01 * (law + ks) * (np.abs(j) + err_j)
    width = x[1:] - x[:-1]
    proven = (ks <= _ZETA_MAX) & (law <= _ZETA_MAX)  # K + eps_s <= 1e-3 bounds each
    bound = np.where(proven, bound, np.abs(j) + err_j + 1.0)
    return np.maximum(j, 0.0), np.where(width > 0, bound, 0.0) * (1.0 + 4.0 * _U)


def _split(masses: FloatArray, errors: FloatArray, outer: tuple[int, int]) -> tuple[float, float]:
    """``(rel, l1)`` for blocks whose indices ``outer`` are the outer ones (below and above the grid; ``-1``: empty,
    absent): ``split_errors`` of the others, and each outer block within ``1 +- rel`` of its mass or its error counted
    twice in ``l1``. The outer blocks reach the window's edge, where Lemma C's ``eps_s`` is largest (about ``2e-13``
    nineteen standard deviations out), but hold the grid's tail mass only: in ``l1`` they cost that mass times
    ``2e-13``, in ``rel`` every cell. Empty blocks (mass and error 0) change neither."""
    inner = np.ones(masses.size, dtype=bool)
    for i in outer:
        if i >= 0:
            inner[i] = False
    rel, l1 = split_errors(masses[inner], errors[inner])
    for i in outer:
        if i >= 0 and not errors[i] <= rel * masses[i]:
            l1 += 2.0 * float(errors[i])
    return rel, l1 * (1.0 + 4.0 * _U)
