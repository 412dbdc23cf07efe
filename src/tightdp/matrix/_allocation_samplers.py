"""The allocation-type samplers of ``tightdp.matrix.accounting`` (a user's steps drawn once for the run or per
epoch, or by a renewal process): ``BallsInBins``, ``EpochAllocation``, ``MinSepSampling``; their docstrings state
the proofs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._validation import check_count, check_probability
from ..bounds import Bounds
from ._allocated import _balls_in_bins, _epoch_allocation
from ._ledger_samplers import PoissonSampling
from ._min_sep import min_sep_epsilon, tighter
from ._sampler_base import Sampler
from .strategies import Strategy, reject

__all__ = ["BallsInBins", "EpochAllocation", "MinSepSampling"]


@dataclass(frozen=True, kw_only=True)
class BallsInBins(Sampler):
    """Balls-in-bins as jax_privacy runs it (``BallsInBinsSampling(iterations, cycle_length)``; Choquette-Choo
    et al. ICLR 2025, arXiv 2410.06266): each record in one uniform bin ``j < cycle_length`` for the whole run,
    taking part at steps ``j, j + cycle_length, ...``.

    ``lower``: the explicit pair of a record with a fixed unit gradient, certified from below through a Loewner
    sandwich of its modes' Gram matrix (``tightdp.matrix.allocation``; unconditional). ``upper``: the smallest of
    no amplification (the sensitivity over the ``cycle_length`` cyclic patterns; always valid), the comparisons
    of ``tightdp.matrix.allocation`` (Loewner sandwich, entrywise comparison, class splitting with the entrywise
    or mixed comparison per class) and noise splitting (random allocation with orthogonal modes at noise ``sigma
    / sqrt(b)``); all but the first hold given 2410.06266's dominating pair and so only for a non-negative ``C``.
    Exact for a diagonal ``C`` (plain random allocation); for banded ``C`` the comparisons pay the shared part's
    largest correlation, so the interval stays wider than the default accuracy (BandMF, 64 bands, cycles of 64,
    2000 steps, sigma 4: [4.94, 5.53]); the deterministic amplified bound of Schuchardt & Kalinin 2026
    (2601.21636) is not implemented (``details`` say which end came from where). A second lower end,
    kept when larger: whitening (``tightdp.matrix._whitening``: ``C^(-1) y`` plus independent top-up noise is
    DP-SGD with balls-in-bins at noise ``sigma / s_min(C)``, a post-processing of the same explicit pair; Toeplitz
    ``C`` only).

    Parameters
    ----------
    cycle_length : int
        The number of bins (``>= 1``; at most the number of steps).

    Raises
    ------
    ValueError
        ``cycle_length`` below one (``epsilon``: above the number of steps).
    """

    type_name: ClassVar[str] = "balls_in_bins"

    cycle_length: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "cycle_length", check_count("cycle_length", self.cycle_length))

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        return _balls_in_bins(strategy, sigma, n, self.cycle_length, delta, eps_error, rel_error)

    def describe(self) -> str:
        return f"balls-in-bins, cycle length {self.cycle_length}"


@dataclass(frozen=True, kw_only=True)
class EpochAllocation(Sampler):
    """Random allocation afresh each epoch (tightdp's ``sampling="random-allocation"`` for DP-SGD): each record in
    exactly one uniform step of each epoch of ``steps_per_epoch`` steps.

    * A diagonal ``C`` (one band): the run is random allocation with per-step sensitivities ``|C_ss|``; the upper
      ledger takes the largest (dominates), the lower the least (a gradient scaled down at the other steps is
      an explicit pair): both certified by ``tightdp.schemes.allocation_epsilon``.
    * More bands: upper the smaller of no amplification (mixture over allocations, joint convexity; the
      sensitivity over ``PerEpoch`` patterns, one step in each epoch) and block splitting, for
      block sizes ``L`` dividing ``steps_per_epoch`` (``L = 1`` is noise splitting). Cut the run into blocks
      of ``L`` steps (within epochs) and share each row's noise among the blocks whose row windows
      ``[start, end + b - 1)`` cover it (``tightdp.matrix._row_weights``; equal shares are ``k = 1 + ceil((b -
      1) / L)`` parts): ``C x + z`` is a post-processing of one independent release per block, which whitened
      is at noise ``sigma`` with signal ``w^(-1/2) C_s g`` when the record's step ``s`` of the epoch falls in
      the block (norm at most the largest weighted block norm ``A``) and zero otherwise. Each epoch's step is uniform, so its block is uniform among the
      ``steps_per_epoch / L`` blocks: the richer release is per-epoch random allocation of 1 of
      ``steps_per_epoch / L`` block releases, each a mixture over the step in the block of Gaussians dominated
      by the Gaussian of shift ``A`` (joint convexity, both directions), so by ``allocation_epsilon`` at noise
      ``sigma / A`` (random allocation of dominated releases is dominated, ``tightdp.mechanisms.
      allocation``; adaptive gradients by ``tightdp.matrix.accounting``'s reduction). A few ``L`` are certified and the
      smallest answer kept. Lower from the pair whose
      gradient is non-zero only at the first step of each epoch (orthogonal columns when the epoch has at
      least ``b`` steps): DP-SGD at rate ``1 / steps_per_epoch`` over the epochs; or, when larger, whitening
      (``tightdp.matrix._whitening``: ``C^(-1) y`` plus independent top-up noise is DP-SGD with per-epoch random
      allocation at noise ``sigma / s_min(C)``, a post-processing of the fixed-unit-gradient pair; Toeplitz ``C``);
      or, when larger, a statistic that ignores the draw: weights ``a_e`` constant on each epoch and ``v`` with
      ``C^T v`` equal to them (``_allocated._epoch_projection_mu``, rounding absorbed by scaling the gradient at
      each step into ``[0, 1]``) give ``<v, y> ~ N(lambda sum_e a_e, sigma^2 ||v||^2)`` whichever step each epoch
      drew, against ``N(0, .)``: a Gaussian pair, post-processing the fixed-unit-gradient pair.

    Parameters
    ----------
    steps_per_epoch : int
        Steps per epoch (``>= 1``; the number of steps a multiple of it).

    Raises
    ------
    ValueError
        ``steps_per_epoch`` below one (``epsilon``: steps not a whole number of epochs).
    """

    type_name: ClassVar[str] = "epoch_allocation"

    steps_per_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        return _epoch_allocation(strategy, sigma, n, self.steps_per_epoch, delta, eps_error, rel_error)

    def describe(self) -> str:
        return f"random allocation afresh each epoch of {self.steps_per_epoch} steps"


@dataclass(frozen=True, kw_only=True)
class MinSepSampling(Sampler):
    """b-min-sep sampling as jax_privacy runs it (``BMinSepSampling(sampling_prob, iterations, min_sep,
    warm_start)``; Dong & Ganesh 2026, arXiv 2602.09338): at every step each record that did not take part in
    the previous ``min_sep - 1`` steps joins the batch independently with probability ``sampling_rate``. Per
    record a renewal process: after a participation at ``tau`` the next is at ``tau + min_sep - 1 + Geom(p)``;
    the warm start is the stationary one (the first participation's law as in jax_privacy), so that every step
    has participation probability ``p / (1 + (min_sep - 1) p)``. ``min_sep = 1`` is Poisson sampling; ``p = 1``
    with a warm start is balls-in-bins with ``cycle_length = min_sep``.

    Parameters
    ----------
    sampling_rate : float
        ``p``, the rate among the eligible records, in ``(0, 1]``.
    min_sep : int
        The least distance between two participations of a record (``>= 1``).
    warm_start : bool, optional
        The stationary start (default ``True``, jax_privacy's default) or every record eligible at step 0.

    Raises
    ------
    ValueError
        A rate outside ``(0, 1]``, ``min_sep`` below one or not an integer, ``warm_start`` not a bool.

    Notes
    -----
    **Upper end**: the smallest of the following proven bounds.

    1. *No amplification.* Any two participations are at least ``min_sep`` apart, so a pattern has at most
       ``ceil(n / min_sep)`` of them; the release is a mixture over patterns of Gaussian mechanisms, each
       dominated by the Gaussian of the certified sensitivity over ``MinSeparation(ceil(n / min_sep),
       min_sep)``, so by joint convexity of the hockey-stick divergence so is the mixture (any signs of ``C``,
       adaptive gradients by ``tightdp.matrix.accounting``'s module docstring's reduction).
    2. *Noise splitting and Poisson domination* (a ``b``-banded ``C``, any signs). (a) By noise splitting
       (``tightdp.matrix.accounting``'s module docstring) the release is a post-processing of the per-step
       releases ``w_s = C_s g_s x_s + N(0, sigma^2 W)`` on the rows ``[s, s + b)``, ``W`` the row shares
       (``tightdp.matrix._row_weights`` with blocks of one step; equal shares ``I / b``), released in the order
       of ``s`` and whitened by the fixed ``W^(-1/2)`` (noise ``sigma``, shift of norm at most the weighted norm
       ``A_s``); the rows of ``y``
       before step ``s`` are functions of ``w_(<s)`` and independent noise, so an adaptive gradient at ``s``
       is a function of ``w_(<s)``. (b) Fix the other records' sampling randomness ``R`` (independent of the
       differing record's). Given ``R``, the prefix ``w_(<s)`` and the record's chain up to ``s``, its
       participation at ``s`` is ``1[eligible] * Bern(p)`` on a fresh coin; so ``pi = P(x_s = 1 | prefix, R) =
       p P(eligible | prefix, R) <= p`` (at step 0 with the warm start ``pi = p / (1 + (min_sep - 1) p)``).
       Row ``s``'s conditional pair is ``(pi N(m + a, .) + (1 - pi) N(m, .), N(m, .))`` with ``m`` the known
       part and ``||a|| <= A_s``. It is the image of ``(p N(a, .) + (1 - p) N(0, .), N(0, .))`` under the
       kernel "keep the sample with probability ``pi / p``, else replace it by a fresh ``N(0, .)``; add ``m``",
       which maps ``N(0, .)`` to ``N(0, .)``: a post-processing in both directions (add and remove). Rotating
       ``a`` onto one axis and shrinking it to any smaller norm (``t -> r t + N(0, (1 - r^2) .)`` fixes
       ``N(0, .)``) shows the Poisson-subsampled Gaussian at rate ``p``, noise ``sigma`` and
       sensitivity ``A_s`` dominates row ``s`` at every prefix, whatever gradient direction the prefix
       chose. Adaptive composition of dominating pairs (Zhu, Dong & Wang 2022, Thm 10) bounds the run given
       ``R``, and joint convexity the mixture over ``R``. With ``C = I`` (one band) this is DP-SGD with
       Poisson sampling at rate ``p``. *Blocks* (``_min_sep.block_split``): cut the steps into blocks of
       ``L <= min_sep`` steps (at most one participation each) and share each row's noise among the blocks
       whose row windows cover it (``tightdp.matrix._row_weights``; equal shares are ``k = 1 + ceil((b - 1) /
       L)`` parts); whitened, each block's release has noise ``sigma``.
       Given the earlier blocks' releases and ``R``, the block's release is a mixture over the step ``s`` of
       its participation (probability at most ``1 - (1 - p)^L`` in all, fresh coins) of laws each dominated
       by ``(N(A), N(0))``, ``A`` the block's weighted norm (released row by row, it is an adaptive
       composition of Gaussians whose shifts, zero before ``s``, have squared norms summing to at most
       ``A^2``; joint convexity over ``s`` in both directions), so by the
       subsampling identity of the hockey-stick divergence (Balle, Barthe & Gaboardi 2018) and the kernel
       above, by the Poisson-subsampled Gaussian at rate ``1 - (1 - p)^L`` and noise ``sigma``;
       composition finishes as before. ``L = 1`` is the plain split; a few ``L`` are tried.
    3. *Count mixture* (any ``C``, ``_min_sep.count_mixture``). Given the other records' randomness, the likelihood
       ratio under ``Q`` is ``sum_S w_S L_S`` over the record's patterns ``S``, ``w_S`` the renewal chain's law.
       Released row by row, each ``L_S`` is a stochastic exponential of quadratic variation ``||C x_S||^2 /
       sigma^2`` on every path, below ``r^2 / sigma^2`` with ``r = min(sqrt(|S|) A, s)`` when participations lie
       on disjoint rows (``b``-banded ``C``, ``min_sep >= b``: the cross terms vanish whatever the gradients) and
       ``r = min(|S| A, s)`` otherwise (``A`` the largest column norm, ``s`` the sensitivity of 1.). So ``L_S``
       lies below the lognormal ``exp(r Z / sigma - r^2 / (2 sigma^2))`` in convex order (a stopped Brownian
       exponential), the comonotone sum of those bounds dominates the mixture in convex order (Dhaene et al.
       2002), and both hockey-stick divergences are ``E_Q`` of convex functions of it: the scalar
       ``MixtureOfGaussians`` over the exact count law (``_renewal``, masses for ``K >= 1`` raised by the law's
       rounding bound) dominates; joint convexity over the other records' randomness finishes.
    4. ``min_sep = 1``: the run is Poisson sampling (both starts): ``PoissonSampling``'s interval (including
       MMCC for a non-negative ``C``) is intersected. ``p = 1`` with a warm start: the run is balls-in-bins with
       ``cycle_length = min_sep`` (when ``min_sep <= n``): ``BallsInBins``'s interval is intersected.
    5. *Pattern-norm mixture* (non-negative ``C`` with a known ``Strategy.pattern_norm_law``: tree aggregation).
       Couple the record's chain with fresh uniforms ``U_s``: it takes part at ``s`` iff it is eligible and ``U_s <
       p`` (the warm start's first eligibility is independent of the ``U_s``), so its pattern lies pathwise below
       the Poisson pattern ``1[U_s < p]``, and for ``C >= 0`` its norm ``||C x||`` below the Poisson pattern's
       norm and below the sensitivity ``s`` of 1. The argument of 3 with ``r_S = ||C x_S||`` (gradients of norm at
       most 1: ``||C diag(g) x_S|| <= ||C x_S||``) then holds with the law of ``min(||C x_Poisson||, s)`` in place of
       the count's, a stochastically larger shift (Ganesh 2024, Lemma 2.9): ``PoissonSampling``'s pattern-norm
       mixture at rate ``p``, capped at ``s``.

    **Lower end**: the record with a fixed unit gradient direction (scaled by ``g_j`` in ``[0, 1]``) is an
    explicit pair; the statistic ``<v, y>`` with ``C^T v = 1_W`` on a window ``W`` of steps (solved in
    floating point, ``g_j`` absorbing the residual, ``tightdp.matrix._min_sep_lower.projection_scale``) is,
    after dividing by the common scale, ``N(K_W, s^2)`` with ``K_W`` the number of participations in ``W`` (on
    the neighbour ``N(0, s^2)``, noise rounded up: adding noise is a post-processing). ``K_W``'s law is computed
    exactly by a dynamic program over the renewal chain; its floating-point error (relative, bounded a priori)
    and the dropped far tails are paid by a slightly larger delta and a shift of the lower end by about 1e-10
    (``tightdp.matrix._min_sep_lower``'s module docstring). The windows ``[0, L)`` and ``[n - L, n)``, ``L`` in
    ``1, 4, 16, ..., n``, are screened by a fast estimate and the two best certified (``MixtureOfGaussians``,
    connect-dots). The interval is wide where many small steps compose (small noise): the linear statistic sees
    only the count.

    References
    ----------
    Dong & Ganesh 2026 (arXiv 2602.09338), b-min-sep sampling; Choquette-Choo et al. 2025 (arXiv 2410.06266),
    balls-in-bins; Zhu, Dong & Wang 2022, Thm 10 (adaptive composition of dominating pairs); Balle, Barthe &
    Gaboardi 2018 (the subsampling identity of the hockey-stick divergence); Ganesh 2024, Def. 2.8
    (mixture-of-Gaussians mechanism).

    Examples
    --------
    >>> from tightdp.matrix import Identity, MinSepSampling, matrix_epsilon
    >>> out = matrix_epsilon(strategy=Identity(), noise_multiplier=2.0, steps=50, delta=1e-5,
    ...                      sampler=MinSepSampling(sampling_rate=0.1, min_sep=5))
    >>> 0 < out.lower <= out.upper
    True
    """

    type_name: ClassVar[str] = "min_sep"

    sampling_rate: float
    min_sep: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "min_sep", check_count("min_sep", self.min_sep))
        if not isinstance(self.warm_start, (bool, np.bool_)):
            reject(f"warm_start must be a bool, got {self.warm_start!r}")
        object.__setattr__(self, "warm_start", bool(self.warm_start))

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        p, m = self.sampling_rate, self.min_sep
        out = min_sep_epsilon(strategy, sigma, n, p, m, self.warm_start, delta, eps_error, rel_error)
        if m == 1:
            poisson = PoissonSampling(sampling_rate=p).epsilon(strategy, sigma, n, delta, eps_error, rel_error)
            out = tighter(out, poisson, "Poisson sampling (min_sep = 1 is Poisson)")
        if p == 1.0 and self.warm_start and 1 < m <= n:
            bins = _balls_in_bins(strategy, sigma, n, m, delta, eps_error, rel_error)
            out = tighter(out, bins, f"balls-in-bins (p = 1, warm start: cycle length {m})")
        return out

    def describe(self) -> str:
        start = "warm" if self.warm_start else "cold"
        return f"b-min-sep sampling at rate {self.sampling_rate:g}, min_sep {self.min_sep}, {start} start"
