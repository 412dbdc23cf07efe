"""Mechanisms without subsampling: Gaussian, Laplace, randomized response, pure and approximate DP."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .._validation import check_count, check_positive, check_real
from ..losses import DiscreteLoss, GaussianLoss, LaplaceLoss
from .base import EpsilonDP, LossPair, Mechanism

__all__ = ["Gaussian", "Laplace", "RandomizedResponse", "PureDP", "ApproximateDP"]

_MAX_STEP_EPSILON = 500.0  # e^epsilon of one step must stay far inside double precision


@dataclass(frozen=True, kw_only=True)
class Gaussian(Mechanism):
    """Gaussian mechanism: noise ``N(0, noise_multiplier^2)`` on a query of L2 sensitivity ``sensitivity``.

    Its privacy is exactly mu-GDP with ``mu = sensitivity / noise_multiplier``
    (Dong, Roth, Su 2019; Koskela et al. 2023, Def. 5): the PRV is ``N(mu^2/2, mu^2)``.

    Attained pair: the query differs by exactly ``sensitivity`` between the two data sets (the differing
    record's contribution is a vector of that norm, the others' are equal), so the outputs are
    ``N(sensitivity e, s^2 I)`` and ``N(0, s^2 I)``, whose loss is this one: lower ends are certified.

    Parameters
    ----------
    noise_multiplier : float
        Standard deviation of the noise, positive and finite.
    sensitivity : float, default 1.0
        L2 sensitivity of the query, positive and finite.

    Raises
    ------
    ValueError
        If ``noise_multiplier`` or ``sensitivity`` is not a positive finite number.

    References
    ----------
    Dong, Roth, Su 2022, "Gaussian differential privacy", Thm 2.7; Koskela et al. 2023, Def. 5.

    Examples
    --------
    >>> from tightdp.mechanisms import Gaussian
    >>> Gaussian(noise_multiplier=2.0).mu
    0.5
    """

    type_name = "gaussian"
    pair_attained = True
    noise_multiplier: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    @property
    def mu(self) -> float:
        """The GDP parameter ``mu = sensitivity / noise_multiplier``."""
        return self.sensitivity / self.noise_multiplier

    def privacy_losses(self) -> LossPair:
        loss = GaussianLoss(mu=self.mu)
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class Laplace(Mechanism):
    """Laplace mechanism: noise ``Lap(0, scale)`` on a query of L1 sensitivity ``sensitivity``.

    Attained pair: a scalar query that differs by exactly ``sensitivity`` (``Lap(sensitivity, scale)``
    against ``Lap(0, scale)``), whose loss is ``LaplaceLoss``: lower ends are certified.

    Parameters
    ----------
    scale : float
        Scale ``b`` of the Laplace noise, positive and finite.
    sensitivity : float, default 1.0
        L1 sensitivity of the query, positive and finite.

    Raises
    ------
    ValueError
        If ``scale`` or ``sensitivity`` is not a positive finite number.

    References
    ----------
    Dwork, McSherry, Nissim, Smith 2006 (the mechanism); Koskela et al. 2020, Sec. 6 (its PLD).
    """

    type_name = "laplace"
    pair_attained = True
    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    def privacy_losses(self) -> LossPair:
        loss = LaplaceLoss(r=self.sensitivity / self.scale)
        return LossPair(loss, loss)

    def loss_top_error(self) -> float:
        r = self.sensitivity / self.scale  # one rounding: 0 where the division is exact or rounded up
        err = float(Fraction(self.sensitivity) / Fraction(self.scale) - Fraction(r))  # rounded to nearest: one up
        return math.nextafter(err, math.inf) if err > 0.0 else 0.0


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse(Mechanism):
    """k-ary randomized response: the true value w.p. ``1 - noise_parameter``, else uniform over ``num_buckets``.

    Same parametrisation as dp_accounting's ``RandomizedResponseDpEvent``.

    Attained pair: two data sets whose records' values differ (true value ``a`` against ``a' != a``): the
    outputs put ``1 - p + p/k`` on the own value, ``p/k`` on the other's and on each other bucket, which
    is the pair returned: lower ends are certified.

    Parameters
    ----------
    noise_parameter : float
        Probability ``p`` in ``(0, 1]`` of answering uniformly at random (0, the true value always, has no finite
        epsilon).
    num_buckets : int
        Number of possible values ``k``, at least 2.

    Raises
    ------
    ValueError
        If ``noise_parameter`` lies outside ``(0, 1]`` or ``num_buckets`` is not an integer >= 2.

    References
    ----------
    Warner 1965 (randomized response); dp_accounting's ``RandomizedResponseDpEvent`` (the parametrisation).
    """

    type_name = "randomized_response"
    pair_attained = True
    noise_parameter: float
    num_buckets: int

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "noise_parameter",
            check_real("noise_parameter", self.noise_parameter, low=0.0, high=1.0, high_open=False),
        )
        object.__setattr__(self, "num_buckets", check_count("num_buckets", self.num_buckets, minimum=2))

    def privacy_losses(self) -> LossPair:
        p, k = self.noise_parameter, self.num_buckets
        hi = 1.0 - p + p / k  # P of the true answer
        lo = p / k  # P of the other value Q would favour
        if lo == 0.0:  # no noise: the output reveals the record
            loss = DiscreteLoss(values=(0.0,), probs=(0.0,), infinity_mass=1.0)
        else:
            r = math.log(hi / lo)
            loss = DiscreteLoss(values=(-r, 0.0, r), probs=(lo, (k - 2) * lo, hi))
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class PureDP(EpsilonDP, Mechanism):
    """Any epsilon-DP mechanism, through its dominating pair (randomized response with ratio e^epsilon).

    Attained pair: the description names the class of epsilon-DP mechanisms, and its worst member, binary
    randomized response with ratio ``e^epsilon`` (itself epsilon-DP), attains the returned pair on two data
    sets whose bits differ (Kairouz, Oh, Viswanath 2015). Lower ends are therefore certified for the
    worst mechanism the description admits; a particular epsilon-DP mechanism may be more private.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``[0, 500]``.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``[0, 500]``.

    References
    ----------
    Kairouz, Oh, Viswanath 2015, "The composition theorem for differential privacy", Thm 2.1.
    """

    type_name = "pure_dp"
    pair_attained = True
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "epsilon",
            check_real("epsilon", self.epsilon, low=0.0, low_open=False, high=_MAX_STEP_EPSILON, high_open=False),
        )

    def privacy_losses(self) -> LossPair:
        e = self.epsilon
        loss = DiscreteLoss(values=(-e, e), probs=(1.0 / (1.0 + math.exp(e)), 1.0 / (1.0 + math.exp(-e))))
        return LossPair(loss, loss)

    def loss_top_error(self) -> float:
        return 0.0  # the top is the parameter epsilon


@dataclass(frozen=True, kw_only=True)
class ApproximateDP(Mechanism):
    """Any (epsilon, delta)-DP mechanism, through its dominating pair (Kairouz et al. 2015):
    mass ``delta`` at infinite loss and ``(1 - delta)`` times the epsilon-DP pair.

    Attained pair: the mechanism that reveals its bit with probability ``delta`` and otherwise runs binary
    randomized response with ratio ``e^epsilon`` is (epsilon, delta)-DP and has exactly this pair on two data
    sets whose bits differ (Kairouz, Oh, Viswanath 2015): lower ends are certified for the worst mechanism
    the description admits.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``[0, 500]``.
    delta : float
        The mechanism's delta, in ``[0, 1)``.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``[0, 500]`` or ``delta`` outside ``[0, 1)``.

    References
    ----------
    Kairouz, Oh, Viswanath 2015, "The composition theorem for differential privacy", Thm 2.1.
    """

    type_name = "approximate_dp"
    pair_attained = True
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "epsilon",
            check_real("epsilon", self.epsilon, low=0.0, low_open=False, high=_MAX_STEP_EPSILON, high_open=False),
        )
        object.__setattr__(
            self, "delta", check_real("delta", self.delta, low=0.0, high=1.0, low_open=False, high_open=True)
        )

    def privacy_losses(self) -> LossPair:
        e, d = self.epsilon, self.delta
        loss = DiscreteLoss(
            values=(-e, e), probs=((1 - d) / (1.0 + math.exp(e)), (1 - d) / (1.0 + math.exp(-e))), infinity_mass=d
        )
        return LossPair(loss, loss)

    def loss_top_error(self) -> float:
        return 0.0  # the top is the parameter epsilon
