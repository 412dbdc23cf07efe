"""Multi-run auditing with Clopper-Pearson intervals (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021).

Each score comes from its own training run, the canary in (``in_scores``) or out (``out_scores``).
The attack says "in" when the score is at least a threshold ``t``. If the run is ``(eps, delta)``-DP
then at every ``t`` fixed in advance ``TPR <= e^eps FPR + delta`` (and, for the reverse rule,
``1 - FPR <= e^eps (1 - TPR) + delta``), so with exact one-sided Clopper-Pearson bounds, each at level
``beta / 2``, ``eps >= log((TPR_lower - delta) / FPR_upper)`` with probability ``>= 1 - beta``.

The threshold is chosen from the data, which the bound must pay for. Two corrections:

* ``"split"`` (default): a random fraction of the runs (``split_fraction``, default 1/2, chosen
  with ``seed``) picks the threshold with the best bound there; the other runs, independent of the
  choice, certify it at level ``beta``.
* ``"bonferroni"``: ``thresholds`` fixed before the audit; each is tested at ``beta / K`` (``K``
  thresholds, twice as many when ``one_sided`` is false) and the largest bound is returned.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .._types import ArrayLike, BoolArray, FloatArray
from .._validation import check_choice, check_count, check_real, check_real_array
from .result import AuditBound, check_beta
from .scores import CanaryScores

__all__ = ["STRATEGIES", "clopper_pearson_epsilon_at", "epsilon_clopper_pearson"]

STRATEGIES = ("split", "bonferroni")

MULTI_RUN_ASSUMPTIONS = (
    "every score comes from an independent training run (runs with the canary in, runs with it out)",
    "the neighbouring relation is add/remove of the canary, as in the accounting",
)


def _cp_upper(k: ArrayLike, n: int, level: float) -> FloatArray:
    """One-sided exact upper bound on a binomial proportion (``k`` successes of ``n``), level ``level``."""
    k = np.asarray(k)
    with np.errstate(invalid="ignore"):
        up = stats.beta.ppf(1.0 - level, k + 1, np.maximum(n - k, 1))
    out: FloatArray = np.where(k >= n, 1.0, np.minimum(1.0, up))
    return out


def _eps_from(tpr_lo: FloatArray, fpr_up: FloatArray, delta: float) -> FloatArray:
    """``log((tpr_lo - delta) / fpr_up)``, clipped at 0 (0 where it is undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log(tpr_lo - delta) - np.log(fpr_up)
    ok: BoolArray = (tpr_lo > delta) & (fpr_up > 0)
    return np.where(ok, np.maximum(e, 0.0), 0.0)


def _eps_at(scores: CanaryScores, thresholds: FloatArray, delta: float, level: float, one_sided: bool) -> FloatArray:
    """The Clopper-Pearson bound at each threshold, each at significance ``level`` (split in two)."""
    n_in, n_out = scores.in_scores.size, scores.out_scores.size
    tp, fp = scores.counts_at(thresholds)
    tpr_lo = 1.0 - _cp_upper(n_in - tp, n_in, level / 2)
    fpr_up = _cp_upper(fp, n_out, level / 2)
    e = _eps_from(tpr_lo, fpr_up, delta)
    if not one_sided:  # reverse rule: "out" when the score is at least t; TNR / FNR
        tnr_lo = 1.0 - _cp_upper(fp, n_out, level / 2)
        fnr_up = _cp_upper(n_in - tp, n_in, level / 2)
        e = np.maximum(e, _eps_from(tnr_lo, fnr_up, delta))
    return e


def clopper_pearson_epsilon_at(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    threshold: float,
    delta: float,
    beta: float = 0.05,
    one_sided: bool = True,
) -> AuditBound:
    """The Clopper-Pearson bound at one threshold fixed before the audit (no correction).

    Parameters
    ----------
    in_scores, out_scores : array_like
        One score per training run, from runs with the canary in / out (higher = more likely in).
    threshold : float
        The threshold of the rule "in when the score is at least ``threshold``" (infinities allowed).
    delta : float
        The delta of the claim, in [0, 1).
    beta : float, default 0.05
        One minus the confidence level, in (0, 1).
    one_sided : bool, default True
        ``False`` also tries the reverse rule (scores below the threshold are "in").

    Returns
    -------
    AuditBound
        The bound, with the counts at the threshold in ``details``.

    Raises
    ------
    ValueError
        Empty or non-finite scores, a NaN threshold, delta or beta out of range.

    References
    ----------
    Jagielski, Ullman, Oprea 2020, "Auditing differentially private machine learning"; Nasr et al. 2021,
    "Adversary instantiation: lower bounds for differentially private machine learning".
    """
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    t = check_real("threshold", threshold, allow_inf=True)
    d = check_real("delta", delta, low=0.0, low_open=False, high=1.0)
    b = check_beta(beta)
    e = float(_eps_at(scores, np.array([t]), d, b, one_sided)[0])
    tp, fp = scores.counts_at([t])
    return AuditBound(
        e,
        d,
        b,
        "multi-run Clopper-Pearson at a fixed threshold",
        {
            "threshold": t,
            "tp": int(tp[0]),
            "fp": int(fp[0]),
            "n_in": scores.in_scores.size,
            "n_out": scores.out_scores.size,
            "correction": "none (threshold fixed in advance)",
            "assumptions": list(MULTI_RUN_ASSUMPTIONS) + ["the threshold was fixed before the scores were seen"],
        },
    )


def _candidate_thresholds(scores: CanaryScores) -> FloatArray:
    """Every distinct score, in/out pooled."""
    out: FloatArray = np.unique(np.concatenate([scores.in_scores, scores.out_scores]))
    return out


def epsilon_clopper_pearson(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    delta: float,
    beta: float = 0.05,
    strategy: str = "split",
    thresholds: ArrayLike | None = None,
    split_fraction: float = 0.5,
    seed: int = 0,
    one_sided: bool = True,
) -> AuditBound:
    """The multi-run empirical lower bound on epsilon with Clopper-Pearson intervals (module docstring).

    Parameters
    ----------
    in_scores, out_scores : array_like
        One score per training run, from runs with the canary in / out (higher = more likely in).
    delta : float
        The delta of the claim, in [0, 1).
    beta : float
        One minus the confidence level, in (0, 1).
    strategy : {"split", "bonferroni"}
        How the threshold's choice is paid for (module docstring).
    thresholds : sequence of float, optional
        Required for ``"bonferroni"`` (fixed before the audit); for ``"split"`` the candidates (default:
        every distinct score of the selection part).
    split_fraction : float
        For ``"split"``: the fraction of the runs (of each kind) that chooses the threshold, in (0, 1).
    seed : int
        For ``"split"``: the random split.
    one_sided : bool
        ``False`` also tries the reverse rule (scores below the threshold are "in").

    Returns
    -------
    AuditBound
        The bound, with the threshold, its counts, the correction and the assumptions in ``details``.

    Raises
    ------
    ValueError
        Bad scores, delta, beta, strategy, a missing ``thresholds`` for ``"bonferroni"``, or a split that
        leaves a part without in or out runs.

    References
    ----------
    Jagielski, Ullman, Oprea 2020; Nasr et al. 2021 (Clopper-Pearson bounds on TPR and FPR).
    """
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    d = check_real("delta", delta, low=0.0, low_open=False, high=1.0)
    b = check_beta(beta)
    check_choice("strategy", strategy, STRATEGIES)
    cand = None if thresholds is None else check_real_array("thresholds", thresholds)
    if cand is not None and cand.size == 0:
        raise ValueError("thresholds must not be empty")
    assumptions = list(MULTI_RUN_ASSUMPTIONS)
    if strategy == "bonferroni":
        if cand is None:
            raise ValueError(
                "thresholds are required for strategy='bonferroni' (fixed before the audit; "
                "strategy='split' chooses one from the data)"
            )
        k = cand.size * (1 if one_sided else 2)
        e = _eps_at(scores, cand, d, b / k, one_sided)
        j = int(np.argmax(e))
        assumptions.append("the thresholds were fixed before the scores were seen")
        tp, fp = scores.counts_at(cand[j : j + 1])
        return AuditBound(
            float(e[j]),
            d,
            b,
            "multi-run Clopper-Pearson, Bonferroni over fixed thresholds",
            {
                "threshold": float(cand[j]),
                "tp": int(tp[0]),
                "fp": int(fp[0]),
                "n_in": scores.in_scores.size,
                "n_out": scores.out_scores.size,
                "correction": f"Bonferroni over {k} hypotheses ({cand.size} thresholds"
                f"{'' if one_sided else ', both rules'})",
                "assumptions": assumptions,
            },
        )
    frac = check_real("split_fraction", split_fraction, low=0.0, high=1.0)
    seed = check_count("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    ins, outs = rng.permutation(scores.in_scores), rng.permutation(scores.out_scores)
    ci, co = int(math.floor(ins.size * frac)), int(math.floor(outs.size * frac))
    if min(ci, co, ins.size - ci, outs.size - co) < 1:
        raise ValueError(
            f"split_fraction {frac:g} leaves a part without in or out runs ({ins.size} in, {outs.size} out)"
        )
    pick = CanaryScores(in_scores=ins[:ci], out_scores=outs[:co])
    cert = CanaryScores(in_scores=ins[ci:], out_scores=outs[co:])
    cands = _candidate_thresholds(pick) if cand is None else cand
    e_pick = _eps_at(pick, cands, d, b, one_sided)
    t = float(cands[int(np.argmax(e_pick))])
    e_cert = float(_eps_at(cert, np.array([t]), d, b, one_sided)[0])
    tp, fp = cert.counts_at([t])
    assumptions.append("the split was random and made before the scores were seen")
    return AuditBound(
        e_cert,
        d,
        b,
        "multi-run Clopper-Pearson, threshold chosen on a held-out split",
        {
            "threshold": t,
            "tp": int(tp[0]),
            "fp": int(fp[0]),
            "n_in": cert.in_scores.size,
            "n_out": cert.out_scores.size,
            "selection_runs": ci + co,
            "split_fraction": frac,
            "seed": seed,
            "correction": "held-out split (the certifying runs never saw the choice)",
            "assumptions": assumptions,
        },
    )
