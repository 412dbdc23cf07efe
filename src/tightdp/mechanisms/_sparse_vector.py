"""The sparse vector technique (``SparseVector``, public from ``tightdp.mechanisms.selection``), apart from the
other selection mechanisms: its own noise (a noisy threshold and noisy queries) and its own attained pairs.

**Upper end.** Lyu, Su, Li 2017 (Alg. 1, epsilon split between the threshold and the queries) prove it
epsilon-DP; ``PureDP(epsilon)``'s pair dominates every epsilon-DP mechanism (Kairouz, Oh, Viswanath 2015).

**Lower end** (the threshold's share ``epsilon_1`` given). One query whose answer sits ``a Delta`` from the
threshold on ``D`` and ``(a + 1) Delta`` on ``D'``, released as above or below: a two-output pair of concrete
neighbouring data sets (the class docstring gives its probabilities), for ``a`` in ``(-1, -0.5, 0)``.

**A stream of equal queries** (``first_above_pair``). Every query of a stream sits ``a Delta`` from the threshold
on ``D`` and ``(a + 1) Delta`` on ``D'`` (the record moves each by ``Delta``). Keep only the index ``K`` of the
first answer above the threshold, merging ``K >= k0`` into one output (post-processings of the release, so the
pair's epsilon is a lower end of the mechanism's). The threshold noise ``rho`` is shared: given it, the answers
are independent, each above w.p. ``s(rho) = P(nu >= rho - a Delta)``, so ``P(K = j) = E[(1 - s)^(j - 1) s]`` and
``P(K >= k0) = E[(1 - s)^(k0 - 1)]``. On each side of ``rho = 0`` and ``rho = a Delta`` the integrand is a short
sum of exponentials in ``rho`` (``s = e^(-y / b2) / 2`` for ``y = rho - a Delta >= 0``, ``1 - s = e^(y / b2) /
2`` below): integrated exactly, with a bound on the rounding of every term (the sums alternate), and declined
where that bound exceeds ``CLOSED_FORM_REL_ERROR``. Epsilon 1 split in halves, ten uses, delta 1e-6: the best
single query gives 2.07, a stream 3.45 (pure DP, the upper end: 10.0).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from .._validation import check_count, check_real
from ._finite_pairs import CLOSED_FORM_REL_ERROR, FinitePair, _above
from ._finite_pairs import check_selection_epsilon as _check_epsilon
from .base import EpsilonDP, LossPair, Mechanism
from .basic import PureDP

__all__ = ["SparseVector", "first_above_law", "first_above_pair"]

_U = 2.0**-53
#: outputs of the stream's pair: the index of the first answer above, 1 to ``_FIRST_ABOVE_OUTPUTS - 1``, or later
#: a bound on the relative error a loss ``log(p / q)`` of probabilities below 1 adds to the implied Q-mass
_LOSS_ROUNDING = 4e-13
_FIRST_ABOVE_OUTPUTS = 8  # (12 gains nothing: its alternating sums round beyond CLOSED_FORM_REL_ERROR)


def _exp_integral(lam: float, a: float, sign: float, b1: float, lo: float, hi: float) -> tuple[float, float]:
    """``(I, A)``: ``I = int_lo^hi e^(lam (rho - a) + sign rho / b1) d rho`` (finite, the exponent's slope
    ``kappa`` of the sign that makes an infinite end converge) and ``A``, the largest exponent's magnitude met
    (each exponential's relative error is below ``(A + 1) u``)."""
    kappa = lam + sign / b1

    def expo(r: float) -> float:
        return lam * (r - a) + sign * r / b1

    if math.isinf(lo):
        return math.exp(expo(hi)) / kappa, abs(expo(hi))
    if math.isinf(hi):
        return math.exp(expo(lo)) / -kappa, abs(expo(lo))
    width = hi - lo
    big = max(abs(expo(lo)), abs(expo(hi)))
    if kappa > 0.0:
        return math.exp(expo(hi)) * -math.expm1(-kappa * width) / kappa, big
    if kappa < 0.0:
        return math.exp(expo(lo)) * -math.expm1(kappa * width) / -kappa, big
    return math.exp(expo(lo)) * width, big


def first_above_law(a: float, b1: float, b2: float, k0: int) -> tuple[list[float], float] | None:
    """The law of the index ``K`` of the first answer above a noisy threshold (module docstring, "A stream of equal
    queries"): ``[P(K = 1), ..., P(K = k0 - 1), P(K >= k0)]`` for queries ``a`` (in units of ``Delta``) from the
    threshold, threshold noise ``Lap(b1)`` and query noise ``Lap(b2)`` (both in units of ``Delta``), and a bound on
    every entry's relative rounding error; ``None`` where an entry is not positive.

    Parameters
    ----------
    a : float
        The queries' common offset from the threshold.
    b1, b2 : float
        The threshold's and the queries' Laplace scales, positive.
    k0 : int
        The number of outputs (``>= 2``).

    Returns
    -------
    tuple or None
        The probabilities and the largest relative error bound, or ``None``.

    Raises
    ------
    ZeroDivisionError
        If a scale is 0 (``SparseVector`` passes positive scales only).
    """
    cuts = sorted({0.0, a})
    edges = [-math.inf, *cuts, math.inf]
    law, worst = [], 0.0
    for j in range(1, k0 + 1):
        last = j == k0  # P(K >= k0) = E[(1 - s)^(k0 - 1)]
        power = k0 - 1 if last else j - 1
        # (coefficient, lam) of the terms coef e^(lam y), y = rho - a, above and below the kink of s
        above = [
            (math.comb(power, i) * (-1.0) ** i * 0.5 ** (i + (0 if last else 1)), -(i + (0 if last else 1)) / b2)
            for i in range(power + 1)
        ]
        below = [(0.5**power, power / b2)] + ([] if last else [(-(0.5 ** (power + 1)), (power + 1) / b2)])
        total = bound = 0.0
        for lo, hi in itertools.pairwise(edges):
            if not lo < hi:
                continue
            terms = above if lo >= a else below
            sign = 1.0 if hi <= 0.0 else -1.0  # the threshold noise's density e^(-|rho| / b1) / (2 b1)
            for coef, lam in terms:
                value, big = _exp_integral(lam, a, sign, b1, lo, hi)
                t = coef * value / (2.0 * b1)
                total += t
                bound += abs(t) * (big + 8.0 + 3 * len(terms))
        if not total > 0.0:
            return None
        law.append(total)
        worst = max(worst, 1.01 * _U * bound / total)
    return law, worst


def first_above_pair(a: float, b1: float, b2: float, *, swapped: bool = False) -> FinitePair | None:
    """The stream's attained pair (module docstring): queries at ``a Delta`` from the threshold on ``D``, ``(a +
    1) Delta`` on ``D'`` (``swapped``: the data sets exchanged), ``K`` released up to ``_FIRST_ABOVE_OUTPUTS - 1``.
    ``None`` where a probability is not positive or its rounding bound exceeds ``CLOSED_FORM_REL_ERROR``.

    Parameters
    ----------
    a : float
        The queries' offset from the threshold on ``D``, in units of ``Delta``.
    b1, b2 : float
        The threshold's and the queries' Laplace scales in units of ``Delta``.
    swapped : bool, default False
        Exchange the two data sets.

    Returns
    -------
    FinitePair or None
        The pair.

    Raises
    ------
    ZeroDivisionError
        If a scale is 0 (as ``first_above_law``).
    """
    laws = [first_above_law(x, b1, b2, _FIRST_ABOVE_OUTPUTS) for x in (a, a + 1.0)]
    if laws[0] is None or laws[1] is None or max(laws[0][1], laws[1][1]) > CLOSED_FORM_REL_ERROR:
        return None
    p, q = laws[0][0], laws[1][0]
    if swapped:
        p, q = q, p
    values = tuple(math.log(x / y) for x, y in zip(p, q))
    # the laws' own rounding bounds, plus the losses' (a ratio and a logarithm of at most 745 in size)
    rho = max(laws[0][1], laws[1][1]) + _LOSS_ROUNDING
    return FinitePair(values=values, probs=tuple(p), mass_rel_error=rho)


@dataclass(frozen=True, kw_only=True)
class SparseVector(EpsilonDP, Mechanism):
    """The sparse vector technique answering until ``cutoff`` queries exceed a noisy threshold (Lyu, Su, Li
    2017, Alg. 1: threshold noise ``Lap(Delta / epsilon_1)``, query noise ``Lap(2 cutoff Delta / epsilon_2)``,
    ``epsilon_1 + epsilon_2 = epsilon``): epsilon-DP, dominated by ``PureDP(epsilon)``.

    Attained pairs (``threshold_epsilon = epsilon_1`` given): one query whose answer sits ``a Delta`` from the
    threshold on ``D`` and ``(a + 1) Delta`` on ``D'`` (the record moves it by ``Delta``), released as above /
    below; with ``W`` the query noise minus the threshold noise, ``P(above) = P(W >= -a Delta)``, for ``a`` in
    ``(-1, -0.5, 0)``. ``P(W > x) = (b1^2 e^(-x / b1) - b2^2 e^(-x / b2)) / (2 (b1^2 - b2^2))`` for ``x >= 0``
    (two independent Laplace variables of scales ``b1``, ``b2``; ``e^(-x / b) (1 + x / (2 b)) / 2`` when equal).
    Stronger: a stream of such queries, the index of the first answer above released (module docstring;
    ``attained_pair_families``, searched over ``a`` by ``selection_epsilon``). Without the split no pair is attained for every split (an extreme split loses almost nothing per query): lower
    end 0.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``(0, 500]``.
    cutoff : int, default 1
        Number of above-threshold answers before stopping, a positive integer.
    threshold_epsilon : float or None, default None
        The threshold's share ``epsilon_1``, in ``(0, epsilon)``; ``None``: not stated (no attained pair).

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``(0, 500]``, ``cutoff`` is not a positive integer or ``threshold_epsilon`` lies
        outside ``(0, epsilon)``.

    References
    ----------
    Lyu, Su, Li 2017, "Understanding the sparse vector technique for differential privacy", Alg. 1.
    """

    type_name = "sparse_vector"
    pair_attained = False
    epsilon: float
    cutoff: int = 1
    threshold_epsilon: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))
        object.__setattr__(self, "cutoff", check_count("cutoff", self.cutoff))
        if self.threshold_epsilon is not None:
            share = check_real("threshold_epsilon", self.threshold_epsilon, low=0.0, high=self.epsilon)
            if not 0.0 < share < self.epsilon:
                raise ValueError(f"threshold_epsilon must lie in (0, epsilon), got {self.threshold_epsilon!r}")
            object.__setattr__(self, "threshold_epsilon", share)

    def privacy_losses(self) -> LossPair:
        return PureDP(epsilon=self.epsilon).privacy_losses()

    def attained_pairs(self) -> tuple[Mechanism, ...]:
        """The one-query pairs of the class docstring (empty without ``threshold_epsilon``).

        Returns
        -------
        tuple of Mechanism
            ``FinitePair`` objects, each a certified lower end on its own; empty when none is known.
        """
        if self.threshold_epsilon is None:
            return ()
        b1, b2 = self._scales()
        out = []
        for a in (-1.0, -0.5, 0.0):
            (p_up, p_down), (q_up, q_down) = _above(-a, b1, b2), _above(-a - 1.0, b1, b2)
            if min(p_up, p_down, q_up, q_down) > 0.0:
                values = (math.log(p_up / q_up), math.log(p_down / q_down))
                out.append(FinitePair(values=values, probs=(p_up, p_down), mass_rel_error=CLOSED_FORM_REL_ERROR))
        return tuple(out)

    def _scales(self) -> tuple[float, float]:
        """The threshold's and the queries' Laplace scales in units of ``Delta`` (``threshold_epsilon`` given)."""
        share = float(self.threshold_epsilon or 0.0)
        return 1.0 / share, 2.0 * self.cutoff / (self.epsilon - share)

    def attained_pair_families(self) -> tuple[tuple[str, Callable[[float], Mechanism | None]], ...]:
        """The stream pairs of the module docstring as families of the queries' offset ``a``, in both directions,
        which ``tightdp.tuning.selection_epsilon`` searches at the delta asked (none without ``threshold_epsilon``).

        Returns
        -------
        tuple of (str, callable)
            ``(name, a -> pair)``.
        """
        if self.threshold_epsilon is None:
            return ()
        b1, b2 = self._scales()
        return (
            ("a stream of queries at a Delta from the threshold, raised", lambda a: first_above_pair(a, b1, b2)),
            (
                "a stream of queries at a Delta from the threshold, lowered",
                lambda a: first_above_pair(a, b1, b2, swapped=True),
            ),
        )

    def attained_mechanism(self) -> Mechanism | None:
        """The stream pair at ``a = -0.5`` (module docstring), else the last one-query pair (the query at the
        threshold) when in range; ``None`` without ``threshold_epsilon``: lower ends 0.

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        if self.threshold_epsilon is None:
            return None
        stream = first_above_pair(-0.5, *self._scales())
        if stream is not None:
            return stream
        pairs = self.attained_pairs()
        return pairs[-1] if pairs else None
