"""Shuffled fixed batches: each epoch a fresh random permutation cut into ``t`` batches of ``b = n/t``.

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

The accounting function ``shuffle_epsilon`` runs accountants, so it lives in ``tightdp.schemes``; this
module keeps the theory and re-exports it (``tightdp.mechanisms.shuffle.shuffle_epsilon`` keeps working).
"""

from __future__ import annotations

from ..schemes import shuffle_epsilon

__all__ = ["shuffle_epsilon"]
