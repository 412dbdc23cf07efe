"""Shuffled fixed batches (Chua et al. 2024, arXiv 2403.17673): ``shuffle_epsilon``."""

from __future__ import annotations

import math
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..mechanisms.allocation import lower_bound_epsilon
from ..mechanisms.basic import Gaussian
from ._allocation import _max_statistic_fn


def shuffle_epsilon(
    *,
    noise_multiplier: float,
    steps_per_epoch: int,
    epochs: int,
    delta: float,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of ``epochs`` shuffled epochs of ``steps_per_epoch`` steps
    ("zero-out" neighbouring of Chua et al. 2403.17673; both theorems in the Notes).

    ``upper``: the Gaussian bound without amplification, ``sqrt(epochs)/sigma``-GDP (joint convexity over
    permutations; Dong, Roth, Su 2022 Cor. 3.3); no tighter certified bound for shuffling is known.
    ``lower``: Chua et al.'s attack pair (through ``max_i x_i``) certified from below by
    merge-to-the-grid; with one batch per epoch (``steps_per_epoch = 1``) the scheme is the Gaussian mechanism
    and ``lower`` is its certified lower end. ``estimate`` is ``upper`` (the number to publish).

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit sensitivity, positive.
    steps_per_epoch : int
        Batches (steps) per epoch ``t``, a positive integer.
    epochs : int
        Number of epochs, a positive integer.
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
        If the Gaussian upper bound cannot be certified at the accuracy asked for.

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
    t = check_count("steps_per_epoch", steps_per_epoch)
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
