"""Epsilon of a matrix-mechanism run (strategy ``C``, noise ``sigma``, ``n`` steps, a sampler), certified two-sided.

The release is ``C x + z`` with ``z ~ N(0, sigma^2 I)`` and ``x`` the clipped (norm <= 1) gradient sums; a
sampler decides at which steps a user's gradient enters. Each sampler is a small frozen object; its
``ledgers`` give two lists of tightdp mechanisms, composed by the default (connect-dots) accountant:

* the **upper ledger** dominates the run (a proof is in the sampler's docstring), so its certified upper
  end is an upper bound on the run's epsilon;
* the **lower ledger** is the exact privacy-loss distribution of an explicit pair of neighbouring inputs
  (or of a post-processing of one), so its certified lower end is a lower bound on the run's epsilon.

**Noise splitting** (used by the samplers for a ``b``-banded ``C``): write ``z = z_0 + ... + z_(b-1)`` with
independent ``z_r ~ N(0, sigma^2 / b I)`` and release ``y_r = sum_{s = r mod b} C_s x_s + z_r`` for every ``r``;
``C x + z = sum_r y_r`` is a post-processing, so this richer release's epsilon is an upper bound. In ``y_r`` the
steps ``s = r (mod b)`` are at least ``b`` apart, so their row windows ``[s, s + b)`` are disjoint: the richer
release is a sequence of independent Gaussian steps, step ``s`` with noise ``sigma / sqrt b`` and sensitivity
``||C_s||``, on orthogonal coordinates, i.e. DP-SGD with the same sampler. It turns every DP-SGD amplification
result into a certified (if loose by up to ``sqrt b`` in noise) amplified bound for banded strategies.

Adaptivity: for a lower-triangular ``C`` (and tree aggregation released node by node) a user's adaptively
chosen gradients are no worse than non-adaptive ones of the same norms (Denisov et al. 2022, arXiv
2202.08312, Thm 2.1), so every pattern-wise argument below holds in the adaptive setting.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._accuracy import check_accuracy
from .._blas import one_blas_thread
from .._validation import check_count, check_delta, check_positive, check_probability
from ..bounds import Bounds
from ..errors import TightDPError
from ..mechanisms.basic import Gaussian
from ._allocated import _balls_in_bins, _epoch_allocation
from ._ledgers import (
    Ledger,
    Upper,
    _column_norms,
    _combine,
    _epsilon_of,
    _grouped,
    _grouped_up,
    _sampled,
    _sens_details,
)
from ._lower_pairs import lone_entries, orthogonal_steps
from ._min_sep import min_sep_epsilon, tighter
from .mmcc import with_mmcc
from .sensitivity import SINGLE, Cyclic, MinSeparation, Participation, sensitivity
from .strategies import Strategy, as_strategy, reject

__all__ = [
    "BallsInBins",
    "CyclicPoisson",
    "EpochAllocation",
    "MinSepSampling",
    "NoAmplification",
    "PoissonSampling",
    "Sampler",
    "matrix_epsilon",
    "sampler_from_dict",
]


class Sampler(ABC):
    """How a user's participations are drawn (abstract): each sampler answers ``epsilon`` with its own proof;
    overriding methods share the documented base methods' docstrings (``__init_subclass__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and not getattr(member, "__doc__", None):
                for base in cls.__mro__[1:]:
                    doc = getattr(vars(base).get(name), "__doc__", None)
                    if doc:
                        member.__doc__ = doc
                        break

    #: name in ``to_dict`` (a run description / strategy file)
    type_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The sampler as a JSON-ready dict (``sampler_from_dict`` rebuilds it).

        Returns
        -------
        dict
            ``{"type": type_name, **fields}``, a participation as its own typed dict.
        """
        out: dict[str, Any] = {"type": self.type_name}
        for k, v in self.__dict__.items():
            out[k] = (
                {"type": "min_separation" if isinstance(v, MinSeparation) else "cyclic", **v.__dict__}
                if isinstance(v, Participation)
                else v
            )
        return out

    @abstractmethod
    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        """Certified ``[lower, upper]`` on epsilon of ``n`` steps of ``strategy`` at noise ``sigma``.

        Parameters
        ----------
        strategy : Strategy
            The strategy ``C``.
        sigma : float
            The noise multiplier.
        n : int
            Steps.
        delta : float
            The target delta.
        eps_error, rel_error : float or None
            Accuracy of the engine.

        Returns
        -------
        Bounds
            The certified interval with ``details``.

        Raises
        ------
        ValueError
            The sampler does not apply to the strategy (the message says why).
        PrecisionError
            No upper bound within the engine's reach.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for statements and ``details``.

        Returns
        -------
        str
            The phrase.
        """


class LedgerSampler(Sampler):
    """A sampler whose ends are compositions of tightdp mechanisms: ``ledgers`` returns ``(lower, upper,
    details)``, the upper possibly a tuple of alternative upper ledgers (each a proven bound: the smallest
    answer is kept)."""

    @abstractmethod
    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        """The attained lower ledger, the dominating upper ledger(s) and their details.

        Parameters
        ----------
        strategy : Strategy
            The strategy ``C``.
        sigma : float
            The noise multiplier.
        n : int
            Steps.

        Returns
        -------
        tuple
            ``(lower ledger, upper ledger or alternatives, details)``.

        Raises
        ------
        ValueError
            The sampler does not apply to the strategy.
        """

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        lower_ledger, upper_ledger, details = self.ledgers(strategy, sigma, n)
        if isinstance(upper_ledger, tuple):  # alternatives, each an upper bound: keep the smallest
            ups, failures = [], []
            for i, u in enumerate(upper_ledger):
                if u:
                    try:
                        ups.append((_epsilon_of(u, delta, eps_error, rel_error), i))
                    except TightDPError as exc:  # an alternative out of the engine's reach: the others hold
                        failures.append(exc)
            if not ups:
                raise failures[0]
            up, which = min(ups, key=lambda r: r[0].upper)
            details = {**details, "upper_used": ["no amplification", "noise splitting"][which]}
            used = upper_ledger[which]
        else:
            used = upper_ledger
            up = _epsilon_of(upper_ledger, delta, eps_error, rel_error)
        if lower_ledger == used:
            lo = up.lower
        else:
            lo = _epsilon_of(lower_ledger, delta, eps_error, rel_error).lower if lower_ledger else 0.0
        return _combine(lo, up, details)


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


@dataclass(frozen=True, kw_only=True)
class PoissonSampling(LedgerSampler):
    """Poisson sampling at every step (each record joins each batch independently with ``sampling_rate``),
    any strategy.

    Upper: the smallest of three certified bounds. (iii) For a non-negative ``C``, MMCC's conditional
    composition (Choquette-Choo et al. 2024, arXiv 2310.15526; ``tightdp.matrix.mmcc``, which states the
    theorem, its conditions and the rounding), for any adaptive gradients (or, with ``aligned_gradients``, for
    gradients sharing one direction); skipped when a cheap lower bound on its answer already reaches the smaller
    of (i) and (ii). (i) No amplification: the output is a mixture over
    participation patterns of Gaussian mechanisms, each dominated by the Gaussian of the sensitivity over all
    patterns (``MinSeparation`` with any number of participations), so by joint convexity of the hockey-stick
    divergence so is the mixture. (ii) For a ``b``-banded ``C``, noise splitting (module docstring): DP-SGD over
    all ``n`` steps at noise ``sigma / sqrt(b)``, step ``s`` with sensitivity ``||C_s||``.
    Lower ledger (the DP-SGD reduction): a record whose gradient is a fixed unit vector at a set ``S`` of steps
    with pairwise orthogonal columns and zero elsewhere; projecting the release on those columns gives
    independent ``N(B_s ||C_s||, sigma^2)``, ``B_s ~ Bern(q)``: exactly DP-SGD over ``|S|`` steps. Or, when
    stronger, the rows holding a single step each (tree aggregation's leaves): keeping only those rows (a
    post-processing) of the record with a fixed unit gradient at every step leaves DP-SGD over those steps.

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
        plain = [(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)]
        b = strategy.bands(n)
        split = (
            None
            if b is None
            else [(_sampled(sigma / math.sqrt(b), v, self.sampling_rate), c) for v, c in _grouped_up(norms, n)]
        )
        return (
            lower,
            (plain, split),
            {
                **_sens_details(s),
                "orthogonal_steps": len(steps),
                "upper": "the smaller of no amplification (every participation pattern) and, for a banded C, noise "
                "splitting: DP-SGD at noise sigma / sqrt(bands) over every step (module docstring)",
                "lower": (
                    f"DP-SGD reduction over the {lone.size} rows that hold one step each (an explicit pair, the "
                    "other rows dropped)"
                    if use_lone
                    else f"DP-SGD reduction over {len(steps)} steps with orthogonal columns (an explicit pair)"
                ),
            },
        )

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        out = super().epsilon(strategy, sigma, n, delta, eps_error, rel_error)
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


@dataclass(frozen=True, kw_only=True)
class BallsInBins(Sampler):
    """Balls-in-bins as jax_privacy runs it (``BallsInBinsSampling(iterations, cycle_length)``; Choquette-Choo
    et al. ICLR 2025, arXiv 2410.06266): each record in one uniform bin ``j < cycle_length`` for the whole run,
    taking part at steps ``j, j + cycle_length, ...``.

    ``lower``: the explicit pair of a record with a fixed unit gradient, certified from below through a Loewner
    sandwich of its modes' Gram matrix (``tightdp.matrix.allocation``; unconditional). ``upper``: the smaller of
    no amplification (the sensitivity over the ``cycle_length`` cyclic patterns; always valid), the sandwich from
    above and noise splitting (random allocation with orthogonal modes at noise ``sigma / sqrt(b)``); the last two
    hold given 2410.06266's dominating pair and so only for a non-negative ``C``. Exact for a diagonal ``C``
    (plain random allocation); for banded ``C`` both amplified bounds are loose and the no-amplification bound
    often wins: the deterministic amplified bound of Schuchardt & Kalinin 2026 (2601.21636) is not
    implemented, so the interval can be wide (``details`` say which end came from where). A second lower end,
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
      sensitivity over any ``epochs`` participations, a superset of one per epoch) and noise splitting (DP-SGD
      with per-epoch random allocation at noise ``sigma / sqrt(b)`` / largest column norm); lower from the pair whose
      gradient is non-zero only at the first step of each epoch (orthogonal columns when the epoch has at
      least ``b`` steps): DP-SGD at rate ``1 / steps_per_epoch`` over the epochs; or, when larger, whitening
      (``tightdp.matrix._whitening``: ``C^(-1) y`` plus independent top-up noise is DP-SGD with per-epoch random
      allocation at noise ``sigma / s_min(C)``, a post-processing of the fixed-unit-gradient pair; Toeplitz ``C``).

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
       adaptive gradients by the module docstring's reduction).
    2. *Noise splitting and Poisson domination* (a ``b``-banded ``C``, any signs). (a) By noise splitting
       (module docstring) the release is a post-processing of the per-step releases ``w_s = C_s g_s x_s +
       N(0, sigma^2 / b I)`` on the rows ``[s, s + b)``, released in the order of ``s``; the rows of ``y``
       before step ``s`` are functions of ``w_(<s)`` and independent noise, so an adaptive gradient at ``s``
       is a function of ``w_(<s)``. (b) Fix the other records' sampling randomness ``R`` (independent of the
       differing record's). Given ``R``, the prefix ``w_(<s)`` and the record's chain up to ``s``, its
       participation at ``s`` is ``1[eligible] * Bern(p)`` on a fresh coin; so ``pi = P(x_s = 1 | prefix, R) =
       p P(eligible | prefix, R) <= p`` (at step 0 with the warm start ``pi = p / (1 + (min_sep - 1) p)``).
       Row ``s``'s conditional pair is ``(pi N(m + a, .) + (1 - pi) N(m, .), N(m, .))`` with ``m`` the known
       part and ``||a|| <= ||C_s||``. It is the image of ``(p N(a, .) + (1 - p) N(0, .), N(0, .))`` under the
       kernel "keep the sample with probability ``pi / p``, else replace it by a fresh ``N(0, .)``; add ``m``",
       which maps ``N(0, .)`` to ``N(0, .)``: a post-processing in both directions (add and remove). Rotating
       ``a`` onto one axis and shrinking it to any smaller norm (``t -> r t + N(0, (1 - r^2) .)`` fixes
       ``N(0, .)``) shows the Poisson-subsampled Gaussian at rate ``p``, noise ``sigma / sqrt b`` and
       sensitivity ``||C_s||`` dominates row ``s`` at every prefix, whatever gradient direction the prefix
       chose. Adaptive composition of dominating pairs (Zhu, Dong & Wang 2022, Thm 10) bounds the run given
       ``R``, and joint convexity the mixture over ``R``. With ``C = I`` (one band) this is DP-SGD with
       Poisson sampling at rate ``p``. *Blocks* (``_min_sep.block_split``): cut the steps into blocks of
       ``L <= min_sep`` steps (at most one participation each) and the noise into ``k = 1 + ceil((b - 1) /
       L)`` parts, part ``r`` carrying the blocks ``i = r (mod k)``, whose row windows are then disjoint.
       Given the earlier blocks' releases and ``R``, the block's release is a mixture over the step ``s`` of
       its participation (probability at most ``1 - (1 - p)^L`` in all, fresh coins) of laws each dominated
       by ``(N(A), N(0))``, ``A`` the block's largest column norm (released row by row, it is an adaptive
       composition of Gaussians whose shifts, zero before ``s``, have squared norms summing to at most
       ``A^2``; joint convexity over ``s`` in both directions), so by the
       subsampling identity of the hockey-stick divergence (Balle, Barthe & Gaboardi 2018) and the kernel
       above, by the Poisson-subsampled Gaussian at rate ``1 - (1 - p)^L`` and noise ``sigma / sqrt(k)``;
       composition finishes as before. ``L = 1`` is the plain split; a few ``L`` are tried.
    3. ``min_sep = 1``: the run is Poisson sampling (both starts): ``PoissonSampling``'s interval (including
       MMCC for a non-negative ``C``) is intersected. ``p = 1`` with a warm start: the run is balls-in-bins with
       ``cycle_length = min_sep`` (when ``min_sep <= n``): ``BallsInBins``'s interval is intersected.

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


def sampler_from_dict(data: dict[str, Any]) -> Sampler:
    """Rebuild a sampler from ``Sampler.to_dict()`` output (a run description, a CLI strategy file).

    Parameters
    ----------
    data : dict
        ``{"type": name, **fields}``.

    Returns
    -------
    Sampler
        The sampler.

    Raises
    ------
    ValueError
        An unknown ``type`` or bad fields.
    """
    types = {
        c.type_name: c
        for c in (NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins, EpochAllocation, MinSepSampling)
    }
    if not isinstance(data, dict) or data.get("type") not in types:
        reject(f"sampler must be a dict with 'type' one of {sorted(types)}, got {data!r}")
    kw = {k: v for k, v in data.items() if k != "type"}
    part = kw.get("participation")
    if isinstance(part, dict):
        pk = {k: v for k, v in part.items() if k != "type"}
        kind = part.get("type")
        if kind not in ("min_separation", "cyclic"):
            reject(f"participation type must be 'min_separation' or 'cyclic', got {kind!r}")
        kw["participation"] = MinSeparation(**pk) if kind == "min_separation" else Cyclic(**pk)
    try:
        return types[data["type"]](**kw)
    except TypeError as exc:
        raise ValueError(f"sampler {data['type']!r}: {exc}") from None


@one_blas_thread
def matrix_epsilon(
    *,
    strategy: Any,
    noise_multiplier: float,
    steps: int,
    delta: float,
    sampler: Sampler | None = None,
    bands: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified bounds on the epsilon of a matrix-mechanism run at ``delta`` (add/remove neighbouring).

    Parameters
    ----------
    strategy : Strategy, array or jax_privacy ``BufferedToeplitz``
        The strategy matrix ``C`` (``tightdp.matrix.as_strategy``: a one-dimensional ``c_col`` is banded
        Toeplitz with ``bands``).
    noise_multiplier : float
        ``sigma``: the noise ``z ~ N(0, sigma^2 I)`` added to ``C x`` for clipping norm 1 (jax_privacy's
        ``noise_multiplier`` when ``C``'s largest column norm is 1).
    steps : int
        ``n``, the number of training steps (columns of ``C``).
    delta : float
        The target delta.
    sampler : Sampler, optional
        ``NoAmplification(participation=...)`` (default, single participation), ``CyclicPoisson``,
        ``PoissonSampling``, ``BallsInBins`` (jax_privacy's), ``EpochAllocation`` or ``MinSepSampling``
        (jax_privacy's ``BMinSepSampling``); each docstring states what
        its ends prove.
    bands : int, optional
        The band count of a ``c_col`` vector given as ``strategy`` (default its length).
    eps_error, rel_error : float, optional
        Accuracy of the engine (``tightdp._accuracy``); the interval may be wider where a sampler's theory is.

    Returns
    -------
    Bounds
        ``lower``/``upper`` proven; ``details`` name the strategy, sampler, sensitivity and methods.

    Raises
    ------
    ValueError
        Bad arguments, naming the argument.
    PrecisionError
        No upper bound of the run is within the engine's reach (every alternative refused).
    """
    strat = as_strategy(strategy, bands=bands)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = check_count("steps", steps)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    sampler = NoAmplification() if sampler is None else sampler
    if not isinstance(sampler, Sampler):
        reject(
            f"sampler must be NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins, "
            f"EpochAllocation or MinSepSampling, got {sampler!r}"
        )
    head = {"strategy": strat.describe(), "sampler": sampler.describe(), "steps": n}
    out = sampler.epsilon(strat, sigma, n, delta, eps_error, rel_error)
    return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound", {**head, **dict(out.details)})
