"""The sparse vector technique (``SparseVector``, public from ``tightdp.mechanisms.selection``), apart from the
other selection mechanisms: its own noise (a noisy threshold and noisy queries) and its own attained pairs.

**Upper end.** Lyu, Su, Li 2017 (Alg. 1, epsilon split between the threshold and the queries) prove it
epsilon-DP; ``PureDP(epsilon)``'s pair dominates every epsilon-DP mechanism (Kairouz, Oh, Viswanath 2015).

**Lower end** (the threshold's share ``epsilon_1`` given). One query whose answer sits ``a Delta`` from the
threshold on ``D`` and ``(a + 1) Delta`` on ``D'``, released as above or below: a two-output pair of concrete
neighbouring data sets (the class docstring gives its probabilities), for ``a`` in ``(-1, -0.5, 0)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_count, check_real
from ._finite_pairs import FinitePair, _above
from ._finite_pairs import check_selection_epsilon as _check_epsilon
from .base import LossPair, Mechanism
from .basic import PureDP

__all__ = ["SparseVector"]


@dataclass(frozen=True, kw_only=True)
class SparseVector(Mechanism):
    """The sparse vector technique answering until ``cutoff`` queries exceed a noisy threshold (Lyu, Su, Li
    2017, Alg. 1: threshold noise ``Lap(Delta / epsilon_1)``, query noise ``Lap(2 cutoff Delta / epsilon_2)``,
    ``epsilon_1 + epsilon_2 = epsilon``): epsilon-DP, dominated by ``PureDP(epsilon)``.

    Attained pairs (``threshold_epsilon = epsilon_1`` given): one query whose answer sits ``a Delta`` from the
    threshold on ``D`` and ``(a + 1) Delta`` on ``D'`` (the record moves it by ``Delta``), released as above /
    below; with ``W`` the query noise minus the threshold noise, ``P(above) = P(W >= -a Delta)``, for ``a`` in
    ``(-1, -0.5, 0)``. ``P(W > x) = (b1^2 e^(-x / b1) - b2^2 e^(-x / b2)) / (2 (b1^2 - b2^2))`` for ``x >= 0``
    (two independent Laplace variables of scales ``b1``, ``b2``; ``e^(-x / b) (1 + x / (2 b)) / 2`` when equal).
    Without the split no pair is attained for every split (an extreme split loses almost nothing per query): lower
    end 0.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``[0, 500]``.
    cutoff : int, default 1
        Number of above-threshold answers before stopping, a positive integer.
    threshold_epsilon : float or None, default None
        The threshold's share ``epsilon_1``, in ``(0, epsilon)``; ``None``: not stated (no attained pair).

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``[0, 500]``, ``cutoff`` is not a positive integer or ``threshold_epsilon`` lies
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
        b1 = 1.0 / self.threshold_epsilon
        b2 = 2.0 * self.cutoff / (self.epsilon - self.threshold_epsilon)
        out = []
        for a in (-1.0, -0.5, 0.0):
            (p_up, p_down), (q_up, q_down) = _above(-a, b1, b2), _above(-a - 1.0, b1, b2)
            if min(p_up, p_down, q_up, q_down) > 0.0:
                values = (math.log(p_up / q_up), math.log(p_down / q_down))
                out.append(FinitePair(values=values, probs=(p_up, p_down)))
        return tuple(out)

    def attained_mechanism(self) -> Mechanism | None:
        """The last one-query pair, the query at the threshold when it is in range (``None`` without
        ``threshold_epsilon``: lower ends 0).

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        pairs = self.attained_pairs()
        return pairs[-1] if pairs else None
