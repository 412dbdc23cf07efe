"""Poisson batches cut to a maximum size (Ganesh 2025, arXiv 2508.15089): ``truncated_poisson_epsilon``."""

from __future__ import annotations

import math
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampled import PoissonSampled
from ..mechanisms.truncated import TruncatedPoissonSampled
from ._allocation import allocation_accountant


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

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit sensitivity, positive.
    sampling_rate : float
        Poisson sampling rate ``q`` in ``(0, 1]``.
    dataset_size : int
        Records ``n`` of the data set, a positive integer.
    max_batch_size : int
        Batch cap ``b``, a positive integer at most ``dataset_size``.
    steps : int
        Number of steps, a positive integer.
    delta : float
        Target delta in ``(0, 1)``.
    eps_error : float or None, default None
        Absolute accuracy asked of epsilon, positive (``tightdp._accuracy``).
    rel_error : float or None, default None
        Relative accuracy asked of epsilon, positive; both ``None``: relative 1e-3.

    Returns
    -------
    Bounds
        ``lower <= estimate <= upper`` on epsilon, with ``details`` saying what each end rests on.

    Raises
    ------
    ValueError
        If an argument lies outside its domain.
    PrecisionError
        If neither upper pair can be certified at the accuracy asked for.

    References
    ----------
    Ganesh 2025, arXiv 2508.15089; dp_accounting 0.6.0's ``TruncatedSubsampledGaussianDpEvent``.
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
