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

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._accuracy import check_accuracy
from .._blas import one_blas_thread
from .._types import ArrayLike, FloatArray
from .._validation import check_count, check_delta, check_positive, check_probability
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import PrecisionError, TightDPError
from ..mechanisms.allocation import RandomAllocation
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampled import PoissonSampled
from ..schemes import allocation_epsilon
from ._lower_pairs import lone_entries, orthogonal_steps
from .allocation import MIN_ALLOCATION_SIGMA, mode_gram, sandwich_epsilon
from .mmcc import with_mmcc
from .sensitivity import SINGLE, Cyclic, MinSeparation, Participation, SensitivityBounds, sensitivity
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

_U = float(np.finfo(float).eps) / 2
Ledger = Sequence[tuple[Mechanism, int]]
#: an upper ledger, or alternatives (each a proven bound; ``None``: not available)
Upper = Ledger | tuple[Ledger | None, ...]


def _column_norms(strategy: Strategy, n: int) -> FloatArray:
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:  # ||C[:, s]||^2 = sum_{m < n - s} c_m^2
        return np.asarray(np.sqrt(np.cumsum(coefs**2)[::-1]), dtype=np.float64)
    c = strategy.matrix(n)
    return np.asarray(np.sqrt(np.einsum("ij,ij->j", c, c)), dtype=np.float64)


def _up(x: float, n: int) -> float:
    return x * (1.0 + 4.0 * (n + 2) * _U)


def _down(x: float, n: int) -> float:
    return x * (1.0 - 4.0 * (n + 2) * _U)


def _sampled(sigma: float, sens: float, q: float) -> PoissonSampled | Gaussian:
    g = Gaussian(noise_multiplier=sigma, sensitivity=sens)
    return g if q >= 1.0 else PoissonSampled(mechanism=g, sampling_rate=q)


def _clusters(values: ArrayLike, max_groups: int = 4, tol: float = 1e-9) -> list[FloatArray]:
    """Sorted (descending) values cut into runs whose spread is at most ``tol`` relative; more than
    ``max_groups`` runs are cut into ``max_groups`` equal parts instead (coarser, still safe below)."""
    s = np.sort(np.asarray(values, float))[::-1]
    cuts = [0] + [i for i in range(1, s.size) if s[i] < s[i - 1] * (1 - tol)] + [s.size]
    runs = [s[a:b] for a, b in itertools.pairwise(cuts)]
    if len(runs) > max_groups:  # merge neighbouring runs, keeping the split points between the largest gaps
        runs = [p for p in np.array_split(s, max_groups) if p.size]
    return runs


def _grouped(sens: ArrayLike, n: int) -> list[tuple[float, int]]:
    """``(value, count)`` per cluster, each rounded DOWN to its least (a smaller gradient norm is an attained
    input, so the lower ledger stays an explicit pair)."""
    return [(_down(float(r[-1]), n), int(r.size)) for r in _clusters(sens) if r[-1] > 0]


def _grouped_up(values: ArrayLike, n: int) -> list[tuple[float, int]]:
    """``(value, count)`` per cluster, each rounded UP to its largest (a larger sensitivity dominates)."""
    return [(_up(float(r[0]), n), int(r.size)) for r in _clusters(values)]


class Sampler(ABC):
    """How a user's participations are drawn (abstract): each sampler answers ``epsilon`` with its own proof."""

    #: name in ``to_dict`` (a run description / strategy file)
    type_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
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
        """Certified ``[lower, upper]`` on epsilon of ``n`` steps of ``strategy`` at noise ``sigma``."""

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for statements and ``details``."""


class LedgerSampler(Sampler):
    """A sampler whose ends are compositions of tightdp mechanisms: ``ledgers`` returns ``(lower, upper,
    details)``, the upper possibly a tuple of alternative upper ledgers (each a proven bound: the smallest
    answer is kept)."""

    @abstractmethod
    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        """The attained lower ledger, the dominating upper ledger(s) and their details."""

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


def _sens_details(s: SensitivityBounds) -> dict[str, Any]:
    return {"sensitivity": s.to_dict()}


@dataclass(frozen=True, kw_only=True)
class NoAmplification(LedgerSampler):
    """Deterministic participation (no sampling), any strategy: the run is the Gaussian mechanism with the
    strategy's sensitivity over ``participation`` (exact ``mu``-GDP, ``mu = sens / sigma``; Choquette-Choo et
    al. 2023 Sec. 2). Upper ledger: the certified sensitivity upper bound; lower ledger: the worst explicit
    pattern's attained sensitivity (equal when the sensitivity is exact)."""

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
    theorem, its conditions and the rounding), for any adaptive gradients. (i) No amplification: the output is a mixture over
    participation patterns of Gaussian mechanisms, each dominated by the Gaussian of the sensitivity over all
    patterns (``MinSeparation`` with any number of participations), so by joint convexity of the hockey-stick
    divergence so is the mixture. (ii) For a ``b``-banded ``C``, noise splitting (module docstring): DP-SGD over
    all ``n`` steps at noise ``sigma / sqrt(b)``, step ``s`` with sensitivity ``||C_s||``.
    Lower ledger (the DP-SGD reduction): a record whose gradient is a fixed unit vector at a set ``S`` of steps
    with pairwise orthogonal columns and zero elsewhere; projecting the release on those columns gives
    independent ``N(B_s ||C_s||, sigma^2)``, ``B_s ~ Bern(q)``: exactly DP-SGD over ``|S|`` steps. Or, when
    stronger, the rows holding a single step each (tree aggregation's leaves): keeping only those rows (a
    post-processing) of the record with a fixed unit gradient at every step leaves DP-SGD over those steps.
    """

    type_name: ClassVar[str] = "poisson"

    sampling_rate: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))

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
        return with_mmcc(out, strategy, sigma, n, self.sampling_rate, delta, eps_error, rel_error)

    def describe(self) -> str:
        return f"Poisson sampling at rate {self.sampling_rate:g} every step"


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


def _epsilon_of(ledger: Ledger, delta: float, eps_error: float | None, rel_error: float | None) -> Bounds:
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    for mech, count in ledger:
        acc.compose(mech, count)
    return acc.epsilon(delta)


def _epoch_allocation(
    strategy: Strategy,
    sigma: float,
    n: int,
    t: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    if n % t:
        raise ValueError(f"steps ({n}) must be a whole number of epochs of steps_per_epoch={t}")
    epochs = n // t
    norms = _column_norms(strategy, n)
    b = strategy.bands(n)
    if b == 1:
        hi = allocation_epsilon(
            noise_multiplier=sigma / _up(float(norms.max()), n),
            num_steps=t,
            epochs=epochs,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        lo = allocation_epsilon(
            noise_multiplier=sigma / _down(float(norms.min()), n),
            num_steps=t,
            epochs=epochs,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return _combine(lo.lower, hi, {"method": "diagonal strategy: random allocation (certified pairs)"})
    s = sensitivity(strategy, MinSeparation(max_participations=epochs, min_sep=1), steps=n)
    hi = _epsilon_of([(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)], delta, eps_error, rel_error)
    details = {**_sens_details(s), "upper": "no amplification (any one step per epoch), certified"}
    if b is not None:  # noise splitting: DP-SGD with per-epoch random allocation at noise sigma / sqrt(b)
        sig = sigma / math.sqrt(b) / _up(float(norms.max()), n)
        if sig >= MIN_ALLOCATION_SIGMA:
            split = allocation_epsilon(
                noise_multiplier=sig, num_steps=t, epochs=epochs, delta=delta, eps_error=eps_error, rel_error=rel_error
            )
            if split.upper < hi.upper:
                hi = split
                details["upper"] = (
                    f"noise splitting: DP-SGD with per-epoch random allocation at noise "
                    f"sigma / sqrt({b}) / max column norm = {sig:.6g} (certified pairs)"
                )
    if b is not None and t >= b:
        lower_ledger = [(_sampled(sigma, v, 1.0 / t), c) for v, c in _grouped(norms[0::t], n)]
        lo = _epsilon_of(lower_ledger, delta, eps_error, rel_error).lower
        details["lower"] = f"DP-SGD reduction: gradient only at each epoch's first step, rate 1/{t} (explicit pair)"
    else:
        lo = _epsilon_of(
            [(_sampled(sigma, float(_down(norms.max(), n)), 1.0 / t), 1)], delta, eps_error, rel_error
        ).lower
        details["lower"] = "one step of the largest column at rate 1/steps_per_epoch (explicit pair)"
    details["note"] = "no tight amplified bound for banded C under per-epoch allocation is implemented"
    return _combine(lo, hi, details)


def _balls_in_bins(
    strategy: Strategy,
    sigma: float,
    n: int,
    t: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    if t > n:
        raise ValueError(f"cycle_length ({t}) must be at most steps ({n})")
    s = sensitivity(strategy, Cyclic(period=t), steps=n)
    plain = _epsilon_of([(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)], delta, eps_error, rel_error)
    g = mode_gram(strategy, n, t)
    lo, up, arg_up, arg_lo = sandwich_epsilon(g, sigma, delta, eps_error, rel_error)
    coefs = strategy.toeplitz_coefs(n)
    nonneg = (coefs is not None and bool(np.all(coefs >= 0))) or bool(np.all(strategy.matrix(n) >= 0))
    details: dict[str, Any] = {
        **_sens_details(s),
        "lower": f"explicit pair (fixed unit gradient), Loewner sandwich from below (c', d') = {arg_lo}",
    }
    b = strategy.bands(n)
    split = math.inf
    if nonneg and b is not None and b > 1:
        # noise splitting: the richer release has orthogonal modes, of squared norm sum_i ||C_(j + i t)||^2 <= m2
        col2 = _column_norms(strategy, n) ** 2
        m2 = _up(max(float(col2[j::t].sum()) for j in range(t)), n)
        sig = sigma / math.sqrt(b * m2)
        if sig >= MIN_ALLOCATION_SIGMA:
            try:
                split = _epsilon_of(
                    [(RandomAllocation(mechanism=Gaussian(noise_multiplier=sig), num_steps=t), 1)],
                    delta,
                    eps_error,
                    rel_error,
                ).upper
            except PrecisionError:
                split = math.inf
    if nonneg and min(up, split) < plain.upper:
        if split < up:
            details["upper"] = (
                f"noise splitting ({b} bands): random allocation of 1 of {t} with orthogonal modes, "
                f"noise per unit sensitivity {sig:.6g}, of 2410.06266's dominating pair"
            )
            up = split
        else:
            details["upper"] = f"Loewner sandwich from above (c, d) = {arg_up} of 2410.06266's dominating pair"
        hi = Bounds(min(lo, up), up, up, "epsilon", "bound", {})
    else:
        details["upper"] = "no amplification (sensitivity over the cyclic patterns), certified"
        hi = plain
        if up == math.inf or not nonneg:
            details["note"] = (
                "the amplified upper bound for banded C under balls-in-bins (Schuchardt & Kalinin "
                "2026) is not implemented: the interval can be wide"
            )
    return _combine(lo, hi, details)


def _combine(lower: float, up: Bounds, details: dict[str, Any]) -> Bounds:
    lower = min(max(lower, 0.0), up.upper)
    est = min(max(up.estimate, lower), up.upper)
    return Bounds(lower, est, up.upper, "epsilon", "bound", details)


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
