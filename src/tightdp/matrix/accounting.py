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
from .mmcc import with_mmcc
from .sensitivity import SINGLE, Cyclic, MinSeparation, Participation, sensitivity
from .strategies import Strategy, as_strategy, reject

__all__ = [
    "BallsInBins",
    "CyclicPoisson",
    "EpochAllocation",
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
    implemented, so the interval can be wide (``details`` say which end came from where).

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
      least ``b`` steps): DP-SGD at rate ``1 / steps_per_epoch`` over the epochs.

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
    types = {c.type_name: c for c in (NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins, EpochAllocation)}
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
        ``PoissonSampling``, ``BallsInBins`` (jax_privacy's) or ``EpochAllocation``; each docstring states what
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
            f"sampler must be NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins or "
            f"EpochAllocation, "
            f"got {sampler!r}"
        )
    head = {"strategy": strat.describe(), "sampler": sampler.describe(), "steps": n}
    out = sampler.epsilon(strat, sigma, n, delta, eps_error, rel_error)
    return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound", {**head, **dict(out.details)})
