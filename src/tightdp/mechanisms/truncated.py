"""Truncated Poisson sampling: Poisson batches capped at ``max_batch_size`` records.

Each record of the data set joins the batch independently with probability ``q``; a batch larger than
``b = max_batch_size`` is cut down to a uniformly random subset of ``b`` records, then the Gaussian
mechanism (noise ``sigma``, unit sensitivity) runs on it. Add/remove neighbouring; ``dataset_size = n``
counts the records of the data set that holds the differing record (so ``n - 1`` others), as in
dp-accounting 0.6.0's ``TruncatedSubsampledGaussianDpEvent`` (Ganesh 2025, "Tight privacy accounting for
truncated Poisson sampling", arXiv 2508.15089). Write ``X ~ Bin(n - 1, q)`` for the number of *other*
records sampled.

**Upper bound 1, revealed S** (``revealed_pair``, what ``privacy_losses()`` returns). Reveal the set ``S``
of other records that were sampled: it has the same law under both data sets and the output is a
post-processing of ``(S, output)``, so for every ``alpha >= 0``
``H_alpha(P || Q) <= sum_S P(S) H_alpha(P_S || Q_S)`` (the pair given ``S``). Fix ``S``, ``X = |S|``, the
gradients ``g`` (given the previous iterate) and the remove direction (``P``: the record ``z`` is present):

* ``X < b``: nothing is cut; ``P_S = (1 - q) N(g_S) + q N(g_S + g_z)``, ``Q_S = N(g_S)``: the
  Poisson-subsampled Gaussian at rate ``q`` with shift ``|g_z| <= 1``.
* ``X >= b``: ``Q_S`` averages ``N(g_T)`` over uniform ``b``-subsets ``T`` of ``S``. Under ``P`` the batch
  holds ``z`` with probability ``q_X = q b / (X + 1)``, and then ``z`` plus a uniform ``(b - 1)``-subset of
  ``S``, which is ``T`` minus a uniform member ``m`` of ``T``. Coupling on ``(T, m)``:
  ``P_S = avg_{T,m} [(1 - q_X) N(g_T) + q_X N(g_T + d)]`` and ``Q_S = avg_{T,m} N(g_T)`` with
  ``d = g_z - g_m``, ``|d| <= 2``. By joint convexity of ``H_alpha`` and translation invariance, ``(P_S, Q_S)``
  is dominated by the Poisson-subsampled Gaussian at rate ``q_X`` with shift 2 (a smaller shift is a
  garbling: ``N(2) -> N(|d|)`` by scaling and added noise, applied to both sides).

So one step is dominated, for every ``alpha``, by the public-coin (flagged) mixture over ``X`` of these
pairs; the add direction is the same with each pair swapped (dominance at every ``alpha`` carries over to
the swapped pairs). The bound holds given any previous iterates, so adaptive composition of the steps is
dominated by the composition of the flagged mixtures (composition of dominating pairs; Koskela et al. 2023, App. C.6).
Computed (``revealed_components``): the ``X >= b`` flags are grouped in buckets, each at the largest rate
of its members (a pair at a smaller rate is a garbling of one at a larger rate:
``(1 - r') Q + r' P = K((1 - r) Q + r P)`` for the kernel that keeps the sample with probability
``r' / r``, else redraws from ``Q``), the whole upper tail of ``X`` in the last bucket; weights are rounded
down or moved to flags of larger rate (``revealed_components`` says how). Each flag's
discretisations are the engine's; their mixture is ``FlaggedMixtureLoss``.

**Upper bound 2, Ganesh's pair** (``ganesh_pair``; dp-accounting's
``from_truncated_subsampled_gaussian_mechanism``): with ``p_T = P(X >= b)`` and
``q_T = P(Bin(n, q) > b) b / (p_T n)`` (``= E[q_X | X >= b]``), the ``(1 - p_T, p_T)`` mixture of the
Poisson-subsampled Gaussian ``(q, sigma)`` and the replace-one subsampled Gaussian ``(q_T, sigma / 2)``.
``tightdp.schemes.truncated_poisson_epsilon`` composes both and keeps the smaller upper end (each is an
upper bound on the mechanism's epsilon, so their minimum is one); the revealed-S pair was the smaller in
every setting measured (0.2, 50 records, cut 10, sigma 1, delta 1e-5: 6.957 against 7.106).

**Lower bound** (an attained pair; ``TruncatedPoissonSampled.attained_mechanism``): every other record
has gradient 0. Then the output is ``N(1{target kept}, sigma^2)`` against ``N(0, sigma^2)`` with
``P(target kept) = q_eff = q E[min(1, b / (1 + X))]``: exactly the Poisson-subsampled Gaussian at rate
``q_eff``, composed over the steps. Neither upper pair is attained by any pair of data sets, so their own
lower ends certify nothing about the mechanism; accountants take lower ends from this pair only
(``tightdp.mechanisms.base.Mechanism``). ``tightdp.schemes.truncated_poisson_epsilon`` adds a second attained
pair where the batch is almost always cut (its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_choice, check_count, check_probability
from ..errors import UnsupportedMechanismError
from ..losses import PrivacyLoss, SelfDiscretisingLoss, poisson_gaussian_loss, without_replacement_gaussian_loss
from .base import LossPair, Mechanism
from .basic import Gaussian
from .subsampled import PoissonSampled

if TYPE_CHECKING:
    from ..pld import DiscretisedLoss

__all__ = [
    "TruncatedPoissonSampled",
    "FlaggedMixtureLoss",
    "kept_probability",
    "revealed_components",
    "revealed_pair",
    "UPPER_PAIRS",
]

#: the upper pairs ``TruncatedPoissonSampled.upper_pair`` can name (module docstring)
UPPER_PAIRS = ("revealed", "ganesh")


_U = float(np.finfo(float).eps) / 2


def _mix(parts: Sequence[DiscretisedLoss], weights: Sequence[float], extra_infinity: float = 0.0) -> DiscretisedLoss:
    """The weighted mixture of discretised losses on one mesh (a public-coin mixture of pairs).

    Round-off: every mass is a sum of at most ``len(parts)`` non-negative products ``w_i p_i``, so the
    computed mass is within a factor ``1 +- (len(parts) + 1) u`` of the exact mixture of the computed
    component masses: a *relative* error, added to the components' (no absolute charge per grid point,
    which over thousands of steps would exceed the deltas asked for). ``extra_infinity``: mass at
    ``+inf`` beyond the components' (the upper pair's weight deficit, ``revealed_pair``).
    """
    from ..pld import DiscretisedLoss

    h = parts[0].h
    for d in parts:
        if d.coupling_range != 0.0 or d.mean_error != 0.0 or d.truncated_mass != 0.0:
            raise ValueError("only dominance discretisations can be mixed")
    lo = min(d.start for d in parts)
    hi = max(d.start + d.pmf.size for d in parts)
    pmf = np.zeros(hi - lo)
    for d, w in zip(parts, weights):
        pmf[d.start - lo : d.start - lo + d.pmf.size] += w * d.pmf
    shifts = [d.shift for d in parts]
    # one shift for all atoms: the safe side of the components' (raise for the upper, lower for the lower)
    shift = max(shifts) if all(s >= 0 for s in shifts) else min(shifts)
    gamma = (len(parts) + 2) * _U
    inf_mass = math.fsum([w * d.infinity_mass for d, w in zip(parts, weights)] + [extra_infinity])
    inf_mass = min(1.0, inf_mass * (1.0 + gamma)) if inf_mass > 0 else 0.0
    tv = math.fsum(w * d.tv_error for d, w in zip(parts, weights)) * (1.0 + gamma)
    return DiscretisedLoss(
        h=h,
        start=lo,
        pmf=pmf,
        shift=shift,
        infinity_mass=inf_mass,
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=tv,
        rel_error=max(d.rel_error for d in parts) + gamma,
    )


@dataclass(frozen=True)
class FlaggedMixtureLoss(SelfDiscretisingLoss):
    """Privacy loss of a public-coin mixture: with probability ``weights[i]`` the pair of ``losses[i]``.

    Its loss distribution is the mixture of the components'; so are its dominating
    and dominated discretisations (``dominating_pld``/``dominated_pld``).

    Parameters
    ----------
    weights : tuple of float
        The flags' probabilities, non-negative, summing to at most 1.
    losses : tuple of PrivacyLoss
        The pair of each flag, one per weight.
    infinity_weight : float, default 0.0
        Probability of a flag whose pair is the fully revealing one (upper bounds only).

    Raises
    ------
    TypeError
        If ``weights`` or ``losses`` is missing.

    References
    ----------
    Ganesh 2024, Lemma 2.9 (mixtures of dominating pairs dominate); the module docstring (the flags).
    """

    how_to = "the dominance accountant, connect-dots (dpsgd_epsilon(sampling='truncated-poisson'))"

    weights: tuple[float, ...]
    losses: tuple[PrivacyLoss, ...]
    #: probability of a flag whose pair is replaced by the fully revealing one (loss ``+inf``): upper bounds
    #: count it at ``+inf``, lower bounds drop it
    infinity_weight: float = 0.0

    def _split(self, tail: float) -> tuple[list[tuple[float, PrivacyLoss, float]], float]:
        """``(kept flags as (weight, loss, tail share), weight dropped)``. Each flag's share of the tail budget
        ``tail`` is ``tail / (K w_i)`` (at most 0.1), so the mixture leaves out at most ``tail`` in all and a
        flag of tiny weight does not stretch the grid; a flag of weight at most ``tail / K`` is left out whole
        (the upper construction puts it at ``+inf``, the lower one drops it, as any truncated mass)."""
        k = len(self.weights)
        kept: list[tuple[float, PrivacyLoss, float]] = []
        dropped = 0.0
        for w, loss in zip(self.weights, self.losses):
            if w * k <= tail:
                dropped += w
            else:
                kept.append((w, loss, min(0.1, tail / (k * w))))
        if not kept:  # (a budget above 1/K: keep the heaviest flag)
            w, loss = max(zip(self.weights, self.losses), key=lambda t: t[0])
            kept, dropped = [(w, loss, 0.1)], dropped - w
        return kept, dropped

    def dominating_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A discretised loss on ``h Z`` whose composition bounds delta from above: the flags' dominating ones, mixed.

        Parameters
        ----------
        h : float
            Mesh of the loss grid, positive.
        tail : float
            Mass budget for the left-out tails, in ``(0, 1)``; each flag gets its share.

        Returns
        -------
        DiscretisedLoss
            The mixture of the flags' discretisations on ``h Z``.

        Raises
        ------
        ValueError
            If a flag's discretisation is not a dominance discretisation (it cannot be mixed).
        """
        from ..pld.dominance import dominating

        kept, dropped = self._split(tail)
        return _mix(
            [dominating(loss, h, t) for _, loss, t in kept], [w for w, _, _ in kept], self.infinity_weight + dropped
        )

    def dominated_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A discretised loss on ``h Z`` whose composition bounds delta from below: the flags' dominated ones, mixed.

        Parameters
        ----------
        h : float
            Mesh of the loss grid, positive.
        tail : float
            Mass budget for the left-out tails, in ``(0, 1)``; each flag gets its share.

        Returns
        -------
        DiscretisedLoss
            The mixture of the flags' discretisations on ``h Z``.

        Raises
        ------
        ValueError
            If a flag's discretisation is not a dominance discretisation (it cannot be mixed).
        """
        from ..pld.dominance import dominated

        kept, _ = self._split(tail)
        return _mix([dominated(loss, h, t) for _, loss, t in kept], [w for w, _, _ in kept])

    def spread(self) -> float:
        """Rough standard deviation of the mixture's loss (sets the first mesh only, never a bound).

        Returns
        -------
        float
            ``sqrt(sum_i w_i spread_i^2)``.
        """
        from ..pld.dominance import loss_spread

        return math.sqrt(sum(w * loss_spread(loss) ** 2 for w, loss in zip(self.weights, self.losses)))


#: equal-width buckets of ``X`` over the binomial's bulk (``mean +- _BULK_SD`` standard deviations)
_BULK_BUCKETS = 48
_BULK_SD = 8.0


def _binom_cdf_up(x: int, n: int, q: float) -> float:
    """``P(Bin(n, q) <= x)``, rounded up (a relative 1e-12 above scipy's incomplete beta, Boost's ``ibeta``,
    accurate to a few hundred ulp, plus an absolute ulp-scale margin)."""
    from scipy import stats  # lazily (import cost)

    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    return min(1.0, float(stats.binom.cdf(x, n, q)) * (1.0 + 1e-12) + 1e-300)


def revealed_components(
    *, dataset_size: int, sampling_rate: float, max_batch_size: int
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The flags of the revealed-S upper pair (module docstring): ``(weights, rates, shifts)``, weights summing to 1.

    ``X ~ Bin(n - 1, q)`` (the other sampled records). Flags:

    * the uncut flag ``X < b`` (rate ``q``, shift 1), at ``P(X < b)`` rounded down by a relative ``1e-12``;
    * one flag at rate ``q``, shift 2 (it dominates every other flag: a shift-1 pair is a garbling of the
      shift-2 pair at the same rate) carrying that rounding, ``2e-12 P(X < b)``;
    * the cut flags ``X >= b`` in buckets, each at the largest rate ``q b / (X + 1)`` of its members (shift 2):
      below the bulk in buckets of doubling ``X`` (rates within a factor 2), the bulk (``mean +- 8`` standard
      deviations) in at most ``_BULK_BUCKETS`` equal widths, the upper tail in the last bulk bucket. Their
      weights are differences of *upper* bounds on the cumulative mass ``P(b <= X < x)``, capped at the cut
      flags' total: any error moves mass to buckets of smaller ``X``, that is to larger rates, whose pairs
      dominate (a transport of each true flag's mass to a dominating flag, so the pair still dominates).
      No mass is sent to ``+inf`` and no tiny weight sits at a large rate, which at ``delta = 1e-12`` over
      many steps would cost more than the whole budget.

    Without possible cuts (``b >= n``) the only flag is the uncut one, weight 1 (the Poisson-subsampled
    Gaussian itself).

    Parameters
    ----------
    dataset_size : int
        Records ``n`` of the data set holding the target, a positive integer.
    sampling_rate : float
        Poisson sampling rate ``q`` in ``(0, 1]``.
    max_batch_size : int
        Batch cap ``b``, a positive integer at most ``dataset_size``.

    Returns
    -------
    tuple of tuple of float
        ``(weights, rates, shifts)``, one entry per flag.

    Raises
    ------
    ValueError
        Not raised for values out of their domain (scipy's binomial answers NaN): the arguments are the
        caller's to validate (``TruncatedPoissonSampled`` does).
    """
    n, q, b = dataset_size, sampling_rate, max_batch_size
    m = n - 1
    if b > m:
        return (1.0,), (q,), (1.0,)
    from scipy import stats  # lazily (import cost)

    uncut = float(stats.binom.cdf(b - 1, m, q)) if b > 0 else 0.0
    weights: list[float] = []
    rates: list[float] = []
    shifts: list[float] = []
    if uncut > 0.0:
        weights += [uncut * (1.0 - 1e-12), uncut * 2e-12]
        rates += [q, q]
        shifts += [1.0, 2.0]
    total = 1.0 - math.fsum(weights)  # the cut flags' share: at most the true P(X >= b)
    mean, sd = m * q, math.sqrt(m * q * (1.0 - q))
    bulk_lo = max(b, int(math.floor(mean - _BULK_SD * sd)))
    bulk_hi = min(m, max(bulk_lo, int(math.ceil(mean + _BULK_SD * sd))))
    edges = []
    x = bulk_lo
    while x > b:  # doubling buckets below the bulk, from the bulk down to b
        edges.append(x)
        x = max(b, (x + 1) // 2 - 1)
    edges.append(b)
    edges.reverse()
    width = bulk_hi - bulk_lo + 1
    count = min(_BULK_BUCKETS, width)
    edges += sorted({bulk_lo + (i * width) // count for i in range(count)} - {bulk_lo})
    base = float(stats.binom.cdf(b - 1, m, q)) * (1.0 - 1e-12) if b > 0 else 0.0  # P(X < b), rounded down
    prev = 0.0
    for i, lo in enumerate(edges):
        if i + 1 < len(edges):
            cum = min(total, max(prev, _binom_cdf_up(edges[i + 1] - 1, m, q) - base))  # P(b <= X < next), up
        else:
            cum = total  # the last bucket takes the whole upper tail
        w = cum - prev
        if w > 0.0:
            # the bucket's largest rate, rounded up (two roundings)
            weights.append(w)
            rates.append(min(1.0, q * b / (lo + 1) * (1.0 + 4.0 * _U)))
            shifts.append(2.0)
        prev = cum
    return tuple(weights), tuple(rates), tuple(shifts)


def revealed_pair(*, dataset_size: int, sampling_rate: float, max_batch_size: int, sigma: float) -> LossPair:
    """The revealed-S upper pair of the module docstring, both directions (``FlaggedMixtureLoss``; the
    Poisson-subsampled Gaussian itself where no batch can be cut).

    Parameters
    ----------
    dataset_size : int
        Records ``n`` of the data set holding the target, a positive integer.
    sampling_rate : float
        Poisson sampling rate ``q`` in ``(0, 1]``.
    max_batch_size : int
        Batch cap ``b``, a positive integer at most ``dataset_size``.
    sigma : float
        Noise standard deviation per unit sensitivity, positive.

    Returns
    -------
    LossPair
        The remove and add directions.

    Raises
    ------
    ValueError
        Not raised for values out of their domain: the arguments are the caller's to validate
        (``TruncatedPoissonSampled`` does).

    References
    ----------
    Ganesh 2025, arXiv 2508.15089 (truncated Poisson sampling); the module docstring (the revealed-S pair).
    """
    w, r, sh = revealed_components(
        dataset_size=dataset_size, sampling_rate=sampling_rate, max_batch_size=max_batch_size
    )
    if len(w) == 1 and sh[0] == 1.0:
        return LossPair(
            poisson_gaussian_loss(sigma=sigma, q=r[0], direction="remove"),
            poisson_gaussian_loss(sigma=sigma, q=r[0], direction="add"),
        )
    out = []
    for direction in ("remove", "add"):
        losses = tuple(poisson_gaussian_loss(sigma=sigma / s, q=rate, direction=direction) for rate, s in zip(r, sh))
        out.append(FlaggedMixtureLoss(w, losses))
    return LossPair(*out)


def kept_probability(*, dataset_size: int, sampling_rate: float, max_batch_size: int) -> float:
    """The probability that a given record is in the truncated batch, rounded down.

    ``q_eff = q E[min(1, b / (1 + X))]`` with ``X ~ Bin(n - 1, q)`` the other sampled records. Since
    ``C(n - 1, k) / (k + 1) = C(n, k + 1) / n``, ``q E[1 / (1 + X); X >= b] = P(Bin(n, q) > b) / n``, so

        ``q_eff = q P(Bin(n - 1, q) < b) + (b / n) P(Bin(n, q) > b)``,

    two regularised incomplete beta values (scipy, relative error far below 1e-12): no array over the
    binomial's support, milliseconds at ``n = 1e12``. The result is lowered by a relative ``1e-9`` so that
    the lower bound built on it stays one (the tests check it against mpmath).

    Parameters
    ----------
    dataset_size, sampling_rate, max_batch_size : int, float, int
        ``n`` (records of the data set holding the target), ``q`` and ``b``.

    Returns
    -------
    float
        A lower bound on ``q_eff``, in ``(0, q]``.

    Raises
    ------
    ValueError
        Not raised for values out of their domain (scipy's binomial answers NaN): the arguments are the
        caller's to validate (``TruncatedPoissonSampled`` does).
    """
    n, q, b = dataset_size, sampling_rate, max_batch_size
    if q >= 1.0:
        return min(1.0, b / n) * (1 - 1e-12)
    from scipy import stats  # lazily: scipy.stats costs 0.3 s of import

    below = float(stats.binom.cdf(b - 1, n - 1, q)) if n > 1 else 1.0
    above = float(stats.binom.sf(b, n, q))
    kept = q * below + (b / n) * above
    return min(q, kept) * (1.0 - 1e-9)


@dataclass(frozen=True, kw_only=True)
class TruncatedPoissonSampled(Mechanism):
    """One step of Poisson sampling at ``sampling_rate`` from ``dataset_size`` records with batches cut to
    ``max_batch_size`` (dp-accounting's ``TruncatedSubsampledGaussianDpEvent``; Ganesh 2025, 2508.15089).

    ``privacy_losses()`` returns an upper pair of the module docstring: ``upper_pair="revealed"`` (default,
    the revealed-S pair) or ``"ganesh"`` (Ganesh's pair, as dp-accounting builds it).

    Not attained: neither upper pair is the output pair of any two neighbouring data sets, so the curve of
    its dominated discretisation is no lower bound on this mechanism (0.2, 50 records, batches cut to 10,
    sigma 1, one step: Ganesh's pair's lower end 7.106 lies above the revealed-S upper bound 6.957).
    ``attained_mechanism()`` is the pair of the module docstring's lower bound (every other record's gradient
    0): the Poisson-subsampled Gaussian at the kept probability ``q_eff``, from which accountants take lower
    ends.

    Parameters
    ----------
    mechanism : Mechanism
        The step mechanism: ``Gaussian``.
    sampling_rate : float
        Poisson sampling rate ``q`` in ``(0, 1]``.
    dataset_size : int
        Records ``n`` of the data set, a positive integer.
    max_batch_size : int
        Batch cap ``b``, a positive integer at most ``dataset_size``.
    upper_pair : str, default "revealed"
        ``"revealed"`` or ``"ganesh"`` (one of ``UPPER_PAIRS``).

    Raises
    ------
    UnsupportedMechanismError
        If ``mechanism`` is not ``Gaussian``.
    ValueError
        If ``sampling_rate`` lies outside ``(0, 1]``, a size is not a positive integer, ``max_batch_size >
        dataset_size`` or ``upper_pair`` is not one of ``UPPER_PAIRS``.

    References
    ----------
    Ganesh 2025, arXiv 2508.15089; dp_accounting's ``TruncatedSubsampledGaussianDpEvent``.
    """

    type_name = "truncated_poisson_sampled"
    pair_attained = False
    mechanism: Mechanism
    sampling_rate: float
    dataset_size: int
    max_batch_size: int
    upper_pair: str = "revealed"

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, Gaussian):
            raise UnsupportedMechanismError(
                f"truncated Poisson sampling of {type(self.mechanism).__name__} is not supported; only Gaussian"
            )
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        object.__setattr__(self, "max_batch_size", check_count("max_batch_size", self.max_batch_size))
        if self.max_batch_size > self.dataset_size:
            raise ValueError(f"max_batch_size ({self.max_batch_size}) must be <= dataset_size ({self.dataset_size})")
        check_choice("upper_pair", self.upper_pair, UPPER_PAIRS)

    @property
    def sigma(self) -> float:
        """The noise standard deviation per unit sensitivity, ``noise_multiplier / sensitivity``."""
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        return g.noise_multiplier / g.sensitivity

    def kept_probability(self) -> float:
        """A lower bound on ``q_eff``, the probability that the target is in the truncated batch.

        Returns
        -------
        float
            ``kept_probability`` of this mechanism's parameters, in ``(0, q]``.
        """
        return kept_probability(
            dataset_size=self.dataset_size, sampling_rate=self.sampling_rate, max_batch_size=self.max_batch_size
        )

    def attained_mechanism(self) -> Mechanism:
        """The Poisson-subsampled Gaussian at ``q_eff`` (rounded down): the exact pair of the data sets whose
        other records all have gradient 0 (module docstring), composed at every step by the same pair.

        Returns
        -------
        Mechanism
            ``PoissonSampled`` at the kept probability.
        """
        return PoissonSampled(mechanism=self.mechanism, sampling_rate=self.kept_probability())

    def truncation(self) -> tuple[float, float]:
        """``(p_T, q_T)`` of the module docstring (dp-accounting 0.6.0's formulas).

        Returns
        -------
        tuple of float
            ``(p_T, q_T)``, both in ``[0, 1]``.
        """
        from scipy import stats  # lazily (import cost)

        n, q, b = self.dataset_size, self.sampling_rate, self.max_batch_size
        p_t = float(stats.binom.sf(b - 1, n - 1, q))
        if p_t <= 0.0:
            return 0.0, 0.0
        q_t = float(stats.binom.sf(b, n, q)) * b / p_t / n
        return p_t, min(q_t, 1.0)

    def privacy_losses(self) -> LossPair:
        if self.upper_pair == "ganesh":
            return self.ganesh_pair()
        return revealed_pair(
            dataset_size=self.dataset_size,
            sampling_rate=self.sampling_rate,
            max_batch_size=self.max_batch_size,
            sigma=self.sigma,
        )

    def ganesh_pair(self) -> LossPair:
        """Ganesh's dominating pair (module docstring, upper bound 2).

        Returns
        -------
        LossPair
            The remove and add directions.
        """
        sigma, q = self.sigma, self.sampling_rate
        remove = poisson_gaussian_loss(sigma=sigma, q=q, direction="remove")
        add = poisson_gaussian_loss(sigma=sigma, q=q, direction="add")
        p_t, q_t = self.truncation()
        if p_t == 0.0:
            return LossPair(remove, add)
        # the truncation branch is symmetric (replace one); a slightly pessimistic p_T only moves weight
        # to the (more revealing) doubled-sensitivity branch
        repl = without_replacement_gaussian_loss(sigma=sigma / 2.0, q=q_t)
        p_t = min(1.0, p_t * (1 + 1e-12))
        return LossPair(
            FlaggedMixtureLoss((1.0 - p_t, p_t), (remove, repl)), FlaggedMixtureLoss((1.0 - p_t, p_t), (add, repl))
        )
