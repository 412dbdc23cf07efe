"""The ledger samplers of ``tightdp.matrix.accounting``: ``NoAmplification``, ``CyclicPoisson``,
``PoissonSampling``; their docstrings state the proofs (noise splitting: ``tightdp.matrix.accounting``'s module
docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validation import check_count, check_probability
from ..bounds import Bounds
from ..errors import TightDPError
from ..mechanisms.basic import Gaussian
from ..mechanisms.mixture import MixtureOfGaussians
from ._ledgers import (
    Ledger,
    Upper,
    _column_norms,
    _combine,
    _grouped,
    _grouped_up,
    _pattern_norm_ledger,
    _sampled,
    _sens_details,
    _up,
)
from ._lower_pairs import lone_entries, orthogonal_steps
from ._min_sep_lower import projection_lower
from ._row_weights import weighted_block_norms
from ._sampler_base import LedgerSampler
from ._whitening import toeplitz_min_singular_lower
from .mmcc import with_mmcc
from .sensitivity import SINGLE, MinSeparation, Participation, sensitivity
from .strategies import Strategy, reject

__all__ = ["CyclicPoisson", "NoAmplification", "PoissonSampling"]


@dataclass(frozen=True, kw_only=True)
class NoAmplification(LedgerSampler):
    """Deterministic participation (no sampling), any strategy: the run is the Gaussian mechanism with the
    strategy's sensitivity over ``participation`` (exact ``mu``-GDP, ``mu = sens / sigma``; Choquette-Choo et
    al. 2023 Sec. 2). Upper ledger: the certified sensitivity upper bound; lower ledger: the worst explicit
    pattern's attained sensitivity (equal when the sensitivity is exact).

    Parameters
    ----------
    participation : Participation, optional
        The participation patterns (default ``SINGLE``).

    Raises
    ------
    ValueError
        ``participation`` not a ``Participation``.
    """

    type_name: ClassVar[str] = "no_amplification"

    participation: Participation = SINGLE

    def __post_init__(self) -> None:
        if not isinstance(self.participation, Participation):
            reject(f"participation must be a Participation, got {self.participation!r}")

    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        s = sensitivity(strategy, self.participation, steps=n)
        lower = [(Gaussian(noise_multiplier=sigma, sensitivity=s.lower), 1)] if s.lower > 0 else []
        upper = [(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)]
        return (
            lower,
            upper,
            {
                **_sens_details(s),
                "mu": [s.lower / sigma, s.upper / sigma],
                "method": "Gaussian mechanism of the strategy's sensitivity (mu-GDP)",
            },
        )

    def describe(self) -> str:
        return f"no amplification, {self.participation.describe()}"


@dataclass(frozen=True, kw_only=True)
class CyclicPoisson(LedgerSampler):
    """BandMF's cyclic Poisson sampling (Choquette-Choo et al. 2023, arXiv 2306.08153, Thm 1; jax_privacy
    ``amplified_bandmf_event``): the data split into ``period`` groups (default: the strategy's band count
    ``b``), group ``j`` active at steps ``j, j + period, ...``, each of its records joining that step's batch
    independently with probability ``sampling_rate``.

    Needs a causal ``C`` with at most ``period`` bands. Proof: the rows a step-``s`` gradient touches,
    ``s .. s + b - 1``, lie in ``[s, s + period)``; for a record of group ``j`` these windows are disjoint and
    released in order, so the run is exactly the adaptive composition of ``R = ceil((n - j) / period)``
    Poisson-subsampled Gaussians with sensitivities ``||C[:, j + i period]||`` (the BandMF theorem, with each
    round's own column norm instead of the largest). Upper ledger: every round at the largest column norm of
    its window (dominates every group, as a larger sensitivity dominates and a missing round is sensitivity
    0); lower ledger: group 0 with the gradient scaled to the grouped column norms (an explicit pair).
    ``period = 1`` is DP-SGD at rate ``sampling_rate``.

    Parameters
    ----------
    sampling_rate : float
        The within-group Poisson rate, in ``(0, 1]``.
    period : int, optional
        The number of groups (default the strategy's band count).

    Raises
    ------
    ValueError
        A rate outside ``(0, 1]`` or a period below one (``epsilon``: a non-banded strategy or too few groups).
    """

    type_name: ClassVar[str] = "cyclic_poisson"

    sampling_rate: float
    period: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        if self.period is not None:
            object.__setattr__(self, "period", check_count("period", self.period))

    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        b = strategy.bands(n)
        if b is None:
            raise ValueError(
                f"cyclic Poisson amplification needs a banded lower-triangular strategy; "
                f"{strategy.describe()} is not (use PoissonSampling or NoAmplification)"
            )
        p = b if self.period is None else self.period
        if b > p:
            raise ValueError(
                f"period ({p}) must be at least the strategy's {b} bands for cyclic Poisson "
                "amplification (BandMF Thm 1)"
            )
        norms = _column_norms(strategy, n)
        rounds = -(-n // p)
        win = [float(norms[i * p : (i + 1) * p].max()) for i in range(rounds)]
        q = self.sampling_rate
        ups = _grouped_up(win, n)
        upper = [(_sampled(sigma, v, q), c) for v, c in ups]
        lower = [(_sampled(sigma, v, q), c) for v, c in _grouped(norms[0::p], n)]
        return (
            lower,
            upper,
            {
                "rounds": rounds,
                "period": p,
                "method": "BandMF Thm 1: cyclic Poisson = DP-SGD over ceil(n/period) rounds",
            },
        )

    def describe(self) -> str:
        return f"cyclic Poisson sampling at rate {self.sampling_rate:g}" + (
            f", {self.period} groups" if self.period else ""
        )


def _count_mixture(noise: float, size: int, q: float, top: float, cap: float = math.inf) -> MixtureOfGaussians:
    """The scalar mixture of Gaussians at ``noise`` whose shift is ``min(K top, cap)`` with ``K ~ Binomial(size,
    q)``, the participation count of ``size`` Poisson steps (``PoissonSampling``'s docstring, (iv) and (v)). The
    masses of the counts ``>= 1`` are rounded up and the count 0 takes the rest; the negligible counts above the
    kept ones put their mass on the largest count, ``size`` (moving mass to larger shifts is safe)."""
    from scipy import stats

    counts = np.arange(size + 1)
    w = np.minimum(np.asarray(stats.binom.pmf(counts, size, q), dtype=float) * (1.0 + 1e-12), 1.0)
    keep = w > 1e-300
    keep[0] = True
    top_count = int(counts[keep][-1])
    if top_count < size:
        w[size] = float(stats.binom.sf(top_count, size, q)) * (1.0 + 1e-12) + 1e-300
        keep[size] = True
    w = np.where(keep, w, 0.0)
    w[0] = max(0.0, 1.0 - float(w[1:].sum()))
    return MixtureOfGaussians(
        noise_multiplier=noise,
        sensitivities=tuple(min(float(c) * top, cap) for c in counts[keep]),
        probabilities=tuple(float(x) for x in w[keep]),
    )


def _poisson_blocks(strategy: Strategy, sigma: float, b: int, n: int, q: float) -> list[tuple[int, float, Ledger]]:
    """Block-splitting upper ledgers of Poisson sampling with a ``b``-banded ``C`` (``PoissonSampling``'s docstring,
    (iv)): ``(L, A, ledger)`` for block sizes ``L = 2, 4, ...`` up to ``b``, the ledger ``ceil(n / L)`` scalar
    mixtures of Gaussians at noise ``sigma`` with the participation count ``Binomial(L, q)`` times ``A``, the largest
    weighted block norm (``tightdp.matrix._row_weights``, rounded up)."""
    out: list[tuple[int, float, Ledger]] = []
    size = 2
    while size <= min(b, n):
        top = float(weighted_block_norms(strategy, n, b, size).max())
        out.append((size, top, [(_count_mixture(sigma, size, q, top), -(-n // size))]))
        size *= 2
    return out


@dataclass(frozen=True, kw_only=True)
class PoissonSampling(LedgerSampler):
    """Poisson sampling at every step (each record joins each batch independently with ``sampling_rate``),
    any strategy.

    Upper: the smallest of six certified bounds. (iii) For a non-negative ``C``, MMCC's conditional
    composition (Choquette-Choo et al. 2024, arXiv 2310.15526; ``tightdp.matrix.mmcc``, which states the
    theorem, its conditions and the rounding), for any adaptive gradients (or, with ``aligned_gradients``, for
    gradients sharing one direction); skipped when a cheap lower bound on its answer already reaches the smaller
    of (i) and (ii). (i) No amplification: the output is a mixture over
    participation patterns of Gaussian mechanisms, each dominated by the Gaussian of the sensitivity over all
    patterns (``MinSeparation`` with any number of participations), so by joint convexity of the hockey-stick
    divergence so is the mixture. (ii) For a ``b``-banded ``C``, noise splitting (``tightdp.matrix.accounting``'s
    module docstring) with each row's noise shared among the steps whose columns reach it in proportion to
    their signal (``tightdp.matrix._row_weights``, blocks of one step): DP-SGD over all ``n`` steps at noise
    ``sigma``, step ``s`` with its weighted norm ``A_s`` as sensitivity (equal shares: ``sqrt(b) ||C_s||``). (iv) Block splitting, for a ``b``-banded ``C`` and ``L = 2, 4, ..., b``: by the reduction to
    non-adaptive gradients (``tightdp.matrix.accounting``'s module docstring), fix the gradients; cut the steps
    into blocks of ``L`` and share each row's noise among the blocks whose row windows cover it
    (``tightdp.matrix._row_weights``; equal shares are ``k = 1 + ceil((b - 1) / L)`` parts); ``C x + z`` is a
    post-processing of one independent release per block (independent Poisson bits, independent noise),
    which whitened is at noise ``sigma`` a vector mixture over the block's participation set ``S`` of
    Gaussians with shifts of norm at most ``|S| A`` (``A`` the largest weighted block norm; triangle
    inequality, any signs). A vector mixture is
    dominated by the scalar one with the same norms (under ``Q`` the sum ``sum_S w_S exp(r_S t_S - r_S^2 / 2)``
    has standard normal ``t_S``; the comonotone choice ``t_S = t`` is the largest in convex order, Dhaene et al.
    2002, and both hockey-stick divergences are convex functionals of the likelihood ratio's ``Q``-law), and a
    scalar one grows with the law of the shift (Ganesh 2024, Lemma 2.9): so the block is dominated by
    ``MixtureOfGaussians`` with shift ``Binomial(L, q) * A`` at noise ``sigma``, composed over the ``ceil(n / L)``
    blocks. (v) The count mixture, any ``C``: the same argument with one block of all ``n`` steps,
    which needs no noise splitting: ``MixtureOfGaussians`` at noise ``sigma`` with shift ``min(K A, s)``, ``K ~
    Binomial(n, q)`` the record's participation count and ``s`` the sensitivity over all patterns (a shift is at
    most both). It pays no amplification within a pattern but only for the count, so it wins where the expected
    count is small and ``C`` is not banded (tree aggregation at a low rate). Adaptive gradients directly: under
    ``Q`` the likelihood ratio is ``sum_S w_S L_S`` over patterns ``S``; released row by row, each ``L_S`` is a
    stochastic exponential whose quadratic variation is ``||C x_S||^2 / sigma^2 <= r_S^2 / sigma^2`` on every path
    (``r_S = min(|S| A, s)``), i.e. a Brownian exponential stopped before ``r_S^2 / sigma^2``, so ``L_S`` lies below
    ``exp(r_S Z / sigma - r_S^2 / (2 sigma^2))`` in convex order (convex functions of a martingale are
    submartingales); comonotone sums preserve the order and dominate every sum with those marginals (Dhaene et al.
    2002), and both hockey-stick divergences are ``E_Q`` of convex functions of the likelihood ratio.
    (vi) The pattern-norm mixture, for a strategy that computes the law of ``||C x||`` under ``Bernoulli(q)`` bits
    (``Strategy.pattern_norm_law``; tree aggregation, by dynamic programming over the tree,
    ``tightdp.matrix._pattern_norms``): the argument of (v) with ``r_S = ||C x_S||`` itself (non-negative ``C``:
    ``||C diag(g) x_S|| <= ||C x_S||`` for gradients of norm at most 1), the shift's law made stochastically larger
    by rounding. The count mixture pays the worst pattern of each count; this pays each pattern's own norm, which
    for tree aggregation is much smaller when the participations are spread (``E ||C x||^2`` about 224 against
    ``12 E K^2 = 864`` at 2048 steps and rate 1/256).
    Lower ledger (the DP-SGD reduction): a record whose gradient is a fixed unit vector at a set ``S`` of steps
    with pairwise orthogonal columns and zero elsewhere; projecting the release on those columns gives
    independent ``N(B_s ||C_s||, sigma^2)``, ``B_s ~ Bern(q)``: exactly DP-SGD over ``|S|`` steps. Or, when
    stronger, the rows holding a single step each (tree aggregation's leaves): keeping only those rows (a
    post-processing) of the record with a fixed unit gradient at every step leaves DP-SGD over those steps.
    Or, for a Toeplitz ``C``, whitening (``tightdp.matrix._whitening``): ``C^(-1) y`` plus independent top-up
    noise is DP-SGD over all ``n`` steps at noise ``sigma / s_min(C)``, a post-processing of the same pair. Or,
    when larger, the count statistic (``MinSepSampling``'s lower end with ``min_sep = 1``, whose renewal chain is
    Poisson sampling): ``<v, y>`` with ``C^T v = 1`` on a window of steps is ``N(K, s^2)`` with ``K ~ Binomial``
    the record's participations in the window (tree aggregation: the root node itself).

    Parameters
    ----------
    sampling_rate : float
        The Poisson rate of every step, in ``(0, 1]``.
    aligned_gradients : bool, optional
        Default ``False``: MMCC holds for any adaptive gradients of norm at most 1. ``True``: an ASSUMPTION on
        the threat model, that the record's gradients share one direction with non-negative scales (the
        scalar model of MMCC's analysis); MMCC then drops its cross-column term and is much tighter (tree
        aggregation). Only MMCC uses it; the other bounds and the lower end hold for any gradients.

    Raises
    ------
    ValueError
        A rate outside ``(0, 1]`` or a non-boolean ``aligned_gradients``.
    """

    type_name: ClassVar[str] = "poisson"

    sampling_rate: float
    aligned_gradients: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        if not isinstance(self.aligned_gradients, bool):
            reject(f"aligned_gradients must be a bool, got {self.aligned_gradients!r}")

    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        s = sensitivity(strategy, MinSeparation(max_participations=None, min_sep=1), steps=n)
        norms = _column_norms(strategy, n)
        steps = orthogonal_steps(strategy, n, norms)
        lone = lone_entries(strategy, n)
        use_lone = float(np.sum(lone**2)) > float(np.sum(norms[steps] ** 2))
        lower = [
            (_sampled(sigma, v, self.sampling_rate), c) for v, c in _grouped(lone if use_lone else norms[steps], n)
        ]
        lower_how = (
            f"DP-SGD reduction over the {lone.size} rows that hold one step each (an explicit pair, the "
            "other rows dropped)"
            if use_lone
            else f"DP-SGD reduction over {len(steps)} steps with orthogonal columns (an explicit pair)"
        )
        s_min = toeplitz_min_singular_lower(strategy, n)
        if s_min > 0.0:
            # whitening (tightdp.matrix._whitening): DP-SGD at sigma / s_min over all n steps; kept when its
            # subsampled-Gaussian spread sum_s q^2 (e^(mu_s^2) - 1) is larger (either choice is a lower end)
            q = self.sampling_rate
            here = np.asarray(lone if use_lone else norms[steps], dtype=float) / sigma
            spread = float(np.sum(np.expm1(np.minimum(here**2, 50.0))))
            white = n * math.expm1(min((s_min / sigma) ** 2, 50.0))
            if white > spread:
                lower = [(_sampled(sigma / s_min, 1.0, q), n)]
                lower_how = (
                    f"whitening: DP-SGD over all {n} steps at noise sigma / s_min(C) = {sigma / s_min:.6g} "
                    "(tightdp.matrix._whitening; a post-processing of the fixed-unit-gradient pair)"
                )
        plain = [(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)]
        b = strategy.bands(n)
        split = (
            None
            if b is None
            else [
                (_sampled(sigma, v, self.sampling_rate), c)
                for v, c in _grouped_up(weighted_block_norms(strategy, n, b, 1), n)
            ]
        )
        top = _up(float(norms.max()), n)
        blocks = [] if b is None else _poisson_blocks(strategy, sigma, b, n, self.sampling_rate)
        count_mix = [(_count_mixture(sigma, n, self.sampling_rate, top, float(s.upper)), 1)]
        norm_mix = _pattern_norm_ledger(strategy, sigma, n, self.sampling_rate, float(s.upper), norms)
        return (
            lower,
            (plain, split, count_mix, norm_mix, *(ledger for _, _, ledger in blocks)),
            {
                "upper_names": [
                    "no amplification",
                    "noise splitting",
                    "count mixture (shift min(K A, sensitivity), K ~ Binomial(n, q))",
                    "pattern-norm mixture (shift ||C x||, its law by dynamic programming)",
                    *(
                        f"block splitting (blocks of {size} steps, each row's noise shared among the blocks covering "
                        f"it; largest weighted block norm {a:.6g})"
                        for size, a, _ in blocks
                    ),
                ],
                **_sens_details(s),
                "orthogonal_steps": len(steps),
                "upper": "the smallest of certified upper bounds: no amplification (every participation pattern), "
                "the count and pattern-norm mixtures, and for a banded C noise and block splitting with each row's "
                "noise shared by signal (PoissonSampling's docstring); upper_used names the one kept",
                "lower": lower_how,
            },
        )

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        out = super().epsilon(strategy, sigma, n, delta, eps_error, rel_error)
        # the count statistic (b-min-sep's lower end with min_sep = 1: Poisson's renewal chain is Bernoulli steps)
        try:
            lo, lo_details = projection_lower(
                strategy, sigma, n, self.sampling_rate, 1, True, delta, float(out.upper), eps_error, rel_error
            )
        except TightDPError:  # out of the engine's reach: the other lower ends stand
            lo, lo_details = 0.0, {}
        if lo > out.lower:
            out = _combine(lo, out, {**dict(out.details), **lo_details})
        return with_mmcc(
            out,
            strategy,
            sigma,
            n,
            self.sampling_rate,
            delta,
            eps_error,
            rel_error,
            aligned_gradients=self.aligned_gradients,
        )

    def describe(self) -> str:
        aligned = ", gradients assumed aligned" if self.aligned_gradients else ""
        return f"Poisson sampling at rate {self.sampling_rate:g} every step{aligned}"
