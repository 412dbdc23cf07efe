"""Individual (per-example) privacy accounting and privacy filters (Koskela et al. 2023: Koskela, Tobaben, Honkela, ICLR 2023).

* ``GDPFilter``: fully adaptive GDP filter and odometer (Koskela et al. 2023, Thm 11, eq. (4.1), App. C).
* ``IndividualAccountant``: per-example ledger for DP-SGD / DP-GD with certified
  per-example epsilons (per-example GDP for DP-GD; sigma-grid buckets, dominating
  bucket PLDs, pre-computed FFTs and Plancherel for DP-SGD, Koskela et al. 2023, App. D) and the
  individual filter (Koskela et al. 2023, Alg. 1, Thm 12; Sec. 5). Beside the PLD intervals: per-example RDP
  (certified upper bounds, the RDP baseline of Koskela et al. 2023, Fig. 1) and per-example mu-GDP (exact for DP-GD,
  the fitted curve of App. D.2 for DP-SGD), ``epsilons(delta, method="pld"|"rdp"|"gdp")``; filters
  ``active(..., rule="pld"|"paper"|"rdp")`` each documented with what it promises; the paper's
  sigma-grid (``sigma_grid="paper"``, App. D.2) beside the uniform one.
* ``gdp_mu(epsilon=, delta=)``, ``gdp_epsilon(mu=, delta=)``, ``gdp_delta(mu=, epsilon=)``: the mu-GDP
  conversions (Koskela et al. 2023, eq. (C.2)), keyword-only, on the one certified curve of ``tightdp._gdp_math``.
* ``tightdp.individual.rdp``: the per-example RDP curves and Feldman and Zrnic's individual RDP filter.
* ``ShardedLedger``: the same ledger sharded by example (data-parallel recording, crash-safe
  per-shard saves, queries on a dask cluster bit-identical to the in-memory ones).
"""

from .accountant import IndividualAccountant
from .gdp import GDPFilter, gdp_delta, gdp_epsilon, gdp_mu
from .sharded import ShardedLedger

__all__ = ["GDPFilter", "IndividualAccountant", "ShardedLedger", "gdp_delta", "gdp_epsilon", "gdp_mu"]
