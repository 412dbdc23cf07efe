"""Accounting for the batch sampling people actually run: random allocation (balls and bins),
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

from ._allocation import allocation_accountant, allocation_epsilon, cyclic_allocation_epsilon
from ._shuffle import shuffle_epsilon
from ._truncated import truncated_poisson_epsilon

__all__ = [
    "allocation_accountant",
    "allocation_epsilon",
    "cyclic_allocation_epsilon",
    "shuffle_epsilon",
    "truncated_poisson_epsilon",
]
