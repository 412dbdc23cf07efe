"""Privacy auditing next to the certified accounting: empirical epsilon lower bounds from canaries.

* ``epsilon_from_guesses`` / ``epsilon_one_run``: one-run guess counting (Steinke, Nasr, Jagielski 2023);
* ``epsilon_one_run_fdp`` / ``fdp_one_run_test``: f-DP one-run auditing (Mahloujifar, Melis, Chaudhuri
  2024) against the mu-GDP family, the (eps, delta) family or a certified ``TradeoffCurve``;
* ``epsilon_clopper_pearson``: multi-run Clopper-Pearson on TPR / FPR at a threshold chosen on a
  held-out split or among fixed thresholds with a Bonferroni correction;
* ``expected_audit`` / ``canaries_needed``: what an optimal attack on a correct implementation reaches
  with probability >= 1/2, from tightdp's certified trade-off curves;
* ``audit_verdict`` / ``audit_run`` / ``audit_section``: the empirical bound against the certified
  interval ("consistent", "too weak", "violates").
"""

from .expected import AUDIT_METHODS, ExpectedAudit, canaries_needed, expected_audit, run_curve
from .fdp import (
    FAMILIES,
    FdpTest,
    epsilon_fdp_from_guesses,
    epsilon_one_run_fdp,
    fdp_one_run_test,
    fdp_rejects,
    gdp_epsilon,
    gdp_mu_for,
)
from .multi_run import STRATEGIES, clopper_pearson_epsilon_at, epsilon_clopper_pearson
from .one_run import epsilon_from_guesses, epsilon_one_run, one_run_p_value
from .result import AuditBound
from .scores import CanaryScores, read_scores_csv
from .verdict import RUN_METHODS, VERDICTS, AuditVerdict, audit_run, audit_section, audit_verdict

__all__ = [
    # results and inputs
    "AuditBound",
    "CanaryScores",
    "read_scores_csv",
    # one-run guess counting (Steinke, Nasr, Jagielski 2023)
    "one_run_p_value",
    "epsilon_from_guesses",
    "epsilon_one_run",
    # f-DP one-run (Mahloujifar, Melis, Chaudhuri 2024)
    "FAMILIES",
    "FdpTest",
    "epsilon_fdp_from_guesses",
    "epsilon_one_run_fdp",
    "fdp_one_run_test",
    "fdp_rejects",
    "gdp_epsilon",
    "gdp_mu_for",
    # multi-run Clopper-Pearson
    "STRATEGIES",
    "clopper_pearson_epsilon_at",
    "epsilon_clopper_pearson",
    # what a correct implementation shows
    "AUDIT_METHODS",
    "ExpectedAudit",
    "canaries_needed",
    "expected_audit",
    "run_curve",
    # the verdict and the report's section
    "RUN_METHODS",
    "VERDICTS",
    "AuditVerdict",
    "audit_run",
    "audit_section",
    "audit_verdict",
]
