"""The group-privacy-lemma baseline (Ganesh 2024, Lemma 1.1; Vadhan 2017, Lemma 2.2) on a certified
example-level curve: ``group_privacy_lemma_epsilon``, ``ExampleCurve``, ``LemmaResult``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._numerics import falling_root
from .._types import FloatArray
from .._validation import check_count, check_delta, check_positive
from ..accountants.base import Accountant
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import PrecisionError


def _log_group_factor(eps: float, k: int) -> float:
    """``log(1 + e^eps + ... + e^{(k-1) eps})`` without overflow (Ganesh 2024, Lemma 1.1)."""
    if eps == 0.0:
        return math.log(k)
    # S = (e^{k eps} - 1) / (e^eps - 1) = e^{(k-1) eps} (1 - e^{-k eps}) / (1 - e^{-eps})
    return (k - 1) * eps + math.log(-math.expm1(-k * eps)) - math.log(-math.expm1(-eps))


@dataclass(frozen=True)
class LemmaResult:
    """Outcome of the group-privacy-lemma baseline: ``epsilon`` is ``None`` when it cannot be certified.

    Parameters
    ----------
    epsilon : float or None
        The certified group-level ``k eps'``; ``None`` when it cannot be certified.
    example_epsilon : float, optional
        ``eps'``, with ``(eps', delta')`` certified for one example.
    example_delta : float, optional
        ``delta' = delta / S(eps')``.
    note : str, optional
        Why no epsilon was certified.
    queries : int, default 0
        The accountant queries spent.

    Raises
    ------
    TypeError
        If ``epsilon`` is missing (a plain record: the values are not checked).
    """

    epsilon: float | None
    example_epsilon: float | None = None  # eps' with (eps', delta') certified for one example
    example_delta: float | None = None  # delta' = delta / S(eps')
    note: str | None = None
    queries: int = 0


#: the group-privacy-lemma search does not ask for example-level deltas below 1e-250: the accountants'
#: error budgets are fractions of delta per step, which leave double precision (and the PRV fallback
#: then spends tens of seconds and gigabytes to certify what the lemma cannot use anyway)
_LOG_SMALLEST_DELTA = math.log(1e-250)
_U = 2.0**-52  # one ulp at 1


def _lemma_accountant(accountant: Accountant) -> Accountant:
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

    def _fallback(self, delta: float, reason: str, *, epsilons: FloatArray | None = None) -> Bounds:
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

    Parameters
    ----------
    accountant : Accountant
        An accountant holding the composed example-level mechanism.

    Raises
    ------
    AttributeError
        If ``accountant`` has no ``epsilon`` method (it is not checked otherwise).
    """

    def __init__(self, accountant: Accountant) -> None:
        self.accountant = accountant
        rel = getattr(accountant, "rel_error", None)
        # the lemma search's tolerance (an absolute one): the accountant's absolute accuracy, or for a
        # relative one the width it asks for at epsilon ~ 1 (the searched eps' are example-level)
        eps_error: float = getattr(accountant, "eps_error", 0.01)
        self.eps_error = eps_error if rel is None else max(eps_error, rel)
        self.queries = 0
        self._memo: dict[float, float] = {}
        self._fail_log_delta = -math.inf
        self._fail_note = ""

    def upper(self, log_delta: float) -> tuple[float, str]:
        """The certified example-level epsilon at ``delta' = exp(log_delta)``.

        Parameters
        ----------
        log_delta : float
            ``log delta'``.

        Returns
        -------
        tuple of (float, str)
            ``(eps_1^U(delta'), "")``, or ``(inf, note)`` where it cannot be certified.

        Raises
        ------
        TightDPError
            Only errors other than a failure to certify: ``PrecisionError``, ``ArithmeticError``, ``ValueError``
            and ``MemoryError`` of the accountant are answered as ``inf`` with their message.
        """
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

    def room(e: float) -> float:  # non-increasing in e; <= 0 where delta' is below 1e-250
        return log_delta - _log_group_factor(e, k) - _LOG_SMALLEST_DELTA

    if room(lo) <= 0.0 or not math.isfinite(hi):  # (k = 1: S = 1, no eps' is too large)
        return lo if room(lo) <= 0.0 else hi
    # falling_root answers the side where room <= 0: an over-estimate, which keeps the early stop safe
    # (it only stops when floor is beyond it)
    return falling_root(room, lo, hi, xtol=4.0 * _U * hi)


def group_privacy_lemma_epsilon(
    example: Accountant | ExampleCurve,
    *,
    delta: float,
    group_size: int,
    tol: float | None = None,
    max_queries: int = 40,
) -> LemmaResult:
    """Smallest ``k eps'`` certified by the group-privacy lemma (Ganesh 2024, Lemma 1.1) from an example-level curve.

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

    Parameters
    ----------
    example : Accountant or ExampleCurve
        The composed example-level accountant, or an ``ExampleCurve`` around one (shared between group sizes).
    delta : float
        The group-level delta, in (0, 1).
    group_size : int
        The group size ``k``, a positive whole number.
    tol : float, optional
        The absolute tolerance on ``eps'`` (default: the curve's ``eps_error / k``).
    max_queries : int, default 40
        The most accountant queries spent.

    Returns
    -------
    LemmaResult
        ``epsilon = k eps'`` with ``eps'`` and ``delta'``; ``epsilon=None`` with a note where no certified
        ``eps'`` was found.

    Raises
    ------
    ValueError
        If ``delta``, ``group_size`` or ``tol`` is out of its domain.

    References
    ----------
    Ganesh 2024, Lemma 1.1; Vadhan 2017, Lemma 2.2 (the group-privacy lemma).
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
            f"group-privacy lemma (Ganesh 2024, Lemma 1.1) gives no certified epsilon: {why}; "
            f"searched eps' up to {lo:.4g}",
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
    hi: float | None = None
    psi_hi = 0.0  # set with hi
    for _ in range(4 * max_queries):
        if used() >= max_queries:
            break
        if floor > e_max:  # every solution lies above e_max, where delta' is below what can be certified
            failure.append(
                f"every solution eps' >= {floor:.4g} needs "
                f"delta' = exp({log_delta - _log_group_factor(floor, k):.4g}), "
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
