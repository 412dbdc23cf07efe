"""Accounting for the batch sampling people actually run (issue 11): random allocation (balls and bins),
shuffled fixed batches, truncated Poisson.

The mechanisms and their certified pairs live in ``tightdp.mechanisms`` (``allocation``: the epoch's
dominating / dominated pairs of Feldman & Shenfeld 2602.17284; ``truncated``: Ganesh 2025's pair); the
functions here *run accountants* on them and add the explicit lower bounds, so they sit above
``tightdp.accountants`` (data flows mechanism -> accountant -> scheme answer, never back).

* ``allocation_epsilon`` / ``allocation_accountant``: random allocation of ``k`` of ``t`` steps per epoch
  (``tightdp.mechanisms.allocation`` has the theory);
* ``shuffle_epsilon``: shuffled fixed batches (Chua et al. 2403.17673; upper bound without
  amplification, certified lower bound from their attack pair);
* ``truncated_poisson_epsilon``: Poisson batches cut to a maximum size (Ganesh 2025, 2508.15089).

Every answer is a ``Bounds`` of kind ``"bound"``: ``lower`` and ``upper`` are proven bounds on the
scheme's epsilon, at the accuracy of ``tightdp._accuracy`` (relative 1e-3 by default, ``eps_error``
alone absolute) where the scheme's theory allows it, and wider (said in ``details``) where it does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._accuracy import check_accuracy
from ._validation import check_count, check_delta, check_positive
from .accountants.connect_dots import ConnectDotsAccountant
from .bounds import Bounds
from .errors import PrecisionError
from .mechanisms.allocation import _WIDE_SIGMA, RandomAllocation, lower_bound_epsilon, max_statistic_pld
from .mechanisms.basic import Gaussian
from .mechanisms.subsampled import PoissonSampled
from .mechanisms.truncated import TruncatedPoissonSampled

if TYPE_CHECKING:
    from .pld import DiscretisedLoss

__all__ = [
    "allocation_accountant",
    "allocation_epsilon",
    "cyclic_allocation_epsilon",
    "shuffle_epsilon",
    "truncated_poisson_epsilon",
]

#: what ``allocation_epsilon`` accounts, said in every answer (jax_privacy's balls-in-bins is the other one)
FRESH_BIN = "a fresh bin every epoch (random allocation, tightdp's balls-and-bins)"
#: what the upper ends cover (the proof is in tightdp.mechanisms.allocation's docstring)
ADAPTIVE = (
    "upper bound proven for adaptive steps (DP-SGD): the adaptive pair is dominated by the non-adaptive "
    "one, tightdp.mechanisms.allocation, 'Adaptive steps'"
)
#: what ``cyclic_allocation_epsilon`` accounts
CYCLIC_BIN = "one bin for the whole run, repeated every cycle (jax_privacy BallsInBinsSampling)"


# --------------------------------------------------------------------------- random allocation
def _max_statistic_fn(
    sigma: float, t: int, mean_p: float, mean_q: float, reverse: bool, **shifted: int
) -> Callable[[float], DiscretisedLoss]:
    """``h -> max_statistic_pld(sigma, t, h, mean_p, mean_q, reverse, **shifted)`` for ``lower_bound_epsilon``."""

    def fn(h: float) -> DiscretisedLoss:
        return max_statistic_pld(sigma, t, h, mean_p, mean_q, reverse, **shifted)

    return fn


def allocation_accountant(*, eps_error: float | None = None, rel_error: float | None = None) -> ConnectDotsAccountant:
    """A fresh accountant that composes ``RandomAllocation`` epochs with certified upper and lower bounds:
    the default connect-dots accountant, which uses ``AllocationLoss``'s own dominating / dominated pairs
    (``tightdp.pld.dominance.own_pairs``) and mixes them with any other mechanism."""
    return ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)


def _wide_bounds(
    sigma: float,
    t: int,
    epochs: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
    reason: str,
    scheme: str = FRESH_BIN,
) -> Bounds:
    """A certified but wide interval for 1-of-``t`` allocation when the lattice realisation cannot answer
    (tiny noise or delta): ``upper`` without amplification (for every allocation the epoch is one Gaussian
    step of sensitivity 1, so by joint convexity ``sqrt(E)/sigma``-GDP), ``lower`` from the post-processing
    ``max_i x_i`` (``max_statistic_pld``, both directions)."""
    up = (
        ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
        .compose(Gaussian(noise_multiplier=sigma), epochs)
        .epsilon(delta)
    )
    try:
        lower = max(
            lower_bound_epsilon(_max_statistic_fn(sigma, t, 1.0, 0.0, r), epochs, delta, min(0.01, eps_error or 0.01))
            for r in (False, True)
        )
    except PrecisionError:
        lower = 0.0
    lower = min(lower, up.upper)
    return Bounds(
        lower,
        up.upper,
        up.upper,
        "epsilon",
        "bound",
        {
            "sampling": f"random allocation, 1 of {t} steps per epoch",
            "scheme": scheme,
            "adaptive": ADAPTIVE,
            "upper": f"no amplification: {math.sqrt(epochs) / sigma:.6g}-GDP (joint convexity over allocations)",
            "lower": "post-processing max_i x_i of the epoch (certified from below)",
            "note": f"wide interval: the exact realisation could not answer ({reason})",
        },
    )


def allocation_epsilon(
    *,
    noise_multiplier: float,
    num_steps: int,
    epochs: int,
    delta: float,
    num_selected: int = 1,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified bounds on epsilon of ``epochs`` epochs of random allocation (each record in exactly
    ``num_selected`` of ``num_steps`` steps per epoch; Gaussian noise ``noise_multiplier``, unit
    sensitivity; add/remove neighbouring).

    ``k = 1`` (balls and bins; Feldman & Shenfeld 2602.17284's PLD realisation, certified by
    dominance, see ``tightdp.mechanisms.allocation``) and ``k = t`` (the Gaussian mechanism composed
    ``t`` times): both ends certified at the accuracy asked for (``tightdp._accuracy``: relative 1e-3
    by default, ``eps_error`` alone absolute). ``1 < k < t``: ``upper`` is certified through the k-to-1
    reduction of Feldman & Shenfeld 2502.08202 and ``lower`` through the larger of the post-processings
    ``sum_i x_i`` (Gaussian) and ``max_i x_i`` (``max_statistic_pld(shifted=k)``): valid, loose; ``details``
    says so. When the reduction cannot answer (small noise and delta), ``upper`` is ``sqrt(k E)/sigma``-GDP
    (no amplification) and ``details["note"]`` says the interval is wide.

    The accounted scheme draws *a fresh bin every epoch* (``details["scheme"]``); one bin for the whole run
    (jax_privacy's ``BallsInBinsSampling``) is ``cyclic_allocation_epsilon``. Every upper end holds for
    adaptive steps (DP-SGD), the k-to-1 reduction included: the adaptive pair is dominated by the
    non-adaptive one (proof in ``tightdp.mechanisms.allocation``, "Adaptive steps"); ``details["adaptive"]``.
    """
    check_positive("noise_multiplier", noise_multiplier)
    num_steps = check_count("num_steps", num_steps)
    num_selected = check_count("num_selected", num_selected)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    mech = RandomAllocation(
        mechanism=Gaussian(noise_multiplier=noise_multiplier), num_steps=num_steps, num_selected=num_selected
    )
    k, t = num_selected, num_steps
    if k == t or (k == 1 and noise_multiplier >= _WIDE_SIGMA):
        try:
            out = allocation_accountant(eps_error=eps_error, rel_error=rel_error).compose(mech, epochs).epsilon(delta)
        except PrecisionError as exc:
            return _wide_bounds(noise_multiplier, t, epochs, delta, eps_error, rel_error, str(exc))
        return Bounds(
            out.lower,
            out.estimate,
            out.upper,
            "epsilon",
            "bound",
            {
                **dict(out.details),
                "sampling": f"random allocation, {k} of {t} steps per epoch",
                "scheme": FRESH_BIN,
                "adaptive": ADAPTIVE,
                "method": "dominating / dominated pairs (exact PLD realisation, 2602.17284)"
                if k == 1
                else "closed form: k = t is the Gaussian mechanism composed t times",
            },
        )
    if k == 1:
        return _wide_bounds(
            noise_multiplier,
            t,
            epochs,
            delta,
            eps_error,
            rel_error,
            f"noise multiplier below {_WIDE_SIGMA}: the likelihood-ratio lattice would be too long",
        )
    acc = allocation_accountant(eps_error=eps_error, rel_error=rel_error)
    for steps, count in mech.blocks():
        block = RandomAllocation(mechanism=Gaussian(noise_multiplier=noise_multiplier), num_steps=steps)
        acc.compose(block, count * epochs)
    try:
        up = acc.epsilon(delta)
        upper_how = (
            "composition of 1-of-floor/ceil(t/k) allocations (Feldman & Shenfeld 2502.08202, k-to-1 "
            "reduction; adaptive steps: tightdp.mechanisms.allocation, 'Adaptive steps'), certified"
        )
    except PrecisionError as exc:
        # for every allocation an epoch is k Gaussian steps of sensitivity 1: by joint convexity over the
        # allocations, E epochs are sqrt(k E) / sigma-GDP (no amplification), the wide certified fallback
        up = (
            ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
            .compose(Gaussian(noise_multiplier=noise_multiplier / math.sqrt(k)), epochs)
            .epsilon(delta)
        )
        upper_how = (
            f"no amplification: {math.sqrt(k * epochs) / noise_multiplier:.6g}-GDP (joint convexity "
            f"over allocations); wide interval: the k-to-1 reduction could not answer ({exc})"
        )
    lo_mech = Gaussian(noise_multiplier=noise_multiplier * math.sqrt(t) / k)
    lo = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(lo_mech, epochs).epsilon(delta)
    # the post-processing max_i x_i: P(max <= m) = Phi((m - 1)/s)^k Phi(m/s)^(t-k) for every k-subset (both
    # directions, certified from below by merge-to-the-grid); better than sum_i x_i for small k and noise
    try:
        by_max = max(
            lower_bound_epsilon(
                _max_statistic_fn(noise_multiplier, t, 1.0, 0.0, r, shifted=k),
                epochs,
                delta,
                min(0.01, eps_error or 0.01),
            )
            for r in (False, True)
        )
    except PrecisionError:
        by_max = 0.0
    lower = min(max(lo.lower, by_max), up.upper)
    details: dict[str, Any] = {
        "sampling": f"random allocation, {k} of {t} steps per epoch",
        "scheme": FRESH_BIN,
        "adaptive": ADAPTIVE,
        "upper": upper_how,
        "lower": f"the larger of two post-processings, each certified: sum_i x_i (Gaussian mu = k / (sigma sqrt t) "
        f"= {k / (noise_multiplier * math.sqrt(t)):.4g} per epoch: {lo.lower:.6g}) and max_i x_i "
        f"({by_max:.6g}); loose (no tight lower bound implemented for 1 < k < t)",
        "upper_details": dict(up.details),
    }
    if upper_how.startswith("no amplification"):
        details["note"] = "wide interval: the k-to-1 reduction could not answer at this noise and delta"
    return Bounds(lower, min(max(up.estimate, lower), up.upper), up.upper, "epsilon", "bound", details)


# --------------------------------------------------------------------------- one bin for the whole run
def cyclic_allocation_epsilon(
    *,
    noise_multiplier: float,
    steps_per_cycle: int,
    cycles: int | None = None,
    delta: float,
    steps: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of DP-SGD with *one bin for the whole run*: every record
    draws one slot ``B`` uniformly from the ``t = steps_per_cycle`` slots, once, and is used in step ``s``
    exactly when ``s mod t = B`` (jax_privacy's ``BallsInBinsSampling(iterations, cycle_length)``;
    Choquette-Choo et al. 2410.06266). Gaussian noise ``noise_multiplier`` per unit sensitivity,
    add/remove neighbouring, adaptive steps allowed.

    This is *not* tightdp's balls-and-bins (``allocation_epsilon``: a fresh bin every epoch), and it is
    much less private: sigma 1, 8 steps per cycle, 4 cycles, epsilon 2 gives delta 0.0884 here against
    0.0104 with a fresh bin every epoch.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit of clipping norm (``sigma > 0``).
    steps_per_cycle : int
        ``t``, the cycle length (number of bins).
    cycles : int, optional
        Number of full cycles ``c``; the run has ``c t`` steps. Give either ``cycles`` or ``steps``.
    delta : float
        Target delta in ``(0, 1)``.
    steps : int, optional
        Total number of steps ``T`` (jax_privacy's ``iterations``); ``T = c t + r`` with ``0 <= r < t``.
    eps_error, rel_error : float, optional
        Accuracy asked for (``tightdp._accuracy``).

    Returns
    -------
    Bounds
        Kind ``"bound"``. ``details["scheme"]`` says which scheme was accounted.

    Raises
    ------
    ValueError
        If an argument is out of range, or both / neither of ``cycles`` and ``steps`` are given.

    Notes
    -----
    **Non-adaptive steps: an exact reduction.** Let ``T = c t`` and the target's (unit) gradient enter
    every step of slot ``B``. Under ``Q`` (target absent) the output is ``x ~ N(0, sigma^2 I_T)``; under
    ``P`` it is ``(1/t) sum_b N(1_{slot b}, sigma^2 I_T)``. The likelihood ratio is

        L(x) = (1/t) sum_b exp((sum_{s in slot b} x_s - c/2) / sigma^2)
             = (1/t) sum_b exp((2 y_b - 1) / (2 sigma'^2)),   y_b = (1/c) sum_{s in slot b} x_s,
                                                             sigma' = sigma / sqrt(c),

    and under ``Q`` the ``y_b`` are i.i.d. ``N(0, sigma'^2)``. That is exactly the likelihood ratio of one
    epoch of 1-out-of-``t`` random allocation of ``Gaussian(sigma')`` (``RandomAllocation``, module
    ``tightdp.mechanisms.allocation``) with the same ``Q``-law; both hockey-stick divergences
    ``H_a(P||Q) = E_Q[(L - a)_+]`` and ``H_a(Q||P) = E_Q[(1 - a L)_+]`` depend only on the ``Q``-law of
    ``L``, so the two schemes have the same privacy profile in both directions, for every ``a >= 0``.
    This function therefore accounts ``RandomAllocation(Gaussian(sigma / sqrt(c)), num_steps=t)`` once,
    with ``allocation_epsilon``'s certified ends (and its wide certified fallback when
    ``sigma / sqrt(c)`` is small).

    **Adaptive steps (DP-SGD).** Step ``s`` releases ``x_s = f_s(x_<s) + 1[s in slot B] g_s(x_<s) + Z_s``
    with ``||g_s|| <= 1``, ``Z_s ~ N(0, sigma^2 I_d)``. ``tightdp.mechanisms.allocation``'s module
    docstring ("Adaptive steps") proves that for any data-independent random choice of the steps a record
    joins (here: one slot, repeated) this pair is dominated, in both directions, by the non-adaptive pair
    with ``g_s`` a fixed unit vector: the likelihood ratio is multilinear in the per-step factors
    ``M_s = exp((n_s y_s - n_s^2/2)/sigma^2)`` (``n_s = ||g_s||``, ``y_s`` the output along ``g_s``, i.i.d.
    ``N(0, sigma^2)`` under ``Q`` whatever the past), ``M_1`` is larger than ``M_n`` in convex order for
    ``n <= 1``, and a backward induction over the steps shows ``n_s = 1`` is the adversary's best reply
    at every step. So ``upper`` holds for adaptive DP-SGD; ``lower`` is attained by a concrete pair of
    data sets (one coordinate; the target's clipped gradient is ``+1`` at every step, every other
    record's is 0), whose output is the non-adaptive pair above.

    **A partial last cycle** (``steps = c t + r``, ``0 < r < t``): ``upper`` pads the run to ``c + 1``
    full cycles (a padded step is a step whose gradient is 0, ``n_s = 0``, dominated by ``n_s = 1`` as
    above), ``lower`` keeps the first ``c`` cycles (a marginal of the output: a post-processing of the
    attained pair); ``c = 0`` has lower end 0. ``details`` says so.
    """
    check_positive("noise_multiplier", noise_multiplier)
    t = check_count("steps_per_cycle", steps_per_cycle)
    if (cycles is None) == (steps is None):
        raise ValueError(
            f"give exactly one of cycles (full cycles) and steps (total steps), got cycles={cycles!r}, steps={steps!r}"
        )
    if cycles is not None:
        c, r = check_count("cycles", cycles), 0
    else:
        c, r = divmod(check_count("steps", steps), t)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)

    def one_epoch(n_cycles: int) -> Bounds:
        sigma = noise_multiplier / math.sqrt(n_cycles)
        return allocation_epsilon(
            noise_multiplier=sigma, num_steps=t, epochs=1, delta=delta, eps_error=eps_error, rel_error=rel_error
        )

    total = c * t + r
    base = {
        "sampling": f"one bin of {t} for the whole run, {total} steps ({c} full cycles"
        + (f" and {r} steps of a partial cycle)" if r else ")"),
        "scheme": CYCLIC_BIN,
        "reduction": "the run's likelihood ratio is that of one epoch of 1-of-t random allocation of "
        "Gaussian(sigma / sqrt(cycles)) (exact for non-adaptive steps; dominating for "
        "adaptive steps, proof in tightdp.mechanisms.allocation, 'Adaptive steps')",
    }
    up = one_epoch(c + 1 if r else c)
    if not r:
        details = {**dict(up.details), **base, "sigma_per_cycle_sum": noise_multiplier / math.sqrt(c)}
        return Bounds(up.lower, up.estimate, up.upper, "epsilon", "bound", details)
    lower = min(one_epoch(c).lower, up.upper) if c else 0.0
    details = {
        **base,
        "upper": f"padded to {c + 1} full cycles (a padded step has gradient 0, dominated by a "
        f"unit gradient): {up.upper:.6g}",
        "lower": (f"the first {c} full cycles (a marginal of the output): {lower:.6g}" if c else "0 (no full cycle)"),
        "note": "partial last cycle: the interval brackets it between c and c + 1 full cycles",
        "upper_details": dict(up.details),
    }
    return Bounds(lower, min(max(up.estimate, lower), up.upper), up.upper, "epsilon", "bound", details)


# --------------------------------------------------------------------------- shuffling
def shuffle_epsilon(
    *,
    noise_multiplier: float,
    num_batches: int,
    epochs: int,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of ``epochs`` shuffled epochs of ``num_batches`` steps
    ("zero-out" neighbouring of Chua et al. 2403.17673; both theorems in the Notes).

    ``upper``: the Gaussian bound without amplification, ``sqrt(epochs)/sigma``-GDP (joint convexity over
    permutations; Dong, Roth, Su 2022 Cor. 3.3); no tighter certified bound for shuffling is known.
    ``lower``: Chua et al.'s attack pair (through ``max_i x_i``) certified from below by
    merge-to-the-grid; with one batch per epoch (``num_batches = 1``) the scheme is the Gaussian mechanism
    and ``lower`` is its certified lower end. ``estimate`` is ``upper`` (the number to publish).

    Notes
    -----
    Shuffled fixed batches: each epoch a fresh random permutation cut into ``t`` batches of ``b = n/t``.

    Neighbouring as in Chua et al. 2024 ("How private are DP-SGD implementations?",
    arXiv 2403.17673): one record is replaced by a record whose clipped gradient is
    0 ("zero-out"), so the dataset size and the batching stay fixed and a step's
    sensitivity is 1, as for Poisson sampling under add/remove.

    **Upper bound (no amplification).** For a fixed permutation exactly one batch
    holds the differing record, whose clipped gradient changes by at most 1 in L2
    norm: the epoch is the Gaussian mechanism with ``mu = 1 / sigma`` in one
    (adaptively chosen) step. The permutation is independent of the data and the
    same under both datasets, so by joint convexity of the hockey-stick divergence
    the shuffled epoch is no worse, and ``E`` epochs are ``sqrt(E) / sigma``-GDP
    (Dong, Roth, Su 2022, Cor. 3.3). No tighter *certified* upper bound for
    shuffled DP-SGD is known (Chua et al. 2403.17673; "Scalable DP-SGD: shuffling
    vs. Poisson subsampling", arXiv 2411.04205): accounting shuffled training with
    Poisson's epsilon is not justified by any theorem.

    **Lower bound (Chua et al. 2403.17673, ABLQ_S).** One coordinate, every other
    record with gradient ``-1``; the target has gradient ``+1`` in one dataset and
    ``0`` in the other. Every batch sums to ``-b`` except the target's, which sums to
    ``-b + 2`` or ``-b + 1``; after the public shift by ``b`` the epoch's pair is
    ``P = (1/t) sum_i N(2 e_i, sigma^2 I)`` against ``Q = (1/t) sum_i N(e_i, sigma^2 I)``
    (and the reverse). Like Chua et al. we bound its hockey-stick divergence through
    the post-processing ``max_i x_i`` (a garbling, so still a lower bound), composed
    over epochs, both directions, certified from below by merge-to-the-grid
    (``allocation.max_statistic_pld``).
    """
    check_positive("noise_multiplier", noise_multiplier)
    t = check_count("num_batches", num_batches)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    up = (
        ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
        .compose(Gaussian(noise_multiplier=noise_multiplier), epochs)
        .epsilon(delta)
    )
    s = noise_multiplier
    h0 = min(0.01, eps_error or 0.01)
    if t == 1:
        # one batch per epoch: every epoch is the Gaussian step itself (the pair with the target's gradient
        # +1 against 0 and every other record's 0 attains it), so the Gaussian's certified lower end holds
        lower = up.lower
    else:
        lower = max(lower_bound_epsilon(_max_statistic_fn(s, t, 2.0, 1.0, r), epochs, delta, h0) for r in (False, True))
    lower = min(lower, up.upper)
    details: dict[str, Any] = {
        "sampling": f"shuffled fixed batches, {t} per epoch, zero-out neighbouring (Chua et al. 2403.17673)",
        "upper": f"no amplification: {math.sqrt(epochs) / s:.6g}-GDP (joint convexity over permutations; no tighter "
        "certified bound is known for shuffling)",
        "lower": "Chua et al. 2403.17673 attack pair MoG(2) vs MoG(1) seen through max_i x_i (a post-processing), "
        "both directions, certified from below by merge-to-the-grid",
        "upper_interval": [up.lower, up.upper],
    }
    return Bounds(lower, up.upper, up.upper, "epsilon", "bound", details)


# --------------------------------------------------------------------------- truncated Poisson
def truncated_poisson_epsilon(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    dataset_size: int,
    max_batch_size: int,
    steps: int,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of ``steps`` truncated-Poisson DP-SGD steps (add/remove).

    ``upper``: the smaller of two certified upper bounds (``tightdp.mechanisms.truncated``): the revealed-S
    pair and Ganesh 2025's pair (2508.15089, as dp-accounting 0.6.0 builds it), each composed by dominance.
    ``lower``: the larger of two attained pairs' certified lower ends:

    * every other gradient 0: the Poisson-subsampled Gaussian at the kept probability ``q_eff``;
    * one-dimensional gradients, ``-1`` for every other record and ``+1`` for the target. Given
      ``X >= b`` (probability ``p_T``) the batch sums to ``-b`` without the target and to ``-b + 2`` with it
      (probability ``q_X = q b / (X + 1)``): averaged over ``X``, the pair given the flag ``X >= b`` is exactly
      the Poisson-subsampled Gaussian at ``q_T = E[q_X | X >= b]`` with shift 2. Both data sets share the
      flag's law, so over ``k`` steps ``P^k(E) - e^eps Q^k(E) >= p_T^k (P_1^k(E) - e^eps Q_1^k(E)) -
      e^eps (1 - p_T^k)``: ``delta(eps) >= p_T^k delta_1(eps) - e^eps (1 - p_T^k)``. The lower end is then
      that pair's certified lower end at ``delta' = (delta + e^upper (1 - p_T^k)) / p_T^k`` (``e^eps <=
      e^upper`` below the upper end). It counts where the batch is almost always cut (``n q`` well above
      ``b``), where the first pair's shift 1 is far from the truth's shift 2.

    ``details["gap"]`` states ``upper - lower``.
    """
    check_positive("noise_multiplier", noise_multiplier)
    steps = check_count("steps", steps)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    g = Gaussian(noise_multiplier=noise_multiplier)
    mech = TruncatedPoissonSampled(
        mechanism=g, sampling_rate=sampling_rate, dataset_size=dataset_size, max_batch_size=max_batch_size
    )
    ganesh = TruncatedPoissonSampled(
        mechanism=g,
        sampling_rate=mech.sampling_rate,
        dataset_size=mech.dataset_size,
        max_batch_size=mech.max_batch_size,
        upper_pair="ganesh",
    )
    ups: dict[str, Bounds | PrecisionError] = {}
    for name, m in (("revealed-S pair", mech), ("Ganesh's pair", ganesh)):
        try:
            ups[name] = allocation_accountant(eps_error=eps_error, rel_error=rel_error).compose(m, steps).epsilon(delta)
        except PrecisionError as exc:
            ups[name] = exc
    done = {k: v for k, v in ups.items() if isinstance(v, Bounds)}
    if not done:
        raise next(v for v in ups.values() if isinstance(v, PrecisionError))
    best = min(done, key=lambda k: done[k].upper)
    up = done[best]
    p_t, q_t = mech.truncation()
    cut_lower = _cut_lower(g, mech, steps, delta, up.upper, eps_error, rel_error)
    lower = min(max(up.lower, cut_lower), up.upper)
    q_eff = mech.kept_probability()
    details: dict[str, Any] = {
        "sampling": f"truncated Poisson: rate {mech.sampling_rate:g}, batches cut to {mech.max_batch_size} of "
        f"{mech.dataset_size}",
        "upper": f"the smaller of two certified upper bounds: {best} (revealed-S: mixture over the other sampled "
        f"records of Poisson-subsampled Gaussians; Ganesh 2025: p_T = {p_t:.4g} weight on replace-one, "
        f"q_T = {q_t:.4g}, sigma/2)",
        "upper_bounds": {k: (v.upper if isinstance(v, Bounds) else f"refused: {v}") for k, v in ups.items()},
        "upper_interval": [float(up.details.get("dominating_pair_lower", up.lower)), up.upper],
        **(
            {
                "ganesh_interval": [
                    float(done["Ganesh's pair"].details.get("dominating_pair_lower", done["Ganesh's pair"].lower)),
                    done["Ganesh's pair"].upper,
                ]
            }
            if "Ganesh's pair" in done
            else {}
        ),
        "lower": f"the larger of two attained pairs' certified lower ends: all other gradients 0 (Poisson-subsampled "
        f"Gaussian at q_eff = {q_eff:.6g}: {up.lower:.6g}) and other gradients -1, given a cut batch "
        f"(Poisson at q_T with shift 2, weight p_T^steps: {cut_lower:.6g})",
        "gap": f"{up.upper - lower:.4g}: the distance between the best certified lower end (an attained pair) and "
        "the best certified upper bound; the truth lies between",
        "upper_details": dict(up.details),
    }
    return Bounds(lower, min(max(up.estimate, lower), up.upper), up.upper, "epsilon", "bound", details)


def _cut_lower(
    g: Gaussian,
    mech: TruncatedPoissonSampled,
    steps: int,
    delta: float,
    upper: float,
    eps_error: float | None,
    rel_error: float | None,
) -> float:
    """The certified lower end of the "cut batch" attained pair (``truncated_poisson_epsilon``), or 0."""
    from scipy import stats  # lazily (import cost)

    n, q, b = mech.dataset_size, mech.sampling_rate, mech.max_batch_size
    p_t, q_t = mech.truncation()
    if p_t <= 0.0 or q_t <= 0.0 or not math.isfinite(upper) or upper > 700.0:
        return 0.0
    # pi = P(X < b) rounded up; w = (1 - pi)^k rounded down and miss = 1 - (1 - pi)^k rounded up
    pi_up = min(1.0, float(stats.binom.cdf(b - 1, n - 1, q)) * (1.0 + 1e-9) + 1e-300) if n > 1 else 1.0
    if pi_up >= 1.0:
        return 0.0
    log_w = steps * math.log1p(-pi_up)
    w = math.exp(log_w) * (1.0 - 1e-14)
    miss = -math.expm1(log_w) * (1.0 + 1e-14)
    if w <= 0.0:
        return 0.0
    target = (delta + math.exp(upper) * miss) / w * (1.0 + 1e-14)
    if not target < 0.5:
        return 0.0
    pair = PoissonSampled(
        mechanism=Gaussian(noise_multiplier=g.noise_multiplier / 2.0, sensitivity=g.sensitivity),
        sampling_rate=min(1.0, q_t * (1.0 - 1e-9)),
    )
    try:
        low = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(pair, steps).epsilon(target)
    except PrecisionError:
        return 0.0
    return min(float(low.lower), upper)
