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
from typing import Any

from ._accuracy import check_accuracy
from ._validation import check_count, check_delta, check_positive
from .accountants.connect_dots import ConnectDotsAccountant
from .bounds import Bounds
from .errors import PrecisionError
from .mechanisms.allocation import _WIDE_SIGMA, RandomAllocation, lower_bound_epsilon, max_statistic_pld
from .mechanisms.basic import Gaussian
from .mechanisms.subsampled import PoissonSampled
from .mechanisms.truncated import TruncatedPoissonSampled, kept_probability

__all__ = ["allocation_accountant", "allocation_epsilon", "shuffle_epsilon", "truncated_poisson_epsilon"]


# --------------------------------------------------------------------------- random allocation
def allocation_accountant(*, eps_error: float | None = None, rel_error: float | None = None):
    """A fresh accountant that composes ``RandomAllocation`` epochs with certified upper and lower bounds:
    the default connect-dots accountant, which uses ``AllocationLoss``'s own dominating / dominated pairs
    (``tightdp.pld.dominance.own_pairs``) and mixes them with any other mechanism."""
    return ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)


def _wide_bounds(sigma: float, t: int, epochs: int, delta: float, eps_error: float | None,
                 rel_error: float | None, reason: str):
    """A certified but wide interval for 1-of-``t`` allocation when the lattice realisation cannot answer
    (tiny noise or delta): ``upper`` without amplification (for every allocation the epoch is one Gaussian
    step of sensitivity 1, so by joint convexity ``sqrt(E)/sigma``-GDP), ``lower`` from the post-processing
    ``max_i x_i`` (``max_statistic_pld``, both directions)."""
    up = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(
        Gaussian(noise_multiplier=sigma), epochs).epsilon(delta)
    try:
        lower = max(lower_bound_epsilon(lambda h, r=r: max_statistic_pld(sigma, t, h, 1.0, 0.0, r), epochs, delta,
                                        min(0.01, eps_error or 0.01)) for r in (False, True))
    except PrecisionError:
        lower = 0.0
    lower = min(lower, up.upper)
    return Bounds(lower, up.upper, up.upper, "epsilon", "bound", {
        "sampling": f"random allocation, 1 of {t} steps per epoch",
        "upper": f"no amplification: {math.sqrt(epochs) / sigma:.6g}-GDP (joint convexity over allocations)",
        "lower": "post-processing max_i x_i of the epoch (certified from below)",
        "note": f"wide interval: the exact realisation could not answer ({reason})"})


def allocation_epsilon(*, noise_multiplier: float, num_steps: int, epochs: int, delta: float,
                       num_selected: int = 1, eps_error: float | None = None, rel_error: float | None = None):
    """Certified bounds on epsilon of ``epochs`` epochs of random allocation (each record in exactly
    ``num_selected`` of ``num_steps`` steps per epoch; Gaussian noise ``noise_multiplier``, unit
    sensitivity; add/remove neighbouring).

    ``k = 1`` (balls and bins; Feldman & Shenfeld 2602.17284's PLD realisation, certified by
    dominance, see ``tightdp.mechanisms.allocation``) and ``k = t`` (the Gaussian mechanism composed
    ``t`` times): both ends certified at the accuracy asked for (``tightdp._accuracy``: relative 1e-3
    by default, ``eps_error`` alone absolute). ``1 < k < t``: ``upper`` is certified through the k-to-1
    reduction of Feldman & Shenfeld 2502.08202 and ``lower`` through the larger of the post-processings
    ``sum_i x_i`` (Gaussian) and ``max_i x_i`` (``max_statistic_pld(shifted=k)``): valid, loose; ``details``
    says so.
    """
    check_positive("noise_multiplier", noise_multiplier)
    num_steps = check_count("num_steps", num_steps)
    num_selected = check_count("num_selected", num_selected)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    mech = RandomAllocation(mechanism=Gaussian(noise_multiplier=noise_multiplier), num_steps=num_steps,
                            num_selected=num_selected)
    k, t = num_selected, num_steps
    if k == t or (k == 1 and noise_multiplier >= _WIDE_SIGMA):
        try:
            out = allocation_accountant(eps_error=eps_error, rel_error=rel_error).compose(mech, epochs).epsilon(delta)
        except PrecisionError as exc:
            return _wide_bounds(noise_multiplier, t, epochs, delta, eps_error, rel_error, str(exc))
        return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound",
                      {**dict(out.details), "sampling": f"random allocation, {k} of {t} steps per epoch",
                       "method": "dominating / dominated pairs (exact PLD realisation, 2602.17284)"
                       if k == 1 else "closed form: k = t is the Gaussian mechanism composed t times"})
    if k == 1:
        return _wide_bounds(noise_multiplier, t, epochs, delta, eps_error, rel_error,
                            f"noise multiplier below {_WIDE_SIGMA}: the likelihood-ratio lattice would be too long")
    acc = allocation_accountant(eps_error=eps_error, rel_error=rel_error)
    for steps, count in mech.blocks():
        block = RandomAllocation(mechanism=Gaussian(noise_multiplier=noise_multiplier), num_steps=steps)
        acc.compose(block, count * epochs)
    up = acc.epsilon(delta)
    lo_mech = Gaussian(noise_multiplier=noise_multiplier * math.sqrt(t) / k)
    lo = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(lo_mech, epochs).epsilon(delta)
    # the post-processing max_i x_i: P(max <= m) = Phi((m - 1)/s)^k Phi(m/s)^(t-k) for every k-subset (both
    # directions, certified from below by merge-to-the-grid); better than sum_i x_i for small k and noise
    try:
        by_max = max(lower_bound_epsilon(lambda h, r=r: max_statistic_pld(noise_multiplier, t, h, 1.0, 0.0, r,
                                                                          shifted=k),
                                         epochs, delta, min(0.01, eps_error or 0.01)) for r in (False, True))
    except PrecisionError:
        by_max = 0.0
    lower = min(max(lo.lower, by_max), up.upper)
    details: dict[str, Any] = {
        "sampling": f"random allocation, {k} of {t} steps per epoch",
        "upper": "composition of 1-of-floor/ceil(t/k) allocations (Feldman & Shenfeld 2502.08202, k-to-1 "
                 "reduction), certified",
        "lower": f"the larger of two post-processings, each certified: sum_i x_i (Gaussian mu = k / (sigma sqrt t) "
                 f"= {k / (noise_multiplier * math.sqrt(t)):.4g} per epoch: {lo.lower:.6g}) and max_i x_i "
                 f"({by_max:.6g}); loose (no tight lower bound implemented for 1 < k < t)",
        "upper_details": dict(up.details)}
    return Bounds(lower, min(max(up.estimate, lower), up.upper), up.upper, "epsilon", "bound", details)


# --------------------------------------------------------------------------- shuffling
def shuffle_epsilon(*, noise_multiplier: float, num_batches: int, epochs: int, delta: float,
                    eps_error: float | None = None, rel_error: float | None = None) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of ``epochs`` shuffled epochs of ``num_batches`` steps
    ("zero-out" neighbouring of Chua et al. 2403.17673; ``tightdp.mechanisms.shuffle`` states both theorems).

    ``upper``: the Gaussian bound without amplification, ``sqrt(epochs)/sigma``-GDP (joint convexity over
    permutations; Dong, Roth, Su 2022 Cor. 3.3); no tighter certified bound for shuffling is known.
    ``lower``: Chua et al.'s attack pair (through ``max_i x_i``) certified from below by
    merge-to-the-grid. ``estimate`` is ``upper`` (the number to publish).
    """
    check_positive("noise_multiplier", noise_multiplier)
    t = check_count("num_batches", num_batches)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    up = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(
        Gaussian(noise_multiplier=noise_multiplier), epochs).epsilon(delta)
    s = noise_multiplier
    h0 = min(0.01, eps_error or 0.01)
    lower = max(lower_bound_epsilon(lambda h, r=r: max_statistic_pld(s, t, h, 2.0, 1.0, r), epochs, delta, h0)
                for r in (False, True))
    lower = min(lower, up.upper)
    details: dict[str, Any] = {
        "sampling": f"shuffled fixed batches, {t} per epoch, zero-out neighbouring (Chua et al. 2403.17673)",
        "upper": f"no amplification: {math.sqrt(epochs) / s:.6g}-GDP (joint convexity over permutations; no tighter "
                 "certified bound is known for shuffling)",
        "lower": "Chua et al. 2403.17673 attack pair MoG(2) vs MoG(1) seen through max_i x_i (a post-processing), "
                 "both directions, certified from below by merge-to-the-grid",
        "upper_interval": [up.lower, up.upper]}
    return Bounds(lower, up.upper, up.upper, "epsilon", "bound", details)


# --------------------------------------------------------------------------- truncated Poisson
def truncated_poisson_epsilon(*, noise_multiplier: float, sampling_rate: float, dataset_size: int,
                              max_batch_size: int, steps: int, delta: float, eps_error: float | None = None,
                              rel_error: float | None = None):
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
    mech = TruncatedPoissonSampled(mechanism=g, sampling_rate=sampling_rate, dataset_size=dataset_size,
                                   max_batch_size=max_batch_size)
    ganesh = TruncatedPoissonSampled(mechanism=g, sampling_rate=mech.sampling_rate,
                                     dataset_size=mech.dataset_size, max_batch_size=mech.max_batch_size,
                                     upper_pair="ganesh")
    ups = {}
    for name, m in (("revealed-S pair", mech), ("Ganesh's pair", ganesh)):
        try:
            ups[name] = allocation_accountant(eps_error=eps_error, rel_error=rel_error).compose(m, steps).epsilon(delta)
        except PrecisionError as exc:
            ups[name] = exc
    done = {k: v for k, v in ups.items() if isinstance(v, Bounds)}
    if not done:
        raise next(iter(ups.values()))  # type: ignore[misc]
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
        **({"ganesh_interval": [float(done["Ganesh's pair"].details.get("dominating_pair_lower",
                                                                        done["Ganesh's pair"].lower)),
                                done["Ganesh's pair"].upper]} if "Ganesh's pair" in done else {}),
        "lower": f"the larger of two attained pairs' certified lower ends: all other gradients 0 (Poisson-subsampled "
                 f"Gaussian at q_eff = {q_eff:.6g}: {up.lower:.6g}) and other gradients -1, given a cut batch "
                 f"(Poisson at q_T with shift 2, weight p_T^steps: {cut_lower:.6g})",
        "gap": f"{up.upper - lower:.4g}: the distance between the best certified lower end (an attained pair) and "
               "the best certified upper bound; the truth lies between",
        "upper_details": dict(up.details)}
    return Bounds(lower, min(max(up.estimate, lower), up.upper), up.upper, "epsilon", "bound", details)


def _cut_lower(g: Gaussian, mech: TruncatedPoissonSampled, steps: int, delta: float, upper: float,
               eps_error: float | None, rel_error: float | None) -> float:
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
    pair = PoissonSampled(mechanism=Gaussian(noise_multiplier=g.noise_multiplier / 2.0, sensitivity=g.sensitivity),
                          sampling_rate=min(1.0, q_t * (1.0 - 1e-9)))
    try:
        low = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(pair, steps).epsilon(target)
    except PrecisionError:
        return 0.0
    return min(low.lower, upper)
