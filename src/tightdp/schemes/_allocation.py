"""Random allocation of ``k`` of ``t`` steps per epoch: a fresh bin every epoch (``allocation_epsilon``,
``allocation_accountant``) and one bin for the whole run (``cyclic_allocation_epsilon``).

The theory is in ``tightdp.mechanisms.allocation``; ``tightdp.schemes`` says what every answer means.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms.allocation import RandomAllocation, lower_bound_epsilon, max_statistic_pld, realisable
from ..mechanisms.basic import Gaussian

if TYPE_CHECKING:
    from ..pld import DiscretisedLoss

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


def allocation_accountant(
    *, eps_error: float | None = None, rel_error: float | None = None, max_refinements: int | None = None
) -> ConnectDotsAccountant:
    """A fresh accountant that composes ``RandomAllocation`` epochs with certified upper and lower bounds:
    the default connect-dots accountant, which uses ``AllocationLoss``'s own dominating / dominated pairs
    (``tightdp.pld.dominance.own_pairs``) and mixes them with any other mechanism.

    Parameters
    ----------
    eps_error : float or None, default None
        Absolute accuracy asked of epsilon, positive (``tightdp._accuracy``).
    rel_error : float or None, default None
        Relative accuracy asked of epsilon, positive; both ``None``: relative 1e-3.
    max_refinements : int or None, default None
        The most refinement passes after the first (``ConnectDotsAccountant``'s option; ``None``: its default).

    Returns
    -------
    ConnectDotsAccountant
        An empty accountant.

    Raises
    ------
    ValueError
        If an accuracy is not positive or ``max_refinements`` is out of its domain.
    """
    passes = {} if max_refinements is None else {"max_refinements": max_refinements}
    return ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error, **passes)


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


#: a realisation's interval wider than this share of its upper end is intersected with the wide bounds
_WIDE_CHECK = 0.05
#: below this delta the realisation gets two passes (``allocation_epsilon``)
_TINY_DELTA = 1e-10

_LESS_NOISE = (0.97, 0.93, 0.88, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
_MORE_NOISE = (1.1, 1.25, 1.5, 2.0, 3.0)
#: below this noise a realisation at tiny delta takes seconds and rarely answers where the asked one did not
_OTHER_NOISE_MIN_SIGMA = 1.5


def _realised(
    sigma: float, t: int, epochs: int, delta: float, eps_error: float | None, rel_error: float | None
) -> Bounds | None:
    mech = RandomAllocation(mechanism=Gaussian(noise_multiplier=sigma), steps_per_epoch=t)
    try:
        return allocation_accountant(eps_error=eps_error, rel_error=rel_error).compose(mech, epochs).epsilon(delta)
    except PrecisionError:
        return None


def _with_other_noise(
    wide: Bounds,
    sigma: float,
    t: int,
    epochs: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    """When the realisation cannot answer at ``sigma`` (its floating-point error exceeds ``delta`` for some
    noise levels), ends from realisations at other noise levels. The pair at a noise ``s2 > s1`` is the pair at
    ``s1`` post-processed by adding independent ``N(0, s2^2 - s1^2)`` to every coordinate (one channel for both
    neighbours), so epsilon does not increase with the noise: the upper end of a realisation at ``sigma' <
    sigma`` and the lower end of one at ``sigma'' > sigma`` bound the run. ``wide`` is kept where better."""
    if sigma < _OTHER_NOISE_MIN_SIGMA:
        return wide
    upper, lower, notes = wide.upper, wide.lower, dict(wide.details)
    for factor in _LESS_NOISE:
        less = sigma * factor
        if less < _OTHER_NOISE_MIN_SIGMA:
            break
        out = _realised(less, t, epochs, delta, eps_error, rel_error)
        if out is not None:
            if out.upper < upper:
                upper = float(out.upper)
                notes["upper"] = (
                    f"the exact realisation at the smaller noise {less:.6g} (adding noise is a post-processing)"
                )
                notes["upper_noise"] = less
            break
    for factor in _MORE_NOISE:
        out = _realised(sigma * factor, t, epochs, delta, eps_error, rel_error)
        if out is not None:
            if out.lower > lower:
                lower = float(out.lower)
                notes["lower"] = (
                    f"the exact realisation at the larger noise {sigma * factor:.6g} (adding noise is a post-processing)"
                )
                notes["lower_noise"] = sigma * factor
            break
    lower = min(lower, upper)
    return Bounds(lower, min(max(wide.estimate, lower), upper), upper, "epsilon", "bound", notes)


def allocation_epsilon(
    *,
    noise_multiplier: float,
    steps_per_epoch: int,
    epochs: int,
    delta: float,
    num_selected: int = 1,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified bounds on epsilon of ``epochs`` epochs of random allocation (each record in exactly
    ``num_selected`` of ``steps_per_epoch`` steps per epoch; Gaussian noise ``noise_multiplier``, unit
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

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit sensitivity, positive.
    steps_per_epoch : int
        Steps per epoch ``t``, a positive integer at most 1,000,000.
    epochs : int
        Number of epochs, a positive integer.
    delta : float
        Target delta in ``(0, 1)``.
    num_selected : int, default 1
        Steps ``k`` each record joins per epoch, a positive integer at most ``steps_per_epoch``.
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
        If neither the lattice realisation nor the wide fallback can certify an interval.

    References
    ----------
    Feldman & Shenfeld 2026, arXiv 2602.17284 (``k = 1``); Feldman & Shenfeld 2025, arXiv 2502.08202 (the
    k-to-1 reduction); Chua et al. 2024, arXiv 2412.16802 (balls-and-bins sampling).
    """
    check_positive("noise_multiplier", noise_multiplier)
    steps_per_epoch = check_count("steps_per_epoch", steps_per_epoch)
    num_selected = check_count("num_selected", num_selected)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    mech = RandomAllocation(
        mechanism=Gaussian(noise_multiplier=noise_multiplier),
        steps_per_epoch=steps_per_epoch,
        num_selected=num_selected,
    )
    k, t = num_selected, steps_per_epoch
    if k == t or (k == 1 and realisable(noise_multiplier, t)):
        try:
            # below about 1e-10 the lattice sum's round-off can decide the width: two passes, then the wide bounds
            # (sigma 1, two steps, delta 1e-12: five passes cost 30 s and end at the wide bounds' interval)
            acc = allocation_accountant(
                eps_error=eps_error, rel_error=rel_error, max_refinements=1 if delta < _TINY_DELTA else None
            )
            out = acc.compose(mech, epochs).epsilon(delta)
        except PrecisionError as exc:
            wide = _wide_bounds(noise_multiplier, t, epochs, delta, eps_error, rel_error, str(exc))
            if k == t:
                return wide
            return _with_other_noise(wide, noise_multiplier, t, epochs, delta, eps_error, rel_error)
        lower, upper, extra = out.lower, out.upper, {}
        if k == 1 and upper - lower > _WIDE_CHECK * upper:
            # far from converged (small noise, many steps): the no-amplification upper end and the
            # max-statistic lower end are certified too, and may be the better ones
            wide = _wide_bounds(noise_multiplier, t, epochs, delta, eps_error, rel_error, "")
            if wide.upper < upper or wide.lower > lower:
                if max(lower, wide.lower) > min(upper, wide.upper):  # two certified intervals must meet
                    raise PrecisionError(
                        f"internal: the realisation [{lower:.6g}, {upper:.6g}] and the wide bounds "
                        f"[{wide.lower:.6g}, {wide.upper:.6g}] do not intersect"
                    )
                lower, upper = max(lower, wide.lower), min(upper, wide.upper)
                extra = {"intersected": "with no amplification (upper) and max_i x_i (lower), both certified"}
        return Bounds(
            lower,
            min(max(out.estimate, lower), upper),
            upper,
            "epsilon",
            "bound",
            {
                **dict(out.details),
                **extra,
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
            f"noise multiplier {noise_multiplier:.4g} at {t} steps per epoch: the likelihood-ratio lattice would be "
            "too long (realised from 0.5, or from 0.2 with at most 4096 steps per epoch)",
        )
    acc = allocation_accountant(eps_error=eps_error, rel_error=rel_error)
    for steps, count in mech.blocks():
        block = RandomAllocation(mechanism=Gaussian(noise_multiplier=noise_multiplier), steps_per_epoch=steps)
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
    This function therefore accounts ``RandomAllocation(Gaussian(sigma / sqrt(c)), steps_per_epoch=t)`` once,
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
            noise_multiplier=sigma, steps_per_epoch=t, epochs=1, delta=delta, eps_error=eps_error, rel_error=rel_error
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
