"""Shuffled fixed batches: each epoch a fresh random permutation cut into ``t`` batches of ``b = n/t``.

Substitute ("replace one") neighbouring: the dataset size and the batch size are
fixed, so add/remove is not defined without changing the batching.

**Upper bound (no amplification).** For a fixed permutation exactly one batch
holds the differing record, whose clipped gradient changes by at most 2 in L2
norm, so the epoch is the Gaussian mechanism with ``mu = 2 / sigma`` in one
(adaptively chosen) step; the permutation is independent of the data and the
same under both datasets, so by joint convexity of the hockey-stick divergence
the shuffled epoch is no worse, and ``E`` epochs are ``2 sqrt(E) / sigma``-GDP
(Dong, Roth, Su 2022, Cor. 3.3). No tighter *certified* upper bound for
shuffled multi-epoch DP-SGD is known (Chua et al. 2024, "How private are DP-SGD
implementations?", arXiv 2403.17673, Sec. 1 and 5; "Scalable DP-SGD: shuffling
vs. Poisson subsampling", arXiv 2411.04205): accounting shuffled training with
Poisson's epsilon is not justified by any theorem.

**Lower bound (Chua et al. 2403.17673, the ABLQ_S lower bound).** One
coordinate, every other record with gradient ``-1`` and the target ``+1``
(dataset ``x``) against ``-1`` (dataset ``x'``): every batch sums to ``-b``
except the target's, which sums to ``-b + 2`` under ``x``. After the public
shift by ``b``, the epoch's pair is ``(1/t) sum_i N(2 e_i, sigma^2 I)`` against
``N(0, sigma^2 I)``: random allocation of one out of ``t`` steps with
sensitivity 2, in both directions (``x`` and ``x'`` are each other's
neighbours). Its certified lower end (``RandomAllocation``'s dominated pair) is
a lower bound on epsilon for shuffled batches. For ``sigma / 2 < 0.7`` its
exact realisation needs a very long likelihood-ratio lattice, and the attack
pair is bounded through its post-processing ``max_i x_i`` instead (still a
certified lower bound, looser over many epochs).
"""

from __future__ import annotations

import math
from typing import Any

from .._validation import check_count, check_delta, check_eps_error, check_positive
from ..bounds import Bounds
from .basic import Gaussian

__all__ = ["shuffle_epsilon"]

#: below this noise per unit sensitivity the attack pair is bounded through max_i x_i instead
_EXACT_SIGMA = 0.7


def shuffle_epsilon(*, noise_multiplier: float, num_batches: int, epochs: int, delta: float,
                    eps_error: float = 0.01) -> Bounds:
    """Certified ``[lower, upper]`` on epsilon of ``epochs`` shuffled epochs of ``num_batches`` steps
    (substitute neighbouring; see the module docstring for both theorems).

    ``lower`` is Chua et al.'s attack pair certified from below; ``upper`` is the
    Gaussian bound without amplification; ``estimate`` is ``upper`` (the number to
    publish). ``details["lower_interval"]`` brackets the attack pair's own epsilon.
    """
    from ..accountants.connect_dots import ConnectDotsAccountant
    from .allocation import RandomAllocation, allocation_accountant, lower_bound_epsilon, max_statistic_pld
    check_positive("noise_multiplier", noise_multiplier)
    t = check_count("num_batches", num_batches)
    epochs = check_count("epochs", epochs)
    delta = check_delta("delta", delta)
    eps_error = check_eps_error("eps_error", eps_error)
    up = ConnectDotsAccountant(eps_error=eps_error).compose(
        Gaussian(noise_multiplier=noise_multiplier, sensitivity=2.0), epochs).epsilon(delta)
    sigma = noise_multiplier / 2.0  # the attack pair: random allocation with sensitivity 2
    details: dict[str, Any] = {
        "sampling": f"shuffled fixed batches, {t} per epoch, substitute neighbouring",
        "upper": f"no amplification: {2.0 * math.sqrt(epochs) / noise_multiplier:.6g}-GDP (joint convexity over "
                 "permutations; no tighter certified bound is known for shuffling)",
        "upper_interval": [up.lower, up.upper]}
    if sigma >= _EXACT_SIGMA or t == 1:
        attack = RandomAllocation(mechanism=Gaussian(noise_multiplier=noise_multiplier, sensitivity=2.0),
                                  num_steps=t)
        lo = allocation_accountant(eps_error=eps_error).compose(attack, epochs).epsilon(delta)
        lower = lo.lower
        details["lower"] = ("Chua et al. 2403.17673 attack pair (random allocation with sensitivity 2), its "
                            "exact realisation certified from below")
        details["lower_interval"] = [lo.lower, lo.upper]
    else:
        # below _EXACT_SIGMA the likelihood-ratio lattice of the exact realisation gets too long; the
        # attack pair's post-processing max_i x_i still gives a certified (looser) lower bound
        h0 = min(0.01, eps_error)
        lower = lower_bound_epsilon(lambda h: max_statistic_pld(sigma, t, h), epochs, delta, h0)
        details["lower"] = ("Chua et al. 2403.17673 attack pair seen through max_i x_i (a post-processing, so a "
                            f"certified lower bound; the exact realisation needs noise/2 >= {_EXACT_SIGMA})")
    lower = min(lower, up.upper)
    return Bounds(lower, up.upper, up.upper, "epsilon", "bound", details)
