"""The dominating pair of every epsilon-bounded-range mechanism (``BoundedRangeLoss``), its largest delta
(``bounded_range_delta``), certified Renyi bounds (``bounded_range_rdp``) and the two-point pairs ``T_t``
(``two_point_pair``), and the pair of a mechanism that is both bounded-range and pure DP
(``CappedBoundedRangeLoss``, with permute-and-flip's range ``permute_and_flip_range``); the proofs are in
``tightdp.mechanisms.selection``'s docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import ArrayLike, FloatArray
from ..losses import DiscreteLoss, PrivacyLoss
from ..losses._cells import _CELL_REL, AtomCells, _place_atoms

_U = float(np.finfo(float).eps) / 2
_BR_REFINE = 128  # most cells ``bounded_range_rdp`` refines per order


def bounded_range_delta(epsilon: float, eps_prime: float) -> float:
    """``D(e^eps')``: the largest ``delta(eps')`` of one epsilon-BR mechanism (``tightdp.mechanisms.selection``).

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    eps_prime : float
        The epsilon at which delta is evaluated, any real.

    Returns
    -------
    float
        ``delta`` in ``[0, 1]``.

    Raises
    ------
    OverflowError
        If ``epsilon`` or ``eps_prime`` is too large for ``exp`` (above about 709).

    References
    ----------
    Dong, Durfee, Rogers 2020, Thm 3.
    """
    big, a = math.exp(epsilon), math.exp(eps_prime)
    if a >= big:
        return 0.0
    if a >= 1.0:
        return (math.sqrt(big) - math.sqrt(a)) ** 2 / math.expm1(epsilon)
    if a <= 1.0 / big:
        return 1.0 - a
    return 1.0 - a + (math.sqrt(a * big) - 1.0) ** 2 / math.expm1(epsilon)


def _br_log_masses(t: FloatArray, epsilon: float | FloatArray) -> tuple[FloatArray, FloatArray]:
    """``log p_t`` and ``log(1 - p_t)`` without cancellation: ``p_t = e^((1-t) eps) expm1(t eps) / expm1(eps)``,
    ``1 - p_t = expm1((1 - t) eps) / expm1(eps)``."""
    with np.errstate(divide="ignore"):
        log_p = np.log(np.expm1(t * epsilon)) + (1.0 - t) * epsilon - math.log(math.expm1(epsilon))
        log_1mp = np.log(np.expm1((1.0 - t) * epsilon)) - math.log(math.expm1(epsilon))
    return log_p, log_1mp


def _br_cell_bounds(t: FloatArray, epsilon: float, lam: float | FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(values at the points t, upper bounds on the cells between them)`` of ``D_lambda(T_t)``."""
    log_p, log_1mp = _br_log_masses(t, epsilon)
    a, b = (lam - 1.0) * (1.0 - t) * epsilon, -(lam - 1.0) * t * epsilon
    vals = np.logaddexp(log_p + a, log_1mp + b) / (lam - 1.0)
    cells = np.logaddexp(log_p[..., 1:] + a[..., :-1], log_1mp[..., :-1] + b[..., :-1]) / (lam - 1.0)
    return vals, cells


def bounded_range_rdp(epsilon: float, orders: ArrayLike) -> FloatArray:
    """Certified upper bounds on ``sup_t D_lambda(T_t)``, the Renyi divergence of every epsilon-BR pair at the
    orders ``lambda`` (step (1) of ``tightdp.mechanisms.selection``'s docstring: a dominated pair is a
    post-processing, Blackwell, so its Renyi divergences are smaller; Cesar & Rogers 2021 bound the same
    supremum).

    ``D_lambda(T_t) = log(p_t e^((lambda - 1)(1 - t) eps) + (1 - p_t) e^(-(lambda - 1) t eps)) / (lambda - 1)``;
    on each interval ``[t_j, t_(j+1)]`` ``p_t`` rises and both exponentials fall in ``t``, so
    ``log(p_(j+1) e^((lambda - 1)(1 - t_j) eps) + (1 - p_j) e^(-(lambda - 1) t_j eps)) / (lambda - 1)`` bounds it.
    Branch and bound: 4096 cells, then every cell whose bound exceeds the best point value split into 64 (when
    there are at most 128 such cells);
    the largest bound (plus a rounding margin) bounds the supremum. Also at most ``lambda eps^2 / 8``
    (epsilon-BR implies ``eps^2 / 8``-zCDP, Cesar & Rogers 2021, Lemma 3.2): the smaller.

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    orders : array_like of float
        Renyi orders ``lambda > 1``.

    Returns
    -------
    numpy.ndarray of float
        One bound per order.

    Raises
    ------
    ValueError
        If ``orders`` cannot be read as floats (numpy's error).
    """
    orders = np.asarray(orders, float)
    t = np.linspace(0.0, 1.0, 4097)
    vals, cells = _br_cell_bounds(t[None, :], epsilon, orders[:, None])
    best = np.max(vals, axis=1)
    out = np.empty(orders.size)
    frac = np.linspace(0.0, 1.0, 65)
    zcdp = orders * epsilon * epsilon / 8.0
    coarse = np.max(cells, axis=1) * (1.0 + 1e-12) + 1e-15
    for i, lam in enumerate(orders.tolist()):
        out[i] = coarse[i]
        js = np.nonzero(cells[i] > best[i])[0]  # the cells that may hold the supremum above the best point
        if 0 < js.size <= _BR_REFINE:  # (a flat supremum, many such cells: the coarse and zCDP bounds stand)
            sub = t[js, None] + (t[js + 1] - t[js])[:, None] * frac[None, :]
            _, c = _br_cell_bounds(sub, epsilon, lam)
            out[i] = min(out[i], max(float(best[i]), float(np.max(c))) * (1.0 + 1e-12) + 1e-15)
    return np.minimum(out, zcdp)


def two_point_pair(epsilon: float, t: float) -> DiscreteLoss:
    """The pair ``T_t``: losses ``(1 - t) epsilon`` and ``-t epsilon`` with P-masses ``p_t`` and ``1 - p_t``.

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    t : float
        The pair's position in ``[0, 1]``.

    Returns
    -------
    DiscreteLoss
        Two atoms.

    Raises
    ------
    ZeroDivisionError
        If ``epsilon`` is zero.

    References
    ----------
    Dong, Durfee, Rogers 2020, Thm 3 (the pairs ``T_t``).
    """
    x = math.exp(t * epsilon)
    p_hi = math.expm1(t * epsilon) * math.exp(epsilon) / (x * math.expm1(epsilon))
    return DiscreteLoss(values=(-t * epsilon, (1.0 - t) * epsilon), probs=(1.0 - p_hi, p_hi))


@dataclass(frozen=True)
class BoundedRangeLoss(PrivacyLoss):
    """The dominating pair of every epsilon-BR mechanism (``tightdp.mechanisms.selection``): P-density
    ``sqrt(E) e^(l/2) / (2 (E - 1))`` on ``[-epsilon, epsilon]``, Q-density that times ``e^(-l)``.

    ``P(L <= s) = (e^((s + eps)/2) - 1) / (E - 1)``, ``Q(L <= s) = (E - e^((eps - s)/2)) / (E - 1)``; cell
    masses are products of exponentials and one ``expm1`` (no cancellation).

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.

    Raises
    ------
    TypeError
        If ``epsilon`` is missing (``BoundedRange`` validates its value).

    References
    ----------
    Dong, Durfee, Rogers 2020, Thm 3.
    """

    epsilon: float

    def support(self) -> tuple[float, float]:
        return -self.epsilon, self.epsilon

    def _clip(self, s: ArrayLike) -> FloatArray:
        return np.clip(np.asarray(s, float), -self.epsilon, self.epsilon)

    def cdf(self, s: ArrayLike) -> FloatArray:
        e = self.epsilon
        out: FloatArray = np.expm1((self._clip(s) + e) / 2.0) / math.expm1(e)
        return out

    def sf(self, s: ArrayLike) -> FloatArray:
        e = self.epsilon
        c = self._clip(s)
        out: FloatArray = np.exp((c + e) / 2.0) * np.expm1((e - c) / 2.0) / math.expm1(e)
        return out

    has_q_side = True

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        e = self.epsilon
        c = self._clip(s)
        out: FloatArray = (
            np.exp((e - c) / 2.0) * np.expm1((e + c) / 2.0) / math.expm1(e)
        )  # (E - e^((e - c)/2)) / (E - 1)
        return out

    def q_sf(self, s: ArrayLike) -> FloatArray:
        e = self.epsilon
        out: FloatArray = np.expm1((e - self._clip(s)) / 2.0) / math.expm1(e)
        return out

    def _cells(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray]:
        e = self.epsilon
        s = self._clip(edges)
        u, v = s[:-1], s[1:]
        w = np.expm1(np.maximum(v - u, 0.0) / 2.0) / math.expm1(e)
        P = np.exp((u + e) / 2.0) * w  # e^((u + e)/2) (e^((v - u)/2) - 1) / (E - 1)
        Q = np.exp((e - v) / 2.0) * w  # e^((e - v)/2) (e^((v - u)/2) - 1) / (E - 1)
        return P, Q

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        e = np.asarray(edges, float)
        P, _ = self._cells(e)
        below = float(self.cdf(e[:1])[0])
        above = float(self.sf(e[-1:])[0])
        return below, above, P, (_CELL_REL, 0.0), 0.0

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        return self._cells(np.asarray(edges, float))[1], (_CELL_REL, 0.0)

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        e = self.epsilon
        lo, hi = max(a, -e), min(b, e)
        if hi <= lo:
            return 0.0, 0.0
        # int l sqrt(E) e^(l/2) / (2 (E - 1)) dl = sqrt(E) e^(l/2) (l - 2) / (E - 1)

        def g(l: float) -> float:
            return math.exp((l + e) / 2.0) * (l - 2.0) / math.expm1(e)

        val = g(hi) - g(lo)
        return val, 1e-14 * (abs(g(hi)) + abs(g(lo)) + 1e-300)


def permute_and_flip_range(epsilon: float) -> float:
    """``eta = 2 log(2 e^(epsilon / 2) - 1)``, rounded up: permute-and-flip at ``epsilon`` is ``eta``-BR, and the
    swap of two tied candidates attains it (``tightdp.mechanisms.selection``'s docstring). Never above
    ``2 epsilon`` (every epsilon-DP mechanism is ``2 epsilon``-BR).

    Parameters
    ----------
    epsilon : float
        Permute-and-flip's epsilon, non-negative.

    Returns
    -------
    float
        ``eta`` in ``[epsilon, 2 epsilon]``.

    Raises
    ------
    OverflowError
        Never for ``epsilon <= 500`` (``PermuteAndFlip`` validates it).
    """
    if epsilon <= 0.0:
        return 0.0
    eta = epsilon + 2.0 * math.log1p(-math.expm1(-0.5 * epsilon))  # 2 log(2 e^(eps/2) - 1) without cancellation
    return min(eta * (1.0 + 8.0 * _U) + 1e-300, 2.0 * epsilon)


@dataclass(frozen=True)
class CappedBoundedRangeLoss(AtomCells, PrivacyLoss):
    """The dominating pair of every mechanism that is both ``epsilon``-BR and ``cap``-DP (``epsilon / 2 <= cap <=
    epsilon``): the pairs ``T_t`` whose losses stay in ``[-cap, cap]`` (``tightdp.mechanisms.selection``'s
    docstring, "Bounded range and pure DP").

    With ``E = e^epsilon`` and ``w = 2 cap - epsilon``: ``BoundedRangeLoss(epsilon)``'s densities on ``(-w, w)``,
    and atoms at ``+cap`` (P-mass ``p = e^cap expm1(epsilon - cap) / expm1(epsilon)``, Q-mass ``q = expm1(epsilon
    - cap) / expm1(epsilon)``) and at ``-cap`` (P-mass ``q``, Q-mass ``p``). ``cap = epsilon`` is
    ``BoundedRangeLoss(epsilon)``; ``cap = epsilon / 2`` is randomized response at ``cap``.

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    cap : float
        The pure-DP bound on the loss, in ``[epsilon / 2, epsilon]``.

    Raises
    ------
    ValueError
        If ``cap`` lies outside ``[epsilon / 2, epsilon]``.

    References
    ----------
    Dong, Durfee, Rogers 2020, Thm 3 (the pairs ``T_t``).
    """

    epsilon: float
    cap: float

    def __post_init__(self) -> None:
        if not (self.epsilon > 0.0 and 0.5 * self.epsilon <= self.cap <= self.epsilon):
            raise ValueError(f"cap must lie in [epsilon / 2, epsilon] = [{self.epsilon / 2}, {self.epsilon}]")

    @property
    def _w(self) -> float:
        return 2.0 * self.cap - self.epsilon

    @property
    def _atoms(self) -> tuple[float, float]:
        """``(p, q)``: the P-mass at ``+cap`` (the Q-mass at ``-cap``) and the Q-mass at ``+cap`` (P at ``-cap``)."""
        q = math.expm1(self.epsilon - self.cap) / math.expm1(self.epsilon)
        return math.exp(self.cap) * q, q

    def support(self) -> tuple[float, float]:
        return -self.cap, self.cap

    def _inner(self, s: ArrayLike) -> FloatArray:
        return np.clip(np.asarray(s, float), -self._w, self._w)

    def _p_between(self, a: ArrayLike, b: ArrayLike) -> FloatArray:
        """P-mass of the continuous part on ``(a, b)`` (clipped to ``(-w, w)``)."""
        u, v = self._inner(a), self._inner(b)
        out: FloatArray = np.exp((u + self.epsilon) / 2.0) * np.expm1(np.maximum(v - u, 0.0) / 2.0)
        return out / math.expm1(self.epsilon)

    def _q_between(self, a: ArrayLike, b: ArrayLike) -> FloatArray:
        u, v = self._inner(a), self._inner(b)
        out: FloatArray = np.exp((self.epsilon - v) / 2.0) * np.expm1(np.maximum(v - u, 0.0) / 2.0)
        return out / math.expm1(self.epsilon)

    def cdf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        p, q = self._atoms
        out: FloatArray = (
            np.where(s >= -self.cap, q, 0.0) + self._p_between(-self._w, s) + np.where(s >= self.cap, p, 0.0)
        )
        return np.minimum(out, 1.0)

    def sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        p, q = self._atoms
        out: FloatArray = np.where(s < -self.cap, q, 0.0) + self._p_between(s, self._w) + np.where(s < self.cap, p, 0.0)
        return np.minimum(out, 1.0)

    has_q_side = True

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        p, q = self._atoms
        out: FloatArray = (
            np.where(s >= -self.cap, p, 0.0) + self._q_between(-self._w, s) + np.where(s >= self.cap, q, 0.0)
        )
        return np.minimum(out, 1.0)

    def q_sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        p, q = self._atoms
        out: FloatArray = np.where(s < -self.cap, p, 0.0) + self._q_between(s, self._w) + np.where(s < self.cap, q, 0.0)
        return np.minimum(out, 1.0)

    def _cells_pq(
        self, edges: ArrayLike, apart: bool = False
    ) -> tuple[float, float, FloatArray, FloatArray, float, tuple[FloatArray, FloatArray] | None]:
        """Cell masses on ``(e_i, e_(i+1)]``: the continuous part in closed form (as ``BoundedRangeLoss``), the
        two atoms placed by ``_place_atoms`` (on an edge: the cell below it, or apart)."""
        e = np.asarray(edges, float)
        P, Q = self._p_between(e[:-1], e[1:]), self._q_between(e[:-1], e[1:])
        p, q = self._atoms
        below, above, edge_err, atoms = _place_atoms(e, (-self.cap, self.cap), (q, p), (p, q), P, Q, apart)
        below += float(self._p_between(-self._w, e[0]))
        above += float(self._p_between(e[-1], self._w))
        return below, above, P, Q, edge_err, atoms

    def lattice_atoms(self) -> tuple[float, ...]:
        return (-self.cap, self.cap) if self._w < self.cap else ()

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        p, q = self._atoms
        val = (self.cap * p if a < self.cap <= b else 0.0) - (self.cap * q if a < -self.cap <= b else 0.0)
        lo, hi = max(a, -self._w), min(b, self._w)
        if hi <= lo:
            return val, 1e-15
        e = self.epsilon

        def g(l: float) -> float:  # the antiderivative of l times the P-density (as BoundedRangeLoss)
            return math.exp((l + e) / 2.0) * (l - 2.0) / math.expm1(e)

        return val + g(hi) - g(lo), 1e-14 * (abs(g(hi)) + abs(g(lo)) + abs(val) + 1e-300)
