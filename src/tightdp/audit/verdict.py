"""The verdict: the empirical lower bound of an audit against the certified interval of the run.

* ``"violates"``: the empirical lower bound exceeds the certified upper end: with confidence
  ``1 - beta`` (under the audit's assumptions) the implementation is not as private as its accounting
  says (or the certified f-DP curve itself is rejected by the f-DP test).
* ``"too weak"``: consistent, but an optimal attack on a correct implementation would reach less than
  ``fraction`` (default 1/4) of the certified epsilon with this many canaries: the audit cannot tell a
  correct implementation from a broken one; the verdict says how many canaries would do.
* ``"consistent"``: the empirical lower bound is below the certified upper end and the audit is
  informative.

A correct implementation is flagged with probability at most ``beta`` (the bounds are valid at
confidence ``1 - beta`` and the certified upper end is an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._types import ArrayLike
from .._validation import check_choice, check_real
from .expected import (
    AUDIT_METHODS,
    ExpectedAudit,
    canaries_needed,
    expected_audit,
    run_curve,
)
from .fdp import FdpTest, epsilon_one_run_fdp, fdp_one_run_test
from .multi_run import epsilon_clopper_pearson
from .one_run import epsilon_one_run
from .result import AuditBound, _plain, check_beta
from .scores import CanaryScores

if TYPE_CHECKING:
    from ..bounds import Bounds

__all__ = ["RUN_METHODS", "VERDICTS", "AuditVerdict", "audit_run", "audit_section", "audit_verdict"]

VERDICTS = ("consistent", "too weak", "violates")
#: methods ``audit_run`` accepts: the one-run audits and the multi-run Clopper-Pearson
RUN_METHODS = AUDIT_METHODS + ("clopper-pearson",)


@dataclass(frozen=True)
class AuditVerdict:
    """The empirical bound, the certified interval, what a correct run should show, and the verdict.

    Parameters
    ----------
    verdict : str
        One of ``VERDICTS``: ``"consistent"``, ``"too weak"``, ``"violates"``.
    message : str
        The verdict as a sentence.
    empirical : AuditBound
        The audit's empirical lower bound.
    certified_lower : float
        The lower end of the run's certified epsilon interval.
    certified_upper : float
        Its upper end (a proven bound).
    expected : ExpectedAudit or None, default None
        What an optimal attack on a correct implementation reaches.
    canaries_needed : int or None, default None
        Canaries an informative audit needs (quoted in a "too weak" verdict).
    details : mapping, default {}
        The fraction, the delta and the f-DP curve test, if any.

    Raises
    ------
    ValueError
        Not raised by the constructor itself; ``audit_verdict`` validates what it passes.

    References
    ----------
    Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2024; Jagielski, Ullman, Oprea 2020;
    Nasr et al. 2021.
    """

    verdict: str
    message: str
    empirical: AuditBound
    certified_lower: float
    certified_upper: float
    expected: ExpectedAudit | None = None
    canaries_needed: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict (the report's "Audit" section).

        Returns
        -------
        dict
            ``verdict``, ``message``, ``empirical``, ``certified_epsilon`` (``{"lower", "upper"}``), ``expected``,
            ``canaries_needed`` and ``details``.
        """
        return {
            "verdict": self.verdict,
            "message": self.message,
            "empirical": self.empirical.to_dict(),
            "certified_epsilon": {"lower": self.certified_lower, "upper": self.certified_upper},
            "expected": None if self.expected is None else self.expected.to_dict(),
            "canaries_needed": self.canaries_needed,
            "details": _plain(dict(self.details)),
        }


def audit_verdict(
    empirical: AuditBound,
    *,
    certified: Bounds,
    expected: ExpectedAudit | None = None,
    fraction: float = 0.25,
    needed: int | None = None,
    curve_test: FdpTest | None = None,
) -> AuditVerdict:
    """Compare an audit's empirical lower bound with the certified epsilon interval of the run.

    Parameters
    ----------
    empirical : AuditBound
        The audit's result, at the same delta as ``certified``.
    certified : Bounds
        The run's certified epsilon at that delta (``kind == "bound"``; its ``upper`` is a proof).
    expected : ExpectedAudit, optional
        What an optimal attack on a correct implementation reaches (``expected_audit``); without it the
        verdict cannot say "too weak".
    fraction : float
        The audit is informative when ``expected.epsilon_lower >= fraction * certified.lower``.
    needed : int, optional
        Canaries an informative audit needs (``canaries_needed``), quoted in a "too weak" verdict.
    curve_test : FdpTest, optional
        ``fdp_one_run_test`` of the certified curve; a rejection is also a violation.

    Returns
    -------
    AuditVerdict
        ``"violates"`` when the empirical bound exceeds the certified upper end (or the curve test rejects),
        ``"too weak"`` when a correct run would show less than ``fraction`` of the certified lower end,
        ``"consistent"`` otherwise.

    Raises
    ------
    ValueError
        If ``empirical`` is not an ``AuditBound``, ``certified`` not certified epsilon ``Bounds``, or
        ``fraction`` outside (0, 1].

    References
    ----------
    Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2024.
    """
    if not isinstance(empirical, AuditBound):
        raise ValueError(f"empirical must be an AuditBound, got {type(empirical).__name__}")
    if getattr(certified, "kind", None) != "bound" or getattr(certified, "quantity", "epsilon") != "epsilon":
        raise ValueError("certified must be certified epsilon Bounds (quantity 'epsilon', kind 'bound')")
    frac = check_real("fraction", fraction, low=0.0, high=1.0, high_open=False)
    c_lo = 0.0 if certified.lower is None else float(certified.lower)
    c_up = float("inf") if certified.upper is None else float(certified.upper)
    e = empirical.epsilon_lower
    conf = f"{100 * (1 - empirical.beta):g} %"
    details: dict[str, Any] = {"fraction": frac, "delta": empirical.delta}
    if curve_test is not None:
        details["curve_test"] = dict(curve_test)
    if e > c_up or (curve_test is not None and curve_test.rejected):
        why = (
            f"the empirical lower bound {e:.4g} exceeds the certified upper bound {c_up:.4g}"
            if e > c_up
            else "the f-DP test rejects the certified trade-off curve"
        )
        return AuditVerdict(
            "violates",
            f"implementation violates its accounting: {why} at confidence {conf} "
            f"(delta = {empirical.delta:g}; {empirical.method})",
            empirical,
            c_lo,
            c_up,
            expected,
            needed,
            details,
        )
    if expected is not None and expected.epsilon_lower < frac * c_lo:
        m = expected.canaries
        more = f"needs >= {needed} canaries" if needed is not None else "more canaries or a stronger method are needed"
        return AuditVerdict(
            "too weak",
            f"the audit is too weak to say anything: a correct implementation audited "
            f"with {m} canaries shows about {expected.epsilon_lower:.3g}, less than {frac:g} x the "
            f"certified {c_lo:.4g} ({more})",
            empirical,
            c_lo,
            c_up,
            expected,
            needed,
            details,
        )
    return AuditVerdict(
        "consistent",
        f"consistent: the empirical lower bound {e:.4g} is at most the certified "
        f"epsilon interval's upper end {c_up:.4g} (certified [{c_lo:.4g}, {c_up:.4g}], confidence "
        f"{conf})",
        empirical,
        c_lo,
        c_up,
        expected,
        needed,
        details,
    )


def audit_run(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    delta: float,
    beta: float = 0.05,
    method: str = "one-run",
    test_curve: bool = False,
    expected: bool = True,
    fraction: float = 0.25,
    guess_counts: ArrayLike | None = None,
    draws: int = 101,
    seed: int = 0,
    **run: Any,
) -> AuditVerdict:
    """Audit a run from its canary scores and give the verdict against its certified interval.

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores (higher = more likely in) of the canaries that were in and out.
    delta : float
        The delta of the audited claim.
    beta : float, default 0.05
        One minus the confidence level, in (0, 1).
    method : str, default "one-run"
        One of ``RUN_METHODS``; ``"fdp-gdp"`` is refused for a run whose certified curve is not exactly Gaussian
        (its family assumption would not hold).
    test_curve : bool, default False
        Also test the certified trade-off curve with the f-DP one-run test (each of the two tests then runs at
        ``beta / 2``, so a correct run is still flagged with probability at most ``beta``).
    expected : bool, default True
        Also simulate what a correct implementation shows (``expected_audit``, one-run methods) and, when that
        is too weak, how many canaries are needed.
    fraction : float, default 0.25
        The fraction of the certified lower end an informative audit must reach.
    guess_counts : int or sequence of int, optional
        Candidate numbers of "in" guesses of the one-run audits.
    draws : int, default 101
        Monte Carlo audits of the expected audit.
    seed : int, default 0
        Seed of the expected audit and of the Clopper-Pearson split.
    **run
        The run keywords of ``run_curve`` (``noise_multiplier``, ``sampling_rate``, ``steps``; or ``mu``; or
        ``accountant``).

    Returns
    -------
    AuditVerdict
        The empirical bound, the certified interval, the expected audit and the verdict.

    Raises
    ------
    ValueError
        An unknown ``method``, ``"fdp-gdp"`` for a non-Gaussian run, bad scores, delta, beta or run keywords.

    References
    ----------
    Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2024; Jagielski, Ullman, Oprea 2020;
    Nasr et al. 2021.
    """
    check_choice("method", method, RUN_METHODS)
    b = check_beta(beta)
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    curve, certified = run_curve(**run, delta=delta)
    if certified is None:
        raise ValueError(
            "run: audit_run needs the run's certified epsilon: give it as an accountant, mu or the DP-SGD "
            "keywords, not as a bare curve"
        )
    if method == "fdp-gdp" and curve.details.get("mu_exact") is None:
        raise ValueError(
            "method 'fdp-gdp' assumes a Gaussian (mu-GDP) trade-off curve and this run's is not one "
            "(a subsampled or non-Gaussian run): a correct run could be flagged; use 'fdp-eps-delta' or "
            "'one-run'"
        )
    b_eps = b / 2 if test_curve else b
    kw: dict[str, Any] = {"in_scores": scores.in_scores, "out_scores": scores.out_scores, "delta": delta, "beta": b_eps}
    if method == "one-run":
        emp = epsilon_one_run(**kw, guess_counts=guess_counts)
    elif method == "clopper-pearson":
        emp = epsilon_clopper_pearson(**kw, seed=seed)
    else:
        emp = epsilon_one_run_fdp(**kw, family=method[4:], guess_counts=guess_counts)
    ct = (
        fdp_one_run_test(
            in_scores=scores.in_scores, out_scores=scores.out_scores, curve=curve, beta=b / 2, guess_counts=guess_counts
        )
        if test_curve
        else None
    )
    exp: ExpectedAudit | None = None
    needed: int | None = None
    if expected and method != "clopper-pearson":
        exp = expected_audit(
            canaries=scores.canaries,
            delta=delta,
            beta=b_eps,
            method=method,
            guess_counts=guess_counts,
            draws=draws,
            seed=seed,
            curve=curve,
        )
        if exp.epsilon_lower < fraction * float(certified.lower or 0.0):
            needed = canaries_needed(
                delta=delta, target=fraction * float(certified.lower), beta=b_eps, method=method, curve=curve, seed=seed
            )["canaries"]
    v = audit_verdict(emp, certified=certified, expected=exp, fraction=fraction, needed=needed, curve_test=ct)
    return v


def audit_section(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    delta: float,
    beta: float = 0.05,
    method: str = "one-run",
    **run: Any,
) -> dict[str, Any]:
    """The data of a privacy report's "Audit" section (``audit_run(...).to_dict()`` plus a short table).

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores (higher = more likely in) of the canaries that were in and out.
    delta : float
        The delta of the audited claim.
    beta : float, default 0.05
        One minus the confidence level, in (0, 1).
    method : str, default "one-run"
        One of ``RUN_METHODS``.
    **run
        The run keywords of ``run_curve``.

    Returns
    -------
    dict
        ``verdict``, ``message``, ``empirical``, ``certified_epsilon``, ``expected``, ``canaries_needed``,
        ``details`` and ``rows`` (label, value pairs ready to print).

    Raises
    ------
    ValueError
        As ``audit_run``.

    References
    ----------
    Steinke, Nasr, Jagielski 2023; Mahloujifar, Melis, Chaudhuri 2024.
    """
    v = audit_run(in_scores=in_scores, out_scores=out_scores, delta=delta, beta=beta, method=method, **run)
    out = v.to_dict()
    rows = [
        ("canaries", str(v.empirical.details.get("canaries", v.empirical.details.get("n_in", "")))),
        ("method", v.empirical.method),
        (
            f"empirical epsilon lower bound ({100 * (1 - v.empirical.beta):g} % confidence)",
            f"{v.empirical.epsilon_lower:.4g}",
        ),
        ("certified epsilon", f"[{v.certified_lower:.4g}, {v.certified_upper:.4g}]"),
    ]
    if v.expected is not None:
        rows.append(
            (
                "a correct implementation shows (median, optimal attack)",
                f"{v.expected.epsilon_lower:.4g} .. {v.expected.epsilon_upper:.4g}",
            )
        )
    rows.append(("verdict", v.message))
    out["rows"] = [list(r) for r in rows]
    return out
