"""The distributed discrete Gaussian beyond the exact grid: the certified cells of its exact pair in closed form.

``DistributedDiscreteGaussianLoss`` enumerates one atom per output and refuses beyond 8 million outputs; this module
describes the same pair through the masses of blocks of consecutive outputs (``cell_masses``), from the law of the
sum and the block sums proven in ``_ddg_blocks`` (Lemmas A-C, whose notation is used here).

**The pair and its cells.** Outputs ``x`` in ``Z`` (for ``"add"`` relabelled ``x -> Delta - x``, a bijection that
keeps the pair's PLD; ``p`` is symmetric), each side a mixture ``sum_c w_c p(x - m_c)`` with ``m_c`` in ``{0,
Delta}``: ``q = 1``: ``P = p(. - Delta)``, ``Q = p``; ``"remove"``: ``P = q p(. - Delta) + (1 - q) p``, ``Q = p``;
``"add"``: ``P = p(. - Delta)``, ``Q = q p + (1 - q) p(. - Delta)``. With ``f(x) = (2 Delta x - Delta^2) / (2 s^2)``
(the log-ratio of ``phi(x - Delta)`` to ``phi(x)``) the reference loss is ``L(x) = f(x)`` (``q = 1``), ``log(1 - q +
q e^f(x))`` (remove) or ``-log(1 - q + q e^-f(x))`` (add): strictly increasing in ``x``. By Lemma A the true loss
``l(x) = log(P(x) / Q(x))`` is within ``2T`` of ``L(x)`` (each side is a mixture of values within ``e^(+-T)`` of the
reference's), and each side's mass of a block of outputs is within ``e^(+-T)`` of the same mixture of ``phi``.

For loss edges ``e_0 < ... < e_N`` the cell ``i`` is the block of integer outputs ``(b_i, b_(i+1)]`` inside the window
``[lo, hi] = [-M, Delta + M]``, ``M = ceil(19 s_hat) + 1``, where the integers ``b_0 <= ... <= b_N`` in ``[lo - 1,
hi]`` are such that every output ``x <= b_i`` has ``L(x) <= e_i + lam`` and every ``x > b_i`` has ``L(x) >= e_i -
lam``, ``lam`` bounding the error of the computed loss ``L_hat`` at every point the search evaluated (``_boundaries``
proves it of its two searches; ``_reference_loss`` gives ``lam``). So every output of cell ``i`` has ``L`` in ``[e_i -
lam, e_(i+1) + lam]`` and its true loss lies in ``[e_i - eta, e_(i+1) + eta]``, ``eta = 2T + lam``: the edge error
handed to the engine (which doubles it and adds a rounding margin). The blocks ``[lo, b_0]`` and ``(b_N, hi]`` are
the P-masses below and above the grid. Each block's side masses are ``sum_c w_c J_c`` (Lemma B with ``r = s_hat``, for each component; ``int f``
from ``losses.gaussian_cell_masses_and_errors``, whose error bounds take each normal CDF value to ``8u``, the
library's standing assumption on ``scipy.special.ndtr``), with ``|true - J| <= err_J + zeta (J + err_J)``, ``zeta =
1.01 (T + eps_s + K)`` (for ``T, eps_s, K <= 1e-3``: ``e^(T + eps_s) / (1 - K) - 1`` and ``1 - e^-(T + eps_s) / (1 +
K)`` are at most ``zeta``; Lemmas A-C), ``eps_s`` and ``K`` at the block's farthest output from each mean. Outside the
window each side has mass at most ``2 e^T Phi_bar(M / s) <= 2 e^T phi_1(18.99) / 18.99`` (``P(|S| > M) = 2 sum_(y >
M) p(y)``, ``p(y) <= e^T g(y) / Z``, ``Z >= s sqrt(2 pi)``, ``sum_(y > M) g(y) <= int_M^inf g``; ``M / s >= 19 (1 - 3
u)``, and Mills' ``Phi_bar(z) <= phi_1(z) / z``): sent to ``+inf`` on the upper side only (``infinity_is_exact =
False``), like the enumerated window of ``_discrete_losses``. Nothing is enumerated: the engine's cells are exactly
the pair's outputs grouped in blocks, with certified masses, so its dominating (connect-the-dots) and dominated
(merge-to-the-grid, a post-processing of the blocks) pairs are those of the true pair. The CDF-based accountants
(PRV, Fourier) discretise the same blocks and also need their partial first moment: ``partial_mean`` sums it output
by output over the realised blocks, with a certified error, up to 2e7 outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import special

from .._types import ArrayLike, FloatArray, IntArray
from .._validation import check_choice, check_count, check_positive, check_probability
from ..errors import GridTooLargeError, PrecisionError, UnsupportedMechanismError
from ..losses import PrivacyLoss
from ._ddg_blocks import _EPS_SCALE, _SQRT2PI, _ZETA_MAX, _split, block_sums, reference_window, sum_law_bound

__all__ = ["LargeDistributedDiscreteGaussianLoss"]

_U = float(np.finfo(float).eps) / 2
#: ``2 e^T phi_1(18.99) / 18.99`` with ``e^T <= 1.01``: each side's mass outside the window (module docstring)
_OUTSIDE = 2.02 * math.exp(-0.5 * 18.99 * 18.99) / (18.99 * _SQRT2PI) * (1.0 + 1e-9)
#: most outputs ``partial_mean`` sums (about ``20 s`` for the PRV accountant's grids), in chunks of ``_CHUNK``
_PARTIAL_MEAN_OUTPUTS = 20_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class LargeDistributedDiscreteGaussianLoss(PrivacyLoss):
    """The exact pair of the distributed discrete Gaussian (the sum of ``clients`` independent ``N_Z(0, sigma^2)``,
    integer shift ``delta``, optionally Poisson-subsampled), described by certified masses of blocks of outputs instead
    of enumerated atoms: ``DistributedDiscreteGaussian``'s loss from ``sigma sqrt(clients) = 1e4`` on, with no cap on the
    scale (``DistributedDiscreteGaussianLoss`` enumerates up to about 2.2e5).

    The pair is ``DistributedDiscreteGaussianLoss``'s (remove: ``P = q (S + Delta) + (1 - q) S`` against ``Q = S``;
    add: the reverse), so the same dominance argument makes the shift ``Delta`` the worst neighbour
    (``tightdp.mechanisms.discrete``) and both ends bound the attained pair (two data sets whose sums differ by
    ``Delta``). The proofs (the law of the sum within ``e^(+-T)`` of the normal density at every integer, the block
    sums by a corrected midpoint rule, the cells' edge error) are in the module docstring.

    What the engine gets: ``cell_masses`` / ``q_cell_masses`` (the blocks between loss edges: certified relative and
    l1 errors and edge error), ``event_masses`` and ``total_variation`` (certified, for the closed-form step bounds),
    ``infinity_mass`` (the window's outside mass, sent to ``+inf`` for upper bounds only). ``cdf``, ``sf`` and the
    quantiles are the reference's values, for the engine's choices of meshes and grid ends (estimates there; the cells
    certify). ``partial_mean`` (the CDF-based accountants, PRV and Fourier) sums the realised cells' outputs one by
    one, with a certified error, up to 2e7 of them, and refuses beyond.

    Parameters
    ----------
    sigma : float
        Scale of each client's discrete Gaussian, at least 1.
    clients : int
        Number of clients, a positive integer.
    delta : int
        The integer shift ``Delta``, positive.
    q : float, default 1.0
        Sampling rate in ``(0, 1]``; ``1`` is the unsampled mechanism.
    direction : str, default "remove"
        ``"remove"`` or ``"add"``.

    Raises
    ------
    ValueError
        If ``sigma`` is below 1 or not finite, ``clients`` or ``delta`` is not a positive integer, ``q`` lies outside
        ``(0, 1]`` or ``direction`` is not ``"remove"`` or ``"add"`` (each error names its argument).
    PrecisionError
        When its cells are first asked for, if ``sigma sqrt(clients)`` is below 100 (the lemmas hold there, but Lemma
        B's ``K``, up to 4e-6, would put the cells' relative errors far above the engine's cap; the enumeration is exact
        and cheap) or Lemma A's ``T`` exceeds ``1e-3``; its subclass
        ``GridTooLargeError`` if the window's outputs reach ``2^30`` (``Delta + 19 sigma sqrt(clients)``: the exact
        integer numerators of the losses).

    References
    ----------
    Kairouz, Liu, Steinke 2021 (the mechanism); Canonne, Kamath, Steinke 2020, Sec. 2 (the normaliser by Poisson
    summation); Doroshenko et al. 2022 and Koskela et al. 2023, App. C.6 (the engine's dominance pairs).
    """

    sigma: float
    clients: int
    delta: int
    q: float = 1.0
    direction: str = "remove"

    infinity_is_exact = False  # the window's outside mass, sent to +inf on the upper side only
    has_q_side = True

    def __post_init__(self) -> None:
        sigma = check_positive("sigma", self.sigma)
        if not (math.isfinite(sigma) and sigma >= 1.0):
            raise ValueError(f"sigma must be a finite number >= 1, got {self.sigma!r}")
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "clients", check_count("clients", self.clients))
        object.__setattr__(self, "delta", check_count("delta", self.delta))
        object.__setattr__(self, "q", check_probability("q", self.q))
        check_choice("direction", self.direction, ("remove", "add"))

    # ---------------------------------------------------------------- the reference and its window
    @cached_property
    def _setup(self) -> dict[str, Any]:
        """Scale, window, ``T``, the two sides' components and the loss constants (refusing where unproven)."""
        v = float(self.clients) * (self.sigma * self.sigma)
        s_hat = math.sqrt(v)
        if not s_hat >= 100.0:  # (the lemmas hold, but K reaches 4e-6 at 100: relative errors far above the cap)
            raise PrecisionError(
                f"the distributed discrete Gaussian's block sums need sigma * sqrt(clients) >= 100, got {s_hat:.4g} "
                "(use the exact enumeration, DistributedDiscreteGaussianLoss)"
            )
        law = sum_law_bound(self.sigma, self.clients)
        if not law <= _ZETA_MAX:
            raise PrecisionError(
                f"the law of the sum of {self.clients} discrete Gaussians of sigma {self.sigma:g} is within e^T of the "
                f"normal density only for T = {law:.3g} (Lemma A), above {_ZETA_MAX:g}"
            )
        lo, hi = reference_window(s_hat, self.delta)
        if hi >= 2**30:  # the exact int64 numerators of ``_reference_loss``
            raise GridTooLargeError(
                f"the distributed discrete Gaussian's outputs reach {hi:,} (sensitivity {self.delta}, sigma * "
                f"sqrt(clients) = {s_hat:.4g}): beyond the 2^30 its exact loss numerators allow"
            )
        d = float(self.delta)
        q = self.q
        p_side: tuple[tuple[float, ...], tuple[float, ...]]
        q_side: tuple[tuple[float, ...], tuple[float, ...]]
        if q >= 1.0:
            p_side, q_side = ((d,), (1.0,)), ((0.0,), (1.0,))
        elif self.direction == "remove":
            p_side, q_side = ((d, 0.0), (q, 1.0 - q)), ((0.0,), (1.0,))
        else:
            p_side, q_side = ((d,), (1.0,)), ((0.0, d), (q, 1.0 - q))
        return dict(
            s_hat=s_hat,
            s2_hat=2.0 * v,  # 2 n sigma^2 within two roundings (the doubling is exact)
            law=law,
            lo=lo,
            hi=hi,
            p_side=p_side,
            q_side=q_side,
            log_q=math.log(q) if q < 1.0 else 0.0,
            log1m_q=math.log1p(-q) if q < 1.0 else 0.0,
        )

    def _reference_loss(self, x: IntArray) -> tuple[FloatArray, float]:
        """``(L_hat(x), lam)``: the reference loss at integer outputs ``x`` (relabelled for ``"add"``) and a bound on
        ``|L_hat - L|`` there.

        ``f = (2 Delta x - Delta^2) / (2 s^2)``: the numerator an exact int64 (``|x|, Delta < 2^30``), rounded once to
        a double, divided by ``2 n sigma^2`` computed within two roundings: ``|f_hat - f| <= 4.1 u |f| <= 5u
        |f_hat|``. Subsampled, ``L = +-logaddexp(log(1 - q), log q +- f)``, whose partial derivatives in both
        arguments lie in ``[0, 1]``: the inputs' errors (``u |log(1 - q)|``, ``u |log q|``, ``5u |f|``, the sum's
        ``u``) pass at most once, and ``logaddexp`` (``max + log1p(exp(-|d|))``) adds at most ``u (|d| + |L| + 3)``, so
        ``8u (1 + |f| + |L| + |log q| + |log(1 - q)|)`` bounds the error (as ``DiscreteGaussianLoss``'s)."""
        c = self._setup
        d = self.delta
        num = (2 * d) * np.asarray(x, dtype=np.int64) - d * d
        f = num.astype(float) / c["s2_hat"]
        if self.q >= 1.0:
            return f, 5.0 * _U * float(np.max(np.abs(f), initial=0.0)) + 1e-300
        sign = 1.0 if self.direction == "remove" else -1.0
        loss = sign * np.logaddexp(c["log1m_q"], c["log_q"] + sign * f)
        lam = (
            8.0
            * _U
            * (
                1.0
                + float(np.max(np.abs(f), initial=0.0))
                + float(np.max(np.abs(loss), initial=0.0))
                + abs(c["log_q"])
                + abs(c["log1m_q"])
            )
        )
        return loss, lam

    def _guess(self, edges: FloatArray) -> FloatArray:
        """A first guess of the output ``y`` where the reference loss crosses each edge (a float, possibly infinite;
        only a starting point of ``_boundaries``' bracketed search, never part of a bound)."""
        c = self._setup
        e = np.asarray(edges, float)
        d = float(self.delta)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.q >= 1.0:
                f = e
            elif self.direction == "remove":  # e = log(1 - q + q e^f): f = log(expm1(e) + q) - log q
                f = np.log(np.expm1(e) + self.q) - c["log_q"]
            else:  # e = -log(1 - q + q e^-f): f = log q - log(expm1(-e) + q)
                f = c["log_q"] - np.log(np.expm1(-e) + self.q)
            y = f * (c["s2_hat"] / (2.0 * d)) + 0.5 * d
        return np.where(np.isnan(y), np.where(e > 0, np.inf, -np.inf), y)

    def _boundaries(self, edges: FloatArray) -> tuple[IntArray, float]:
        """``(b, lam)``: for each increasing loss edge ``e_i`` an integer ``b_i`` in ``[lo - 1, hi]``, non-decreasing in
        ``i``, such that every output ``x <= b_i`` has ``L(x) <= e_i + lam`` and every output ``x > b_i`` has ``L(x) >=
        e_i - lam``, with ``lam`` bounding ``|L_hat - L|`` at every point evaluated (``_reference_loss``). The edges'
        ``b`` are then the cells' boundaries (module docstring).

        Two searches, both certified through the monotonicity of the *true* ``L``, whatever the rounding of
        ``L_hat``. (i) Per edge: an integer ``b`` with ``L_hat(b) <= e < L_hat(b + 1)`` (virtual ``L_hat(lo - 1) =
        -inf``, ``L_hat(hi + 1) = +inf``), by bisection on brackets around ``_guess`` (the guess's own output, else
        five outputs around it, else the whole window): then ``x <= b`` gives ``L(x) <= L(b) <= L_hat(b) + lam <= e +
        lam`` and ``x > b`` gives ``L(x) >= L(b + 1) >= L_hat(b + 1) - lam > e - lam``. (ii) Per output, where the
        outputs the edges span are fewer than the edges (a mesh finer than the loss lattice): ``L_hat`` on those
        outputs ``x_0..x_1`` and its running maximum ``R``; for an edge with ``R(x_0) <= e < R(x_1)``, ``b`` the last
        output with ``R(b) <= e``: ``L_hat(b) <= R(b) <= e``, and ``R(b + 1) > e`` is ``L_hat(y)`` at some ``y <= b +
        1``, so ``L(b + 1) >= L(y) >= L_hat(y) - lam > e - lam``; the other edges go to (i). Finally ``b`` is replaced by
        its running maximum over the edges: raising ``b_i`` to an earlier ``b_j > b_i`` keeps both facts (``L(x) <= e_j
        + lam < e_i + lam`` below, and outputs above ``b_j`` lie above ``b_i``)."""
        c = self._setup
        lo, hi = c["lo"], c["hi"]
        e = np.asarray(edges, float)
        lam = 0.0
        b = np.full(e.size, lo - 1, dtype=np.int64)
        todo = np.ones(e.size, dtype=bool)
        if e.size > 8:
            ends = np.floor(np.nan_to_num(self._guess(e[[0, -1]]), nan=0.0, posinf=hi + 1.0, neginf=lo - 1.0))
            x0, x1 = max(lo, int(max(ends[0], lo - 1.0)) - 3), min(hi, int(min(ends[1], hi + 1.0)) + 3)
            if 1 <= x1 - x0 < e.size:
                val, lam = self._reference_loss(np.arange(x0, x1 + 1, dtype=np.int64))
                run = np.maximum.accumulate(val)
                k = np.searchsorted(run, e, side="right")  # run[k - 1] <= e < run[k]
                inner = (k > 0) & (k < run.size)
                b[inner] = x0 + k[inner] - 1
                todo = ~inner
        if np.any(todo):
            b_todo, lam_todo = self._bisect(e[todo])
            b[todo] = b_todo
            lam = max(lam, lam_todo)
        return np.maximum.accumulate(b), lam

    def _bisect(self, e: FloatArray) -> tuple[IntArray, float]:
        """``_boundaries``' search (i): per edge, ``b`` with ``L_hat(b) <= e < L_hat(b + 1)`` (virtual ends), and the
        largest ``lam`` of the points evaluated."""
        c = self._setup
        lo, hi = c["lo"], c["hi"]
        g = self._guess(e)
        g = np.clip(np.nan_to_num(g, nan=0.0, posinf=hi + 1.0, neginf=lo - 1.0), lo - 1.0, hi + 1.0)
        base = np.floor(g).astype(np.int64)
        left = np.clip(base - 2, lo - 1, hi + 1)
        right = np.clip(base + 3, lo - 1, hi + 1)
        lam = 0.0

        def value(x: IntArray) -> FloatArray:
            nonlocal lam
            val, err = self._reference_loss(np.clip(x, lo, hi))
            lam = max(lam, err)
            return np.where(x < lo, -np.inf, np.where(x > hi, np.inf, val))

        exact = np.clip(base, lo - 1, hi)  # the guess itself, where it is right (almost always)
        ok = (value(exact) <= e) & (value(exact + 1) > e)
        left = np.where(ok, exact, left)
        right = np.where(ok, exact + 1, right)
        near = ~ok
        if np.any(near):
            near_ok = (value(left[near]) <= e[near]) & (value(right[near]) > e[near])
            left[near] = np.where(near_ok, left[near], lo - 1)
            right[near] = np.where(near_ok, right[near], hi + 1)
        while True:
            open_ = right - left > 1
            if not np.any(open_):
                break
            idx = np.nonzero(open_)[0]
            mid = (left[idx] + right[idx]) // 2
            below = value(mid) <= e[idx]
            left[idx] = np.where(below, mid, left[idx])
            right[idx] = np.where(below, right[idx], mid)
        return left, lam

    # ---------------------------------------------------------------- blocks
    def _compute_blocks(self, edges: FloatArray) -> dict[str, Any]:
        """Both sides' masses and errors of the blocks ``[lo, b_0], (b_0, b_1], ..., (b_N, hi]`` for the increasing loss
        edges, their ``(rel, l1)`` (``_split``) and the edge error ``2T + lam`` (module docstring). The sums run over the
        non-empty blocks only (a mesh finer than the loss lattice leaves most empty: mass and error exactly 0) and are
        spread back to all of them."""
        c = self._setup
        b, lam = self._boundaries(edges)
        x = np.concatenate([[c["lo"] - 0.5], b.astype(float) + 0.5, [c["hi"] + 0.5]])
        full = x[1:] > x[:-1]
        distinct = np.concatenate([[True], full])
        xu = x[distinct]  # at least two: lo - 1/2 < hi + 1/2
        pick = np.minimum(np.cumsum(distinct)[:-1] - 1, xu.size - 2)  # block j is the distinct block pick[j] if full
        units: dict[float, tuple[FloatArray, FloatArray, FloatArray]] = {}  # the components both sides share
        (pm, pw), (qm_, qw) = c["p_side"], c["q_side"]
        p, p_err = block_sums(xu, pm, pw, c["s_hat"], c["law"], units)
        qm, q_err = block_sums(xu, qm_, qw, c["s_hat"], c["law"], units)
        outer = (0 if full[0] else -1, p.size - 1 if full[-1] else -1)  # the outer blocks among the distinct ones

        def spread(a: FloatArray) -> FloatArray:
            return np.where(full, a[pick], 0.0)

        return dict(
            b=b,
            P=spread(p),
            Q=spread(qm),
            P_err=spread(p_err),
            Q_err=spread(q_err),
            p_split=_split(p, p_err, outer),
            q_split=_split(qm, q_err, outer),
            edge=(2.0 * c["law"] + lam) * (1.0 + 1e-9),
        )

    def _blocks(self, edges: ArrayLike) -> dict[str, Any]:
        """``_compute_blocks``, kept for the last edges asked (both sides' cells, both dominance pairs)."""
        e = np.asarray(edges, float)
        memo: tuple[FloatArray, dict[str, Any]] | None = self.__dict__.get("_blocks_memo")
        if memo is not None and memo[0].shape == e.shape and np.array_equal(memo[0], e):
            return memo[1]
        out = self._compute_blocks(e)
        self.__dict__["_blocks_memo"] = (e.copy(), out)  # not a field: eq and hash ignore it
        return out

    @property
    def infinity_mass(self) -> float:  # type: ignore[override]  # a computed attribute of the base class
        """Each side's mass outside the window (module docstring), sent to ``+inf`` for upper bounds."""
        return _OUTSIDE

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        """P-masses of the blocks between the loss edges, the blocks below and above them, and their errors.

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(below, above, masses, (rel, l1), edge_error)`` as ``PrivacyLoss.cell_masses``: ``(rel, l1)`` from
            ``_split`` (every block, the outer two included, within ``1 +- rel`` or its error counted, twice, in
            ``l1``), ``edge_error`` the loss distance ``2T + lam`` of every block's true losses from its cell (module
            docstring).

        Raises
        ------
        PrecisionError
            If ``sigma sqrt(clients)`` is below 100 or Lemma A's ``T`` above ``1e-3`` (the class's refusals).
        """
        blk = self._blocks(edges)
        return float(blk["P"][0]), float(blk["P"][-1]), blk["P"][1:-1], blk["p_split"], blk["edge"]

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        """Q-masses of the blocks between the loss edges (the cells of ``cell_masses``) and their ``(rel, l1)``.

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(masses, (rel, l1))``, the errors over the cells and the two outer blocks (``_split``).

        Raises
        ------
        PrecisionError
            As ``cell_masses``.
        """
        blk = self._blocks(edges)
        return blk["Q"][1:-1], blk["q_split"]

    def event_masses(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """``(p, q, p_out, q_out)``: for ``E`` the outputs of the window above the boundary ``b`` of each threshold
        (``_boundaries``: their true losses exceed ``t - 2T - lam``, far within the step bounds' ``1e-9 (1 + |t|)``),
        lower bounds on ``P(E)`` and ``P(E^c)`` (the window's blocks less their error bounds) and upper bounds on
        ``Q(E)`` and ``Q(E^c)`` (plus their error bounds and the outside mass).

        Parameters
        ----------
        t : array_like of float
            The loss thresholds, one-dimensional.

        Returns
        -------
        tuple of FloatArray
            ``(p, q, p_out, q_out)``, each the shape of ``t``.

        Raises
        ------
        PrecisionError
            As ``cell_masses``.
        """
        x = np.asarray(t, dtype=float)
        out = [np.empty(x.shape) for _ in range(4)]
        for i, ti in enumerate(x.tolist()):  # one boundary per threshold: two blocks each
            blk = self._compute_blocks(np.array([ti]))
            lo_p = np.maximum(blk["P"] - blk["P_err"], 0.0) * (1.0 - 4.0 * _U)
            up_q = (blk["Q"] + blk["Q_err"]) * (1.0 + 4.0 * _U) + _OUTSIDE
            out[0][i], out[1][i] = lo_p[1], min(1.0, up_q[1])
            out[2][i], out[3][i] = lo_p[0], min(1.0, up_q[0])
        return out[0], out[1], out[2], out[3]

    def total_variation(self) -> float | None:
        """``q P(-Delta/2 < S <= Delta/2)``, rounded up: the pair's total variation distance.

        ``p`` is symmetric and non-increasing in ``|x|`` (log-concave, Hoggar 1974), so ``p(x - Delta) > p(x)`` exactly
        for ``x > Delta / 2`` and ``TV(S + Delta, S) = P(S > -Delta/2) - P(S > Delta/2)``; subsampled, both directions'
        pairs have ``q`` times that. The block's mass by ``block_sums``, plus its error bound.

        Returns
        -------
        float or None
            The bound.
        """
        c = self._setup
        a, b = math.floor(-self.delta / 2.0) + 1, math.floor(self.delta / 2.0)
        mass, err = block_sums(np.array([a - 0.5, b + 0.5]), (0.0,), (1.0,), c["s_hat"], c["law"])
        return min(1.0, self.q * float(mass[0] + err[0]) * (1.0 + 4.0 * _U))

    # ---------------------------------------------------------------- estimates (meshes and grid ends)
    def _side_cdfs(self, s: ArrayLike) -> tuple[FloatArray, FloatArray, float, float]:
        """Both sides' masses of the window's outputs with reference loss at most each ``s``, and their totals in the
        window: cumulative sums of the block masses (estimates, for meshes and grid ends)."""
        x = np.asarray(s, dtype=float)
        flat = np.nan_to_num(np.atleast_1d(x).ravel(), nan=0.0)
        order = np.argsort(flat, kind="stable")
        blk = self._compute_blocks(flat[order])
        cp, cq = np.cumsum(blk["P"]), np.cumsum(blk["Q"])
        p, qv = np.empty(flat.shape), np.empty(flat.shape)
        p[order], qv[order] = cp[:-1], cq[:-1]
        return p.reshape(x.shape), qv.reshape(x.shape), float(cp[-1]), float(cq[-1])

    def cdf(self, s: ArrayLike) -> FloatArray:
        return self._side_cdfs(s)[0]

    def sf(self, s: ArrayLike) -> FloatArray:
        p, _, tot, _ = self._side_cdfs(s)
        return np.maximum(tot - p, 0.0)

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        return self._side_cdfs(s)[1]

    def q_sf(self, s: ArrayLike) -> FloatArray:
        _, qv, _, tot = self._side_cdfs(s)
        return np.maximum(tot - qv, 0.0)

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        """``E_P[l 1{output in the blocks between a and b}]``: the partial first moment of the true loss over the outputs
        of the realised cells between the loss edges ``a`` and ``b`` (``(b_a, b_b]``, the boundaries of the last
        ``cell_masses`` call when its edges run from ``a`` to ``b``: the CDF-based accountants ask for it right after
        the cells, and their mean-preserving discretisation and coupling are of the realised cells), with a certified
        error bound. One term per output, in chunks (``O(b_b - b_a)``, only for these accountants).

        Error: ``|l - L_hat| <= 2T + lam`` (module docstring); each output's P-mass ``P_hat = sum_c w_c exp(-z_c^2 / 2)
        / (s_hat sqrt(2 pi))``, ``z_c = (x - m_c) / s_hat``, is within a factor ``1 +- zeta_x`` of the true ``P(x)``,
        ``zeta_x = 1.01 (T + eps_s(z) + (1.5 z^2 + C + 6) u)`` with ``z`` the largest ``|z_c|`` (Lemmas A and C; the
        rounding of ``z`` and its square moves the exponent by ``1.5 z^2 u``, ``exp``, the constant and the division
        add ``4u``, the mixture's ``C`` products and sums and the rounded weight ``1 - q`` another ``C + 2``). So ``|sum
        l P - sum L_hat P_hat| <= (2T + lam) sum P + sum |L_hat| zeta_x P_hat`` with ``sum P <= sum (1 + zeta_x)
        P_hat``; each chunk's float sums within ``(n + 5) u`` of ``sum |L_hat P_hat|`` (``n`` terms; the products
        ``u``), the chunks added by ``math.fsum``.

        Parameters
        ----------
        a, b : float
            The loss edges ``a <= b``.

        Returns
        -------
        tuple of float
            ``(value, error)``.

        Raises
        ------
        UnsupportedMechanismError
            If the blocks hold more than 2e7 outputs (``sigma sqrt(clients)`` far beyond the enumeration's reach):
            the CDF-based accountants (PRV, Fourier) need this moment; the connect-dots accountant does not.
        PrecisionError
            As ``cell_masses``.
        """
        c = self._setup
        memo: tuple[FloatArray, dict[str, Any]] | None = self.__dict__.get("_blocks_memo")
        if memo is not None and memo[0].size and float(memo[0][0]) == a and float(memo[0][-1]) == b:
            b_a, b_b = int(memo[1]["b"][0]), int(memo[1]["b"][-1])
        else:
            ends, _ = self._boundaries(np.array([a, max(a, b)], dtype=float))
            b_a, b_b = int(ends[0]), int(ends[1])
        if b_b - b_a > _PARTIAL_MEAN_OUTPUTS:
            raise UnsupportedMechanismError(
                "the distributed discrete Gaussian beyond the exact grid (sigma * sqrt(clients) = "
                f"{c['s_hat']:.4g}) has certified cell masses, but its partial mean, which the PRV and Fourier "
                f"accountants need, would sum {b_b - b_a:,} outputs (cap {_PARTIAL_MEAN_OUTPUTS:,}): account it with the "
                "connect-dots accountant"
            )
        means, weights = c["p_side"]
        law, s_hat = c["law"], c["s_hat"]
        sums: list[float] = []
        err = 0.0
        for start in range(b_a + 1, b_b + 1, _CHUNK):
            x = np.arange(start, min(start + _CHUNK, b_b + 1), dtype=np.int64)
            loss, lam = self._reference_loss(x)
            xf = x.astype(float)
            p_hat = np.zeros(x.size)
            z_far = np.zeros(x.size)
            for m, w in zip(means, weights):
                z = (xf - m) / s_hat
                p_hat += w * (np.exp(-0.5 * z * z) / (s_hat * _SQRT2PI))
                z_far = np.maximum(z_far, np.abs(z))
            zeta = 1.01 * (
                law + 1.01 * _EPS_SCALE * (1.0 + z_far * z_far) + (1.5 * z_far * z_far + len(means) + 6) * _U
            )
            terms = loss * p_hat
            size = float(np.sum(np.abs(terms)))
            sums.append(float(np.sum(terms)))
            err += (2.0 * law + lam) * float(np.sum((1.0 + zeta) * p_hat))
            err += float(np.sum(zeta * np.abs(terms))) + (x.size + 5) * _U * size
        return math.fsum(sums), err * (1.0 + 1e-9) + 1e-300

    def _loss_at(self, y: float) -> float:
        """The reference loss at the real output ``y`` (relabelled for ``"add"``), in floats."""
        c = self._setup
        d = float(self.delta)
        f = (2.0 * d * y - d * d) / float(c["s2_hat"])
        if self.q >= 1.0:
            return f
        sign = 1.0 if self.direction == "remove" else -1.0
        return sign * float(np.logaddexp(c["log1m_q"], c["log_q"] + sign * f))

    def lower_quantile(self, mass: float) -> float:
        """A loss ``a`` below which P has about ``mass`` or less: the reference loss at ``min_c m_c + s_hat
        ndtri(mass)`` (then ``P(x <= y) <= max_c Phi((y - m_c) / s) <= mass`` up to the pair's tiny factors), less
        ``1e-9 (1 + |a|)``. Where it lies only affects the grid's extent, never a bound.

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``a``.

        Raises
        ------
        PrecisionError
            As ``cell_masses``.
        """
        c = self._setup
        y = min(c["p_side"][0]) + c["s_hat"] * float(special.ndtri(min(max(mass, 1e-300), 0.5)))
        a = self._loss_at(y)
        return a - 1e-9 * (1.0 + abs(a))

    def upper_quantile(self, mass: float) -> float:
        """A loss ``b`` above which P has about ``mass`` or less: the reference loss at ``max_c m_c - s_hat
        ndtri(mass)``, plus ``1e-9 (1 + |b|)`` (as ``lower_quantile``: the grid's extent only).

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``b``.

        Raises
        ------
        PrecisionError
            As ``cell_masses``.
        """
        c = self._setup
        y = max(c["p_side"][0]) - c["s_hat"] * float(special.ndtri(min(max(mass, 1e-300), 0.5)))
        b = self._loss_at(y)
        return b + 1e-9 * (1.0 + abs(b))
