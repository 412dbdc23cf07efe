"""Group-level privacy of DP-SGD via mixture-of-Gaussians mechanisms (paper 002).

A *group* is a set of up to ``k`` examples that may all be added or removed
together (002 Def. 2.5: add-/remove-up-to-k adjacency), e.g. every record of one
user. DP-SGD's group-level privacy is exactly that of a scalar
mixture-of-Gaussians (MoG) mechanism composed over the steps:

* Poisson sampling with rate ``q``: sensitivity ``Binom(k, q)``, noise ``sigma``
  (002 Thm 3.1);
* fixed batch size ``B`` drawn without replacement from a data set of at least
  ``n`` examples: sensitivity ``2 * Hypergeom(B, n + k, k)`` (002 Thm 3.3);
* a schedule of segments ``(sigma, q or B, steps)``: the composition of the
  segments' MoG mechanisms (002 Lemma 2.6 with Sec. 2.2).

The dominating pairs are tight (002 Sec. 3.3), and the PLD engine gives
certified two-sided bounds on their composition.

Two baselines (002 Sec. 4):

* the group-privacy lemma (002 Lemma 1.1, Vadhan 2017 Lemma 2.2): an
  example-level ``(eps', delta')`` guarantee gives ``(k eps', delta' S(eps'))``
  for groups of ``k``, ``S(e) = 1 + e^e + ... + e^{(k-1) e}``. We apply it to the
  *certified* example-level curve (upper bounds), so the result is a proven
  bound; ``S`` and ``delta'`` are handled in log space, and where the required
  ``delta'`` cannot be certified the answer is ``None`` with a note.
* the linear reference ``k * eps_1`` (002 Sec. 4, "lower bound"), with
  ``eps_1`` the example-level epsilon at the same delta. 002 uses it as the
  yardstick of linear growth; it is not a theorem for arbitrary mechanisms, so
  it is reported as a reference line, computed from the certified *lower*
  bound on ``eps_1``.

Every scheme of ``tightdp.sampling`` declares its ``group_analysis``: ``MIXTURE`` (Poisson, fixed batches:
the MoG step above), ``NO_AMPLIFICATION`` (below) or ``NONE`` (``group_reason`` says why). Where 002's
mixture-of-Gaussians analysis does not apply:

* ``random-allocation`` (1 of ``t`` steps per epoch, drawn afresh every epoch, add/remove): ``upper`` is the
  smaller of (a) the group-privacy lemma (002 Lemma 1.1) on the certified example-level curve of the
  allocation epochs (the example-level guarantee holds for every pair of add/remove neighbours, and a
  group of ``k`` is a chain of ``k`` of them) and (b) no amplification: for every allocation of the
  group's members the epoch's mean shift has L2 norm ``sqrt(sum_i c_i^2) <= k`` (``c_i`` members in
  step ``i``), so by joint convexity over the data-independent allocation ``E`` epochs are
  ``k sqrt(E)/sigma``-GDP. ``lower``: the example-level certified lower bound (a group of up to ``k``
  includes a group of one), loose.
* ``shuffle`` ("zero-out" neighbouring of Chua et al. 2403.17673, up to ``k`` records zeroed): the same
  argument (b) gives ``k sqrt(E)/sigma``-GDP, which is also the GDP group-privacy bound of the
  example-level ``sqrt(E)/sigma``-GDP (Dong, Roth, Su 2022, Thm 2.14); ``lower`` as above (Chua et al.'s
  attack on one record).
* ``truncated-poisson``: not applicable. Ganesh 2025's dominating pair holds for one data-set size
  ``n``, while a group's add/remove chain passes through ``k`` sizes, and adding records can displace
  others from a truncated batch; no certified group analysis is known. The substitute-relation schemes and
  cyclic allocation: not applicable either (their ``group_reason``).

Every function takes the run as keywords (``sampling`` a registered name or a scheme object) or as
``run=TrainingRun(...)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._accuracy import check_accuracy
from ._validation import check_choice, check_count, check_delta, check_positive, check_probability
from .accountants import DEFAULT_ACCOUNTANT
from .accountants.connect_dots import ConnectDotsAccountant
from .bounds import Bounds, _jsonable
from .errors import PrecisionError, UnsupportedMechanismError
from .mechanisms import Mechanism
from .runs import TrainingRun
from .sampling import GroupAnalysis, SamplingScheme, scheme_class

__all__ = [
    "group_mechanism",
    "group_ledger",
    "group_epsilon",
    "group_epsilon_schedule",
    "group_privacy_lemma_epsilon",
    "ExampleCurve",
    "LemmaResult",
    "GroupReport",
    "group_report",
    "group_curve",
]


# ------------------------------------------------------------------------------------ mechanisms
def _group_scheme(*, sampling, sampling_rate, dataset_size, batch_size, group_size) -> SamplingScheme:
    """The scheme a group question is about, from a scheme object or a name and its keywords; keywords the
    scheme does not read are refused, and a given ``sampling_rate`` must be the scheme's."""
    if isinstance(sampling, SamplingScheme):
        given = [
            k
            for k, v in (("sampling_rate", sampling_rate), ("dataset_size", dataset_size), ("batch_size", batch_size))
            if v is not None
        ]
        if given:
            raise ValueError(f"the sampling scheme object replaces {', '.join(given)}; give one or the other")
        return sampling
    cls = scheme_class(sampling)
    if batch_size is not None and "batch_size" not in cls.options:
        raise ValueError(
            f"batch_size applies only to sampling='fixed-batch', not {cls.name!r}"
            + ("; give sampling_rate = 1/t (t steps per epoch)" if cls.per_epoch else "")
        )
    if dataset_size is not None and "dataset_size" not in cls.options:
        n = check_count("dataset_size", dataset_size)
        k = check_count("group_size", group_size)
        if k > n:
            raise ValueError(f"group_size ({k}) must be <= dataset_size ({n})")
    scheme = cls.from_options(sampling_rate=sampling_rate, dataset_size=dataset_size, batch_size=batch_size)
    if scheme.group_analysis is GroupAnalysis.MIXTURE:  # the group's own checks (size against the data) first
        scheme.group_step(noise_multiplier=1.0, group_size=check_count("group_size", group_size))
    if sampling_rate is not None:
        q = check_probability("sampling_rate", sampling_rate)
        if not math.isclose(q, scheme.sampling_rate, rel_tol=1e-9):  # type: ignore[attr-defined]
            raise ValueError(
                f"sampling_rate ({q!r}) must equal batch_size / dataset_size "
                f"({batch_size}/{dataset_size} = {scheme.sampling_rate!r}) "  # type: ignore[attr-defined]
                f"for sampling={cls.name!r}; omit it to use the ratio"
            )
    return scheme


def group_mechanism(
    *, noise_multiplier, group_size, sampling="poisson", sampling_rate=None, dataset_size=None, batch_size=None
) -> Mechanism:
    """The mechanism of one DP-SGD step as seen by a group of up to ``group_size`` examples.

    Parameters
    ----------
    noise_multiplier : float
    group_size : int
    sampling : str or SamplingScheme
        A scheme with a mixture-of-Gaussians group step (``GroupAnalysis.MIXTURE``): ``"poisson"`` needs
        ``sampling_rate`` (002 Thm 3.1); ``"fixed-batch"`` needs ``batch_size`` and ``dataset_size`` (a lower
        bound on the number of examples outside the group, 002 Thm 3.3), ``sampling_rate`` is then optional
        and, if given, must equal ``batch_size / dataset_size``.

    Raises
    ------
    ValueError
        Bad input, naming the argument; a scheme without a mixture-of-Gaussians group step.
    """
    k = check_count("group_size", group_size)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    scheme = _group_scheme(
        sampling=sampling, sampling_rate=sampling_rate, dataset_size=dataset_size, batch_size=batch_size, group_size=k
    )
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        raise ValueError(
            f"sampling must be a scheme with a mixture-of-Gaussians group step (poisson, fixed-batch), "
            f"got {scheme.name!r}"
        )
    return scheme.group_step(noise_multiplier=sigma, group_size=k)


def group_ledger(
    *, schedule: Sequence[Sequence[Any]], group_size, sampling: str = "poisson", dataset_size=None
) -> list[tuple[Mechanism, int]]:
    """``(mechanism, steps)`` entries for a schedule of DP-SGD segments.

    Each segment is ``(noise_multiplier, sampling_rate, steps)`` for Poisson
    sampling or ``(noise_multiplier, batch_size, steps)`` for fixed batches
    (all sharing ``dataset_size``). Everything is validated before returning.
    """
    cls = scheme_class(sampling)
    if cls.group_analysis is not GroupAnalysis.MIXTURE:
        raise ValueError(
            f"sampling must be a scheme with a mixture-of-Gaussians group step (poisson, fixed-batch), got {sampling!r}"
        )
    by_batch = "batch_size" in cls.options  # the segment's middle entry is a batch size, else a rate
    if isinstance(schedule, (str, bytes)) or not hasattr(schedule, "__iter__"):
        raise ValueError(f"schedule must be a sequence of (noise_multiplier, rate or batch, steps), got {schedule!r}")
    out: list[tuple[Mechanism, int]] = []
    for i, seg in enumerate(schedule):
        if isinstance(seg, (str, bytes)) or not hasattr(seg, "__len__") or len(seg) != 3:
            raise ValueError(
                f"schedule[{i}] must be a (noise_multiplier, sampling_rate or batch_size, steps) triple, got {seg!r}"
            )
        sigma, rate_or_batch, steps = seg
        steps = check_count(f"schedule[{i}] steps", steps)
        which = {"batch_size" if by_batch else "sampling_rate": rate_or_batch}
        try:
            mech = group_mechanism(
                noise_multiplier=sigma, group_size=group_size, sampling=cls.name, dataset_size=dataset_size, **which
            )
        except ValueError as exc:
            raise ValueError(f"schedule[{i}]: {exc}") from None
        out.append((mech, steps))
    if not out:
        raise ValueError("schedule must contain at least one segment")
    return out


def _make_accountant(accountant, eps_error: float | None, rel_error: float | None = None):
    from .accountants import ACCOUNTANTS, Accountant, create

    if isinstance(accountant, Accountant):
        if accountant.ledger:
            raise ValueError("accountant must be an accountant name or an empty Accountant instance")
        return type(accountant)(**accountant.options())
    check_choice("accountant", accountant, sorted(ACCOUNTANTS))
    return create(accountant, eps_error=eps_error, rel_error=rel_error)


# ------------------------------------------------------------------------------------ epsilon
def _group_run(
    *, run, noise_multiplier, sampling, sampling_rate, steps, dataset_size, batch_size, group_size
) -> TrainingRun:
    """The run a group question is about: ``run`` itself (then the keywords must be absent) or one built from
    the keywords (``sampling`` parsed by the registry of ``tightdp.sampling``)."""
    if run is not None:
        if not isinstance(run, TrainingRun):
            raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
        given = [
            k
            for k, v in (
                ("noise_multiplier", noise_multiplier),
                ("sampling_rate", sampling_rate),
                ("steps", steps),
                ("dataset_size", dataset_size),
                ("batch_size", batch_size),
            )
            if v is not None
        ]
        if given or sampling is not None:
            raise ValueError(f"run replaces {', '.join(given) or 'sampling'}; give one or the other")
        return run
    sigma = check_positive("noise_multiplier", noise_multiplier)
    if not isinstance(sampling, SamplingScheme):
        cls = scheme_class(sampling)
        if cls.group_analysis is GroupAnalysis.NONE:  # refused before its own arguments are asked for
            raise UnsupportedMechanismError(f"group privacy for sampling={cls.name!r}: {cls.group_reason}")
    scheme = _group_scheme(
        sampling=sampling,
        sampling_rate=sampling_rate,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=group_size,
    )
    return TrainingRun(noise_multiplier=sigma, sampling=scheme, steps=check_count("steps", steps))


def group_epsilon(
    *,
    noise_multiplier=None,
    sampling_rate=None,
    steps=None,
    delta,
    group_size,
    sampling: str | SamplingScheme | None = None,
    dataset_size=None,
    batch_size=None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant=DEFAULT_ACCOUNTANT,
    run: TrainingRun | None = None,
) -> Bounds:
    """Certified bounds on DP-SGD's epsilon for groups of up to ``group_size`` examples (002 Thm 3.1 / 3.3).

    For a scheme with a mixture-of-Gaussians group step (Poisson, fixed batches): the ``T = steps``-fold
    composition of the MoG mechanism of ``group_mechanism`` under add-or-remove-up-to-k adjacency (002 Sec.
    2.2: the worse of the add and remove compositions), composed by ``accountant`` (default: the
    dominance-based ``connect-dots`` accountant, whose ``upper`` is a proven bound, at the accuracy asked
    for: ``tightdp._accuracy``). ``group_size = 1`` is example-level DP-SGD.

    Random allocation and shuffling (``GroupAnalysis.NO_AMPLIFICATION``; ``sampling_rate = 1/t`` and whole
    epochs) get the certified bounds of the module docstring (``details`` says which one is the upper end,
    and that the lower end is the example-level one).

    Parameters
    ----------
    run : TrainingRun, optional
        The run; replaces ``noise_multiplier``, ``sampling_rate``, ``steps``, ``sampling``, ``dataset_size``,
        ``batch_size``.
    sampling : str or SamplingScheme
        A registered name (``tightdp.sampling.scheme_names()``) or a scheme object.

    Raises
    ------
    ValueError
        Bad input, naming the argument (``sampling`` that is not a scheme name or object among them).
    UnsupportedMechanismError
        No group analysis applies to the scheme (the message says why).
    """
    run = _group_run(
        run=run,
        noise_multiplier=noise_multiplier,
        sampling=sampling,
        sampling_rate=sampling_rate,
        steps=steps,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=group_size,
    )
    scheme = run.sampling
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        return _scheme_group_epsilon(
            run=run, delta=delta, group_size=group_size, eps_error=eps_error, rel_error=rel_error, accountant=accountant
        )
    mech = scheme.group_step(noise_multiplier=run.noise_multiplier, group_size=check_count("group_size", group_size))
    return _epsilon_of(
        [(mech, run.steps)], delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant
    )


def group_epsilon_schedule(
    *,
    schedule,
    delta,
    group_size,
    sampling: str = "poisson",
    dataset_size=None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant=DEFAULT_ACCOUNTANT,
) -> Bounds:
    """``group_epsilon`` for a heterogeneous schedule: segments ``(noise_multiplier, q or B, steps)``.

    The per-step dominating pairs compose adaptively (002 Lemma 2.6), so the
    schedule's guarantee is that of the composed MoG mechanisms.
    """
    ledger = group_ledger(schedule=schedule, group_size=group_size, sampling=sampling, dataset_size=dataset_size)
    return _epsilon_of(ledger, delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant)


def _epsilon_of(ledger, *, delta, eps_error, rel_error=None, accountant) -> Bounds:
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    acc = _make_accountant(accountant, eps_error, rel_error)
    acc.compose(ledger)
    out = acc.epsilon(delta)
    details = {
        **dict(out.details),
        "accountant": acc.name,
        "mechanisms": [{"mechanism": m.to_dict(), "steps": c} for m, c in ledger],
    }
    return Bounds(out.lower, out.estimate, out.upper, out.quantity, out.kind, details)


def _scheme_group_epsilon(
    *, run: TrainingRun, delta, group_size, eps_error, rel_error, accountant, shared: dict | None = None
) -> Bounds:
    """Group privacy for the ``NO_AMPLIFICATION`` schemes (random allocation, shuffling; module docstring);
    the ``NONE`` ones are refused with their reason. ``shared`` (a dict, filled on first use) carries the
    example-level answer and the lemma's example curve from one group size to the next (``group_curve``),
    which do not depend on it."""
    shared = {} if shared is None else shared
    from .mechanisms import Gaussian

    scheme = run.sampling
    sigma = run.noise_multiplier
    k = check_count("group_size", group_size)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    if scheme.group_analysis is not GroupAnalysis.NO_AMPLIFICATION:
        raise UnsupportedMechanismError(f"group privacy for sampling={scheme.name!r}: {scheme.group_reason}")
    if accountant != DEFAULT_ACCOUNTANT:
        raise ValueError(
            f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={scheme.name!r} (its bounds come "
            f"from dominance pairs only), got {accountant!r}"
        )
    t = scheme.epoch_length()
    epochs = run.steps // t
    if "example" not in shared:
        shared["example"] = run.epsilon(delta=delta, eps_error=eps_error, rel_error=rel_error)
    example = shared["example"]
    if k == 1:
        return example
    # (b) no amplification: every allocation / permutation shifts the epoch's mean by at most k in L2
    gdp = (
        ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
        .compose(Gaussian(noise_multiplier=sigma, sensitivity=float(k)), epochs)
        .epsilon(delta)
    )
    upper, how = (
        gdp.upper,
        (
            f"no amplification: {k * math.sqrt(epochs) / sigma:.6g}-GDP (each epoch's mean shift "
            f"has L2 norm <= k = {k} for every allocation or permutation; joint convexity)"
        ),
    )
    details: dict[str, Any] = {
        "sampling": dict(example.details).get("sampling", scheme.name),
        "group_size": k,
        "scheme": scheme.describe(),
        "no_amplification_epsilon": gdp.upper,
    }
    lemma_step = scheme.group_lemma_step(noise_multiplier=sigma)
    if lemma_step is not None:  # (a) the group-privacy lemma on the certified example-level curve
        if "curve" not in shared:
            example_acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(lemma_step, epochs)
            shared["curve"] = ExampleCurve(_lemma_accountant(example_acc))
        lemma = group_privacy_lemma_epsilon(shared["curve"], delta=delta, group_size=k)
        details["group_privacy_lemma_epsilon"] = lemma.epsilon
        if lemma.note:
            details["group_privacy_lemma_note"] = lemma.note
        if lemma.epsilon is not None and lemma.epsilon < upper:
            upper, how = (
                lemma.epsilon,
                (
                    f"group-privacy lemma (002 Lemma 1.1) on the certified example-level "
                    f"curve: ({lemma.example_epsilon:.6g}, {lemma.example_delta:.3g}) for one "
                    f"example gives ({lemma.epsilon:.6g}, {delta:g}) for {k}"
                ),
            )
    else:
        how += "; the GDP group-privacy bound of the example-level sqrt(E)/sigma-GDP (Dong, Roth, Su 2022, Thm 2.14)"
    lower = min(float(example.lower), upper)
    details.update(
        {
            "upper": how,
            "lower": "the example-level certified lower bound (a group of up to k includes one example); "
            "loose: no tight group analysis of this scheme is known",
            "example_epsilon": [example.lower, example.upper],
        }
    )
    return Bounds(lower, upper, upper, "epsilon", "bound", details)


# ------------------------------------------------------------------------------------ baselines
def _log_group_factor(eps: float, k: int) -> float:
    """``log(1 + e^eps + ... + e^{(k-1) eps})`` without overflow (002 Lemma 1.1)."""
    if eps == 0.0:
        return math.log(k)
    # S = (e^{k eps} - 1) / (e^eps - 1) = e^{(k-1) eps} (1 - e^{-k eps}) / (1 - e^{-eps})
    return (k - 1) * eps + math.log(-math.expm1(-k * eps)) - math.log(-math.expm1(-eps))


@dataclass(frozen=True)
class LemmaResult:
    """Outcome of the group-privacy-lemma baseline: ``epsilon`` is ``None`` when it cannot be certified."""

    epsilon: float | None
    example_epsilon: float | None = None  # eps' with (eps', delta') certified for one example
    example_delta: float | None = None  # delta' = delta / S(eps')
    note: str | None = None
    queries: int = 0


#: the group-privacy-lemma search does not ask for example-level deltas below 1e-250: the accountants'
#: error budgets are fractions of delta per step, which leave double precision (and the PRV fallback
#: then spends tens of seconds and gigabytes to certify what the lemma cannot use anyway)
_LOG_SMALLEST_DELTA = math.log(1e-250)


def _lemma_accountant(accountant):
    """The accountant the group-privacy-lemma search queries at the small ``delta'`` it needs.

    A connect-dots accountant is copied into one that does not fall back to the
    PRV accountant: at ``delta' = delta / S(eps')`` far below ``delta`` that
    fallback builds grids of gigabytes and takes minutes for a
    baseline that only needs an upper bound and may legitimately be
    unavailable. Where dominance alone cannot certify ``delta'``, the query
    fails with a ``PrecisionError`` and the lemma says so. Other accountants are
    used as they are.
    """
    if type(accountant) is not ConnectDotsAccountant:
        return accountant
    return _LemmaConnectDots(**accountant.options()).compose(accountant.ledger)


class _LemmaConnectDots(ConnectDotsAccountant):
    """Connect-dots without the PRV fallback and without the lower bound the lemma never uses (one
    dominating pass per query; no ``name``: not a registered accountant of its own)."""

    _upper_only = True

    def _fallback(self, delta: float, reason: str, *, epsilons=None):
        raise PrecisionError(
            f"dominance alone cannot certify it ({reason}); the group-privacy-lemma baseline "
            "does not use the PRV fallback, whose grids at such deltas take minutes and "
            "gigabytes"
        )


class ExampleCurve:
    """Certified example-level ``eps_1^U(delta')`` from a composed accountant, memoised in ``log delta'``.

    Remembers the largest ``delta'`` the accountant could not certify and
    answers ``inf`` for any smaller ``delta'`` without asking again (certifying
    a smaller delta is never easier), which keeps the group-privacy-lemma
    search cheap when the required ``delta'`` is out of reach.
    """

    def __init__(self, accountant) -> None:
        self.accountant = accountant
        rel = getattr(accountant, "rel_error", None)
        # the lemma search's tolerance (an absolute one): the accountant's absolute accuracy, or for a
        # relative one the width it asks for at epsilon ~ 1 (the searched eps' are example-level)
        self.eps_error = getattr(accountant, "eps_error", 0.01) if rel is None else max(accountant.eps_error, rel)
        self.queries = 0
        self._memo: dict[float, float] = {}
        self._fail_log_delta = -math.inf
        self._fail_note = ""

    def upper(self, log_delta: float) -> tuple[float, str]:
        """``(eps_1^U(exp(log_delta)), note)``; ``inf`` with a note where it cannot be certified."""
        if log_delta < _LOG_SMALLEST_DELTA:
            return math.inf, (
                f"the required example-level delta' = exp({log_delta:.4g}) is below 1e-250, "
                "where the truncation and round-off budgets of a certified accountant "
                "(a fraction of delta') leave double precision"
            )
        if log_delta <= self._fail_log_delta:
            return math.inf, self._fail_note
        if log_delta in self._memo:
            return self._memo[log_delta], ""
        self.queries += 1
        try:
            b = self.accountant.epsilon(math.exp(log_delta))
            val = math.inf if b.upper is None else float(b.upper)
            why = str(dict(b.details).get("note", "no finite upper bound"))
        except (PrecisionError, ArithmeticError, ValueError, MemoryError) as exc:
            val, why = math.inf, str(exc)
        if not math.isfinite(val):
            self._fail_log_delta = log_delta
            self._fail_note = f"the example-level accountant cannot certify delta' = exp({log_delta:.4g}) ({why})"
            return math.inf, self._fail_note
        self._memo[log_delta] = val
        return val, ""


def _largest_certifiable(log_delta: float, k: int) -> float:
    """The largest ``eps'`` whose ``delta' = delta / S(eps')`` is at least 1e-250 (``-1`` if none)."""
    if log_delta - _log_group_factor(0.0, k) < _LOG_SMALLEST_DELTA:
        return -1.0
    lo, hi = 0.0, 1.0
    while log_delta - _log_group_factor(hi, k) >= _LOG_SMALLEST_DELTA:
        lo, hi = hi, 2.0 * hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if log_delta - _log_group_factor(mid, k) >= _LOG_SMALLEST_DELTA:
            lo = mid
        else:
            hi = mid
    return hi  # an over-estimate keeps the early stop safe: it only stops when floor is beyond it


def group_privacy_lemma_epsilon(
    example, *, delta, group_size, tol: float | None = None, max_queries: int = 40
) -> LemmaResult:
    """Smallest ``k eps'`` certified by the group-privacy lemma (002 Lemma 1.1) from an example-level curve.

    ``example`` is an accountant holding the composed *example-level*
    mechanism (or an ``ExampleCurve`` around one); its certified
    ``epsilon(delta').upper`` gives ``phi(eps') = eps_1^U(delta / S(eps'))``.
    Any ``eps'`` with ``phi(eps') <= eps'`` is a proven example-level
    ``(eps', delta / S(eps'))`` guarantee, hence ``(k eps', delta)`` for groups.
    ``phi`` is non-decreasing, so every infeasible ``eps'`` lies below the
    smallest solution ``eps*`` and ``phi(eps') <= eps*``: we step forward with
    secant steps on ``psi = phi - id`` until feasible, then close the bracket
    by regula falsi to ``tol`` (default ``eps_error / k``). Where ``delta'``
    underflows or the accountant cannot certify it, the result is ``None``
    with a note saying so, never NaN. The search stops as soon as the known
    lower end ``phi(e) <= e*`` of every solution needs ``delta'`` below 1e-250
    (the queries closest to that floor are the most expensive ones), and after
    ``max_queries`` accountant queries.
    """
    k = check_count("group_size", group_size)
    delta = check_delta("delta", delta)
    curve = example if isinstance(example, ExampleCurve) else ExampleCurve(example)
    log_delta = math.log(delta)
    tol = curve.eps_error / k if tol is None else check_positive("tol", tol)
    start_queries = curve.queries
    failure: list[str] = []

    def phi(e: float) -> float:
        val, note = curve.upper(log_delta - _log_group_factor(e, k))
        if note:
            failure.append(note)
        return val

    def used() -> int:
        return curve.queries - start_queries

    def unattainable(lo: float) -> LemmaResult:
        why = failure[-1] if failure else "no example-level epsilon' satisfies eps_1(delta / S(eps')) <= eps'"
        return LemmaResult(
            None,
            None,
            None,
            f"group-privacy lemma (002 Lemma 1.1) gives no certified epsilon: {why}; searched eps' up to {lo:.4g}",
            used(),
        )

    if k == 1:
        v = phi(0.0)
        if not math.isfinite(v):
            return unattainable(0.0)
        return LemmaResult(v, v, delta, None, used())

    # Phase 1: bracket. Every infeasible e lies below the smallest solution e* and phi(e) <= e*,
    # so the next candidate is at least phi(e); a secant step on psi(e) = phi(e) - e jumps ahead.
    lo, psi_lo = 0.0, phi(0.0)
    if psi_lo == 0.0:
        return LemmaResult(0.0, 0.0, delta / k, None, used())
    if not math.isfinite(psi_lo):
        return unattainable(0.0)
    e, floor = psi_lo, psi_lo  # floor: a point known to be <= e*
    e_max = _largest_certifiable(log_delta, k)
    hi = psi_hi = None
    for _ in range(4 * max_queries):
        if used() >= max_queries:
            break
        if floor > e_max:  # every solution lies above e_max, where delta' is below what can be certified
            failure.append(
                f"every solution eps' >= {floor:.4g} needs delta' = exp({log_delta - _log_group_factor(floor, k):.4g}), "
                "below 1e-250, where the truncation and round-off budgets of a certified accountant "
                "(a fraction of delta') leave double precision"
            )
            return unattainable(floor)
        v = phi(e)
        if not math.isfinite(v):
            if e - floor <= tol:  # not even (about) the smallest possible solution can be certified
                return unattainable(e)
            e = floor + 0.5 * (e - floor)  # an overshoot went too far; come back
            continue
        psi = v - e
        if psi <= 0.0:
            hi, psi_hi = e, psi
            break
        floor = max(floor, v)
        cand = v
        if psi_lo > psi:  # secant through (lo, psi_lo), (e, psi)
            cand = max(cand, e + psi * (e - lo) / (psi_lo - psi))
        lo, psi_lo = e, psi
        e = cand + tol
    if hi is None:
        return unattainable(lo)
    # Phase 2: Illinois regula falsi on [lo, hi] (psi(lo) > 0 >= psi(hi)) down to tol.
    side = 0
    for _ in range(4 * max_queries):
        if hi - lo <= tol or used() >= max_queries:
            break
        mid = hi - psi_hi * (hi - lo) / (psi_hi - psi_lo) if psi_lo != psi_hi else 0.5 * (lo + hi)
        mid = min(max(mid, lo + 0.25 * tol), hi - 0.25 * tol)
        v = phi(mid)
        psi = v - mid if math.isfinite(v) else math.inf
        if psi <= 0.0:
            hi, psi_hi = mid, psi
            if side == -1:
                psi_lo *= 0.5
            side = -1
        else:
            lo, psi_lo = mid, (psi if math.isfinite(psi) else psi_lo)
            if side == 1:
                psi_hi *= 0.5
            side = 1
    return LemmaResult(k * hi, hi, math.exp(log_delta - _log_group_factor(hi, k)), None, used())


# ------------------------------------------------------------------------------------ reports
@dataclass(frozen=True)
class GroupReport:
    """Group-level epsilon with the two baselines of 002 Sec. 4 (JSON via ``to_dict``)."""

    group_size: int
    delta: float
    sampling: str
    epsilon: Bounds
    example_epsilon: Bounds
    group_privacy_lemma: LemmaResult
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def linear_lower_bound(self) -> float:
        """``k * eps_1`` (002 Sec. 4), from the certified lower bound on ``eps_1``."""
        return self.group_size * float(self.example_epsilon.lower)

    @property
    def group_privacy_lemma_epsilon(self) -> float | None:
        return self.group_privacy_lemma.epsilon

    def to_dict(self) -> dict[str, Any]:
        lemma = self.group_privacy_lemma
        eps = self.epsilon.to_dict()
        out = {
            "epsilon": {"lower": eps["lower"], "estimate": eps["estimate"], "upper": eps["upper"]},
            "group_privacy_lemma_epsilon": lemma.epsilon,
            "linear_lower_bound": self.linear_lower_bound,
            "group_size": self.group_size,
            "delta": self.delta,
            "sampling": self.sampling,
            "kind": self.epsilon.kind,
            "example_epsilon": {k: v for k, v in self.example_epsilon.to_dict().items() if k != "details"},
            "group_privacy_lemma": {
                "example_epsilon": lemma.example_epsilon,
                "example_delta": lemma.example_delta,
                "note": lemma.note,
            },
        }
        notes = [n for n in (dict(self.epsilon.details).get("note"), lemma.note) if n]
        if notes:
            out["notes"] = notes
        out["details"] = _jsonable(self.details)
        return out


def group_report(
    *,
    noise_multiplier=None,
    sampling_rate=None,
    steps=None,
    delta,
    group_size,
    sampling: str | SamplingScheme | None = None,
    dataset_size=None,
    batch_size=None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant=DEFAULT_ACCOUNTANT,
    run: TrainingRun | None = None,
) -> GroupReport:
    """``group_epsilon`` plus the example-level epsilon and both baselines (002 Sec. 4)."""
    return group_curve(
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        delta=delta,
        group_sizes=[group_size],
        sampling=sampling,
        dataset_size=dataset_size,
        batch_size=batch_size,
        eps_error=eps_error,
        rel_error=rel_error,
        accountant=accountant,
        run=run,
    )[0]


def group_curve(
    *,
    noise_multiplier=None,
    sampling_rate=None,
    steps=None,
    delta,
    group_sizes: Iterable[int],
    sampling: str | SamplingScheme | None = None,
    dataset_size=None,
    batch_size=None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant=DEFAULT_ACCOUNTANT,
    run: TrainingRun | None = None,
) -> list[GroupReport]:
    """``GroupReport`` for each group size (002 Fig. 1-2); the example-level curve is composed once.
    For the ``NO_AMPLIFICATION`` schemes each report is ``group_epsilon``'s certified bound, with the
    group-privacy lemma where that bound computed it (random allocation). The run as keywords or ``run``."""
    if isinstance(group_sizes, (str, bytes)) or not hasattr(group_sizes, "__iter__"):
        raise ValueError(f"group_sizes must be a list of whole numbers, got {group_sizes!r}")
    sizes = [check_count("group_size", k) for k in group_sizes]
    if not sizes:
        raise ValueError("group_sizes must not be empty")
    if run is None:
        steps = check_count("steps", steps)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    run = _group_run(
        run=run,
        noise_multiplier=noise_multiplier,
        sampling=sampling,
        sampling_rate=sampling_rate,
        steps=steps,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=max(sizes),
    )
    scheme, steps = run.sampling, run.steps
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        return _scheme_group_curve(
            run=run, delta=delta, sizes=sizes, eps_error=eps_error, rel_error=rel_error, accountant=accountant
        )
    sigma = run.noise_multiplier
    mechs = [scheme.group_step(noise_multiplier=sigma, group_size=k) for k in sizes]  # validate before any work
    example_mech = scheme.group_step(noise_multiplier=sigma, group_size=1)
    example_acc = _make_accountant(accountant, eps_error, rel_error).compose(example_mech, steps)
    curve = ExampleCurve(_lemma_accountant(example_acc))
    t0 = time.perf_counter()
    example = example_acc.epsilon(delta)
    t_example = time.perf_counter() - t0
    reports = []
    for k, mech in zip(sizes, mechs):
        t0 = time.perf_counter()
        eps = (
            example
            if k == 1
            else _epsilon_of(
                [(mech, steps)], delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant
            )
        )
        t1 = time.perf_counter()
        lemma = group_privacy_lemma_epsilon(curve, delta=delta, group_size=k)
        t2 = time.perf_counter()
        reports.append(
            GroupReport(
                k,
                delta,
                scheme.name,
                eps,
                example,
                lemma,
                {
                    "mechanism": mech.to_dict(),
                    "steps": steps,
                    "accountant": example_acc.name,
                    "scheme": scheme.describe(),
                    "eps_error": eps_error,
                    "rel_error": rel_error,
                    "seconds": {"group": t1 - t0, "example": t_example, "lemma": t2 - t1},
                },
            )
        )
    return reports


def _scheme_group_curve(*, run: TrainingRun, delta, sizes, eps_error, rel_error, accountant) -> list[GroupReport]:
    """``group_curve`` for the ``NO_AMPLIFICATION`` schemes: ``group_epsilon`` per size (the lemma is part of
    the upper end where the scheme has a lemma step; shuffling's no-amplification GDP group bound needs none)."""
    shared: dict = {}  # the example-level answer and curve, computed once for every size
    kw = dict(run=run, delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant, shared=shared)
    name = run.sampling.name
    t0 = time.perf_counter()
    example = _scheme_group_epsilon(group_size=1, **kw)
    t_example = time.perf_counter() - t0
    reports = []
    for k in sizes:
        t0 = time.perf_counter()
        eps = example if k == 1 else _scheme_group_epsilon(group_size=k, **kw)
        d = dict(eps.details)
        if k == 1:
            lemma = LemmaResult(float(example.upper), float(example.upper), delta)
        elif "group_privacy_lemma_epsilon" in d:
            lemma = LemmaResult(d["group_privacy_lemma_epsilon"], note=d.get("group_privacy_lemma_note"))
        else:
            lemma = LemmaResult(
                None,
                note=f"not computed: for {name} the certified bound is already the GDP group "
                "bound of the example-level sqrt(E)/sigma-GDP guarantee",
            )
        reports.append(
            GroupReport(
                k,
                delta,
                name,
                eps,
                example,
                lemma,
                {
                    "sampling": name,
                    "scheme": run.sampling.describe(),
                    "upper": d.get("upper", "the example-level bound"),
                    "steps": run.steps,
                    "accountant": DEFAULT_ACCOUNTANT,
                    "eps_error": eps_error,
                    "rel_error": rel_error,
                    "seconds": {"group": time.perf_counter() - t0, "example": t_example},
                },
            )
        )
    return reports
