"""Private selection and hyper-parameter tuning: certified intervals for selection mechanisms composed
``count`` times (``selection_epsilon``) and for tuning runs (``tuning_epsilon``): ``K`` fixed runs, or a
random number of runs with the best one released (Papernot & Steinke 2022; Liu & Talwar 2019).

Upper ends, the tightest proven analysis available:

* ``K`` fixed runs: the composition of ``K`` runs (the connect-the-dots accountant, a dominating pair);
  releasing only the best run is a post-processing of releasing all.
* Random ``K`` (Papernot & Steinke 2022): only Renyi-DP proofs exist, so the bound is RDP-based and says
  so in ``details["method"]``. Truncated negative binomial ``K`` (shape ``eta``, ``gamma``; ``eta = 1`` the
  geometric, ``eta = 0`` the logarithmic law), Theorem 2:
  ``eps'(lambda) = eps(lambda) + (1 + eta) min_lambda^ [(1 - 1/lambda^) eps(lambda^) + log(1/gamma) / lambda^]
  + log(E K) / (lambda - 1)``. Poisson ``K`` (mean ``mu``), Theorem 6: ``eps'(lambda) = eps(lambda) + mu delta^
  + log(mu) / (lambda - 1)`` where one run is ``(eps^, delta^)``-DP with ``e^eps^ = 1 + 1/(lambda - 1)``;
  tightdp's certified curve gives ``delta^`` (dp_accounting converts the RDP curve instead, looser). The
  RDP of one run is tightdp's ``RDPAccountant``'s, converted by Canonne, Kamath, Steinke 2020 Prop. 12.
  Liu & Talwar 2019's geometric-stopping bound (``3 eps``-DP for an ``eps``-DP run) is Papernot & Steinke's
  Corollary 3 with ``eta = 1``, which this covers. Both theorems act on a Renyi curve (``tuned_rdp``, which
  also takes a curve the user brings, e.g. a paper's); the result is made non-increasing towards small
  orders (a ``(lambda, e)``-RDP procedure is ``(lambda', e)``-RDP for ``lambda' < lambda``). Poisson means
  below 1 are refused: there Theorem 6's ``log(mu) / (lambda - 1)`` can go below 0, which no divergence is.

* Random ``K``, second route (Koskela, Redberg & Wang 2024): the tuned procedure's privacy profile bounded from
  one run's certified privacy profile through the generating function of ``K`` (``tightdp._tuning_profile``:
  the inequality, its proof and why certified inputs keep it a bound), solved for epsilon at ``delta`` with
  outward rounding. The upper end is the smaller of the two routes; ``details["method"]`` names the winner,
  ``details["rdp_epsilon"]`` and ``details["profile_epsilon"]`` give both. ``K`` fixed with the best run
  released: the same profile bound with ``f(z) = z^K``, against the composition of ``K`` runs.

Lower ends, from attained pairs, the larger of two concrete instances of the procedure:

* Constant score: every run is equally good and the released output is one run's output (any tie-breaking
  that does not look at the data), so the procedure is one run (``K >= 1``), or one run mixed with the empty
  output ``w.p. P(K = 0)`` (Poisson: ``delta`` scales by ``1 - e^(-mu)``, as
  ``H_a((1-p) P + p o || (1-p) Q + p o) = (1 - p) H_a(P || Q)`` for ``a >= 1``).
* Threshold score (``tightdp._tuning_lower``, where the proof is): the score ``1{L > c}`` on one run's attained
  privacy loss ``L``. The released score is 1 when some run's loss exceeds ``c``, with probability
  ``1 - f(1 - S(c))`` (``f`` the generating function of ``K``, ``S`` the loss's tail under either data set),
  so ``delta_tuned(eps) >= [1 - f(1 - S_P(c))] - e^eps [1 - f(1 - S_Q(c))]``; the tails come certified from one
  run's certified ``delta(eps)`` curve (its convexity in ``e^eps``). With small tails the event is about
  ``E K`` times as likely as in one run, so this lower end is close to one run's epsilon at ``delta / E K``
  (DP-SGD ``q = 0.01``, ``sigma = 1.1``, 1000 steps, ``delta = 1e-6``, geometric ``K`` of mean 10: 1.976
  against one run's 1.751; upper end 2.613). ``details["lower_method"]`` names the instance that gave the lower
  end; ``details["lower_threshold"]``, ``details["threshold_lower"]`` and ``details["one_run_lower"]`` give the
  threshold and both values. A run whose loss never exceeds ``eps0`` (pure DP) gains nothing: ``S_P <= e^eps0
  S_Q`` and ``1 - f(1 - x)`` is concave and 0 at 0, so the event's two probabilities are at most ``e^eps0``
  apart; there the constant score's lower end stays.

``release="all"`` (every run's output published) with ``K`` fixed: the ``K``-fold composition's own lower end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._mechanism_epsilon import discrete_vector_epsilon as discrete_vector_epsilon
from ._mechanism_epsilon import selection_epsilon as selection_epsilon
from ._mechanism_epsilon import times as _times
from ._tuning_lower import tuned_lower_epsilon as _tuned_lower_epsilon
from ._tuning_profile import StoppingLaw as _StoppingLaw
from ._tuning_profile import certified_epsilon as _certified_epsilon
from ._tuning_profile import tuned_profile_delta as tuned_profile_delta
from ._tuning_profile import tuned_profile_epsilon as tuned_profile_epsilon
from ._tuning_rdp import gamma_for_mean as _gamma_for_mean
from ._tuning_rdp import theorem_2 as _theorem_2
from ._tuning_rdp import truncated_negative_binomial_mean as truncated_negative_binomial_mean
from ._tuning_rdp import tuned_rdp as tuned_rdp
from ._types import FloatArray
from ._validation import check_choice, check_count, check_delta, check_real
from .accountants import ConnectDotsAccountant, RDPAccountant
from .accountants import _rdp_math as rm
from .bounds import Bounds
from .errors import UnsupportedMechanismError
from .losses import DiscreteLoss
from .mechanisms.base import Mechanism

__all__ = [
    "Tuning",
    "selection_epsilon",
    "tuning_epsilon",
    "discrete_vector_epsilon",
    "TUNING_DISTRIBUTIONS",
    "truncated_negative_binomial_mean",
    "tuned_rdp",
    "tuned_profile_delta",
    "tuned_profile_epsilon",
]

#: the laws of the number of runs ``tuning_epsilon`` accepts
TUNING_DISTRIBUTIONS = ("fixed", "poisson", "geometric", "logarithmic", "negative-binomial")

#: one run: a mechanism, or its ledger of ``(mechanism, count)``
RunLedger = Mechanism | Iterable[tuple[Mechanism, int]]


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """How a training run was tuned: the law of the number of runs and what was released.

    ``distribution`` is one of ``TUNING_DISTRIBUTIONS``: ``"fixed"`` needs ``runs``; the random laws need
    ``mean`` (``E K >= 1``), and ``"negative-binomial"`` also ``shape > 0``; ``release`` is ``"best"`` (only the
    selected run's output) or ``"all"`` (fixed runs only). ``epsilon(run=..., delta=...)`` is
    ``tuning_epsilon``'s interval.

    Parameters
    ----------
    distribution : str
        The law of the number of runs ``K``: ``"fixed"``, ``"poisson"``, ``"geometric"``, ``"logarithmic"`` or
        ``"negative-binomial"`` (Papernot & Steinke 2022).
    runs : int, optional
        ``K`` for ``"fixed"`` (required there, refused otherwise).
    mean : float, optional
        ``E K >= 1`` for the random laws (required there, refused for ``"fixed"``).
    shape : float, optional
        The negative binomial's shape ``eta > 0`` (``"negative-binomial"`` only).
    release : str, default ``"best"``
        ``"best"`` (only the selected run's output) or ``"all"`` (every run's output; fixed runs only).

    Raises
    ------
    ValueError
        A field missing, out of range or not meaningful for the law, naming ``tuning.<field>``.
    """

    distribution: str
    runs: int | None = None
    mean: float | None = None
    shape: float | None = None
    release: str = "best"

    def __post_init__(self) -> None:
        check_choice("tuning.distribution", self.distribution, TUNING_DISTRIBUTIONS)
        check_choice("tuning.release", self.release, ("best", "all"))
        if self.distribution == "fixed":
            if self.runs is None:
                raise ValueError("tuning.runs is required for distribution='fixed'")
            object.__setattr__(self, "runs", check_count("tuning.runs", self.runs))
            for name in ("mean", "shape"):
                if getattr(self, name) is not None:
                    raise ValueError(f"tuning.{name} applies to a random number of runs, not to distribution='fixed'")
            return
        if self.runs is not None:
            raise ValueError(
                "tuning.runs applies to distribution='fixed'; give tuning.mean for a random number of runs"
            )
        if self.release != "best":
            raise ValueError("tuning.release='all' needs a fixed number of runs (distribution='fixed')")
        if self.mean is None:
            raise ValueError(f"tuning.mean is required for distribution={self.distribution!r}")
        object.__setattr__(self, "mean", check_real("tuning.mean", self.mean, low=1.0, low_open=False))
        if self.distribution == "negative-binomial":
            if self.shape is None:
                raise ValueError("tuning.shape is required for distribution='negative-binomial'")
            object.__setattr__(self, "shape", check_real("tuning.shape", self.shape, low=0.0))
        elif self.shape is not None:
            raise ValueError(f"tuning.shape is fixed by distribution={self.distribution!r}; leave it out")

    @classmethod
    def parse(cls, value: Tuning | dict[str, Any]) -> Tuning:
        """A ``Tuning`` from itself or a dict of its fields.

        Parameters
        ----------
        value : Tuning or dict
            A ``Tuning`` (returned as it is) or ``{"distribution": ..., ...}``.

        Returns
        -------
        Tuning
            The procedure.

        Raises
        ------
        ValueError
            If ``value`` is neither, has an unknown key (named) or lacks ``distribution``, or a field is bad.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"tuning must be a tightdp.tuning.Tuning or a dict of its fields, got {value!r}")
        fields = ("distribution", "runs", "mean", "shape", "release")
        unknown = [k for k in value if k not in fields]
        if unknown:
            raise ValueError(f"tuning.{unknown[0]} is not a field (fields: {', '.join(fields)})")
        if "distribution" not in value:
            raise ValueError("tuning.distribution is required")
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (``parse`` is the inverse).

        Returns
        -------
        dict
            ``distribution``, ``runs``, ``mean``, ``shape``, ``release``.
        """
        return {
            "distribution": self.distribution,
            "runs": self.runs,
            "mean": self.mean,
            "shape": self.shape,
            "release": self.release,
        }

    def describe(self) -> str:
        """The procedure in words.

        Returns
        -------
        str
            E.g. ``"8 fixed runs, the best released"``.
        """
        what = "the best released" if self.release == "best" else "every run's output released"
        if self.distribution == "fixed":
            return f"{self.runs} fixed run{'s' if self.runs != 1 else ''}, {what}"
        law = self.distribution + (f" (shape {self.shape:g})" if self.shape is not None else "")
        return f"a random number of runs ({law} law, mean {self.mean:g}), {what}"

    def epsilon(self, *, run: RunLedger, delta: float) -> Bounds:
        """``tuning_epsilon`` of ``run`` (one run's ledger) under this procedure.

        Parameters
        ----------
        run : Mechanism or list of (Mechanism, count)
            One training run.
        delta : float
            The delta, in (0, 1).

        Returns
        -------
        Bounds
            The procedure's certified interval (``tuning_epsilon``).

        Raises
        ------
        ValueError
            If ``run`` is not a mechanism or a ledger, or ``delta`` is out of (0, 1).
        UnsupportedMechanismError
            If neither route gives a finite epsilon for a random number of runs (``tuning_epsilon``).
        """
        return tuning_epsilon(
            run=run,
            delta=delta,
            distribution=self.distribution,
            runs=self.runs,
            mean=self.mean,
            shape=self.shape,
            release=self.release,
        )


def _ledger(run: RunLedger) -> list[tuple[Mechanism, int]]:
    if isinstance(run, Mechanism):
        return [(run, 1)]
    try:
        entries = [(m, int(c)) for m, c in run]
    except (TypeError, ValueError):
        raise ValueError(f"run must be a tightdp Mechanism or a list of (Mechanism, count), got {run!r}") from None
    if not entries or not all(isinstance(m, Mechanism) and c >= 1 for m, c in entries):
        raise ValueError(f"run must be a tightdp Mechanism or a non-empty list of (Mechanism, count >= 1), got {run!r}")
    return entries


def _run_rdp(entries: list[tuple[Mechanism, int]]) -> tuple[FloatArray, FloatArray]:
    """One run's RDP curve on the RDP accountant's orders: its own for the mechanisms it knows, and for
    finite pairs (pure / approximate DP, randomized response, the discrete Laplace) the exact Renyi
    divergences of their atoms (both directions, the larger)."""
    acc = RDPAccountant()
    orders = acc.orders
    known = [(m, c) for m, c in entries if acc._supports(m)]
    total = acc.compose(known).rdp() if known else np.zeros_like(orders)
    for m, c in entries:
        if acc._supports(m):
            continue
        curves = []
        for loss in m.privacy_losses():
            if not isinstance(loss, DiscreteLoss) or loss.infinity_mass > 0.0:
                raise UnsupportedMechanismError(
                    f"no Renyi curve for {m.describe()}: the Papernot-Steinke bounds "
                    "need one (use distribution='fixed')"
                )
            v, p = (np.asarray(x, float) for x in (loss.values, loss.probs))
            curves.append(rm.discrete_rdp(p=p, q=p * np.exp(-v), orders=orders))
        total = total + c * np.maximum(*curves)
    return orders, total


def tuning_epsilon(
    *,
    run: RunLedger,
    delta: float,
    distribution: str = "fixed",
    runs: int | None = None,
    mean: float | None = None,
    shape: float | None = None,
    release: str = "best",
) -> Bounds:
    """Certified epsilon of a tuning procedure that trains ``run`` (one run's ledger) several times.

    Parameters
    ----------
    run : Mechanism or list of (Mechanism, count)
        One training run (e.g. ``[(PoissonSampled(Gaussian(...), sampling_rate=q), steps)]``).
    delta : float
        Target delta in ``(0, 1)``.
    distribution : str
        ``"fixed"`` (``runs`` runs), ``"poisson"`` (``mean``), ``"geometric"`` (``mean``; shape 1),
        ``"logarithmic"`` (``mean``; shape 0) or ``"negative-binomial"`` (``mean`` and ``shape > 0``).
    runs : int, optional
        ``K`` for ``"fixed"`` (required there, refused otherwise).
    mean : float, optional
        ``E K >= 1`` for the random laws (required there, refused for ``"fixed"``).
    shape : float, optional
        The negative binomial's shape ``eta > 0`` (``"negative-binomial"`` only).
    release : str
        ``"best"`` (only the selected run's output) or ``"all"`` (fixed runs only: every output).

    Returns
    -------
    Bounds
        ``upper``: the smaller of the composition of ``K`` runs and (best run released) the privacy-profile
        bound of Koskela, Redberg & Wang 2024 with ``f(z) = z^K`` (fixed ``K``), or of Papernot & Steinke 2022
        Thm 2 / Thm 6 (Renyi DP) and the privacy-profile bound (random ``K``); ``details["method"]`` names the
        winner, ``details`` give both values. ``lower``: the larger of one run's certified lower end (scaled for
        ``P(K = 0)`` under Poisson) and the threshold-score instance's (module docstring); the ``K``-fold
        composition's for ``release="all"``.

    Raises
    ------
    ValueError
        A parameter missing, out of range or not meaningful for the distribution (named).
    UnsupportedMechanismError
        If neither route gives a finite epsilon (no Renyi curve and a profile bound that never reaches
        ``delta``).

    References
    ----------
    Papernot & Steinke 2022 (ICLR), Theorems 2 and 6; Koskela, Redberg & Wang 2024, "Privacy profiles for
    private selection" (ICML, arXiv 2402.06701), the bound proved in ``tightdp._tuning_profile``.
    """
    delta = check_delta("delta", delta)
    check_choice("distribution", distribution, TUNING_DISTRIBUTIONS)
    check_choice("release", release, ("best", "all"))
    entries = _ledger(run)
    if distribution == "fixed":
        if runs is None:
            raise ValueError("runs is required for distribution='fixed'")
        runs = check_count("runs", runs)
        if mean is not None or shape is not None:
            raise ValueError("mean and shape apply to random numbers of runs, not to distribution='fixed'")
        b = ConnectDotsAccountant().compose(_times(entries, runs)).epsilon(delta)
        details: dict[str, Any] = {"method": f"composition of {runs} runs (dominating pair)", "runs": runs}
        upper = float(b.upper)
        if release == "best":
            base = ConnectDotsAccountant().compose(entries)
            one = base.epsilon(delta)
            if runs > 1:
                prof, _ = _profile_route(entries, base, float(one.upper), _StoppingLaw("fixed", runs=runs), delta)
                details.update(composition_epsilon=upper, profile_epsilon=prof)
                if prof < upper:
                    upper, details["method"] = prof, _PROFILE_METHOD + f" ({runs} fixed runs)"
        else:
            one = b
        if release == "best":
            lower = _lower_end(entries, delta, _StoppingLaw("fixed", runs=runs), float(one.lower), "", details)
        else:
            lower, details["lower_method"] = float(one.lower), f"composition of {runs} runs"
        return Bounds(lower=min(lower, upper), estimate=min(float(b.estimate), upper), upper=upper, details=details)
    if runs is not None:
        raise ValueError("runs applies to distribution='fixed'; give mean for a random number of runs")
    if release != "best":
        raise ValueError("release='all' needs a fixed number of runs")
    if mean is None:
        raise ValueError(f"mean is required for distribution={distribution!r}")
    mean = check_real("mean", mean, low=1.0, low_open=False)
    if distribution == "negative-binomial":
        if shape is None:
            raise ValueError("shape is required for distribution='negative-binomial'")
        shape = check_real("shape", shape, low=0.0)
    elif shape is not None:
        raise ValueError(f"shape is fixed by distribution={distribution!r}; leave it out")
    else:
        shape = {"geometric": 1.0, "logarithmic": 0.0, "poisson": math.inf}[distribution]
    details = {"distribution": distribution, "mean": mean}
    base = ConnectDotsAccountant().compose(entries)
    if math.isinf(shape):
        law = _StoppingLaw("poisson", mean=mean)
        p_zero = math.exp(-mean)
    else:
        gamma = _gamma_for_mean(mean, shape)
        # mean 1 with K >= 1 is K = 1 surely, whatever the shape
        law = _StoppingLaw("negative-binomial", gamma=1.0 if mean == 1.0 else gamma, shape=shape)
        details.update(gamma=gamma, shape=shape)
        p_zero = 0.0
    rdp_upper, rdp_method = _rdp_route(entries, base, delta, mean, shape, details)
    target = delta / (1.0 - p_zero)
    one_run = base.epsilon(target) if target < 1.0 else None
    run_eps = float(one_run.upper) if one_run is not None else float(base.epsilon(delta).upper)
    prof, split = _profile_route(entries, base, run_eps, law, delta)
    details.update(rdp_epsilon=rdp_upper, profile_epsilon=prof, profile_split=split)
    if prof < rdp_upper:
        upper, details["method"] = prof, _PROFILE_METHOD
    else:
        upper, details["method"] = rdp_upper, rdp_method
    if not math.isfinite(upper):
        raise UnsupportedMechanismError(
            f"no finite tuning bound at delta={delta:g}: {rdp_method}; the privacy-profile route reaches no "
            "epsilon either (one run's delta stays above delta / E K)"
        )
    one_lower = float(one_run.lower) if one_run is not None else 0.0
    lower = _lower_end(entries, delta, law, one_lower, ", scaled by P(K >= 1)" if p_zero else "", details)
    return Bounds(lower=min(lower, upper), estimate=upper, upper=upper, details=details)


def _lower_end(
    entries: list[tuple[Mechanism, int]],
    delta: float,
    law: _StoppingLaw,
    one: float,
    note: str,
    details: dict[str, Any],
) -> float:
    """The larger of one run's certified lower end ``one`` and the threshold-score instance's
    (``tightdp._tuning_lower``); ``details`` get ``lower_method`` and the instance's ``lower_threshold``."""
    if law.kind == "fixed" and law.runs == 1:  # K = 1 surely: one run
        details["lower_method"] = "one run (constant score)"
        return one
    eps, info = _tuned_lower_epsilon(entries, delta, law.tail, law.expected_runs())
    details.update(lower_threshold=info["threshold"], threshold_lower=eps, one_run_lower=one)
    if "note" in info:  # why the instance gave no lower end (no attained pair, a refused curve)
        details["threshold_note"] = info["note"]
    if eps > one:
        details["lower_method"] = _THRESHOLD_METHOD
        return eps
    details["lower_method"] = "one run (constant score)" + note
    return one


#: ``details["lower_method"]`` of the threshold-score instance
_THRESHOLD_METHOD = (
    "threshold score on one run's attained privacy loss (the best run released: some run's loss above the "
    "threshold, probability 1 - f(1 - S))"
)

#: ``details["method"]`` of the privacy-profile route
_PROFILE_METHOD = (
    "privacy profile: Koskela, Redberg & Wang 2024 (one run's certified delta(eps) through the generating "
    "function of K)"
)


def _profile_route(
    entries: list[tuple[Mechanism, int]], base: ConnectDotsAccountant, run_eps: float, law: _StoppingLaw, delta: float
) -> tuple[float, float]:
    """The profile route's ``(epsilon, eps1)`` (``tightdp._tuning_profile``): profile points from an accountant
    with a fixed delta slack (``1e-3 delta / E K`` in ``[1e-18, 1e-9]``: no tilted re-runs, seconds on a long
    run), refined splits from ``base``'s default accuracy."""
    if law.kind == "fixed" and law.runs == 1:  # K = 1 surely (gamma = 1): one run
        return float(base.epsilon(delta).upper), math.nan
    slack = min(1e-9, max(1e-18, 1e-3 * delta / law.expected_runs()))
    coarse = ConnectDotsAccountant(delta_error=slack).compose(entries)

    def upper(acc: ConnectDotsAccountant, eps: FloatArray) -> FloatArray:
        up = acc.delta(eps).upper  # an upper end that is missing or NaN is read as 1 (no information)
        out = np.ones_like(eps) if up is None else np.asarray(up, dtype=float)
        return np.where(np.isnan(out), 1.0, out)

    return _certified_epsilon(lambda e: upper(coarse, e), law, delta, run_eps, lambda e: upper(base, e))


def _rdp_route(
    entries: list[tuple[Mechanism, int]],
    base: ConnectDotsAccountant,
    delta: float,
    mean: float,
    shape: float,
    details: dict[str, Any],
) -> tuple[float, str]:
    """Papernot & Steinke 2022's route: ``(epsilon, method)``; ``inf`` when a mechanism has no Renyi curve."""
    try:
        orders, rdp = _run_rdp(entries)
    except UnsupportedMechanismError as exc:
        return math.inf, f"Renyi route unavailable ({exc})"
    if math.isinf(shape):
        eps_hat = np.log1p(1.0 / (orders - 1.0))
        d_hat = np.asarray(base.delta(eps_hat).upper, float)
        out = tuned_rdp(orders=orders, rdp=rdp, distribution="poisson", mean=mean, delta_hat=d_hat)
        method = (
            "Renyi DP: Papernot & Steinke 2022 Thm 6 (Poisson), one run's delta^ from its "
            "certified curve; CKS 2020 Prop. 12 conversion"
        )
    else:
        out = _theorem_2(orders, rdp, gamma=details["gamma"], shape=shape)
        out = np.minimum.accumulate(out[::-1])[::-1]  # RDP is non-decreasing in the order
        method = "Renyi DP: Papernot & Steinke 2022 Thm 2 (truncated negative binomial); CKS 2020 Prop. 12 conversion"
    upper, order = rm.epsilon_from_rdp(orders=orders, rdp=out, delta=delta)
    details["order"] = order
    return float(upper), method
