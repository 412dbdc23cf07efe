"""Discrete noise for integer-valued queries: the discrete Gaussian, the discrete Laplace and the Skellam
mechanism, alone and Poisson-subsampled, with exact one-dimensional privacy-loss distributions; and the
d-dimensional discrete Gaussian through a proven dominating ledger (``discrete_vector.DiscreteGaussianVector``).

* ``DiscreteGaussian``: ``X ~ N_Z(0, sigma^2)``, ``P(X = x) = exp(-x^2 / (2 sigma^2)) / Z(sigma)`` on the
  integers (Canonne, Kamath, Steinke 2020, Def. 1), added to a query with integer sensitivity ``Delta``.
  Neighbours shift the output by an integer ``v`` with ``|v| <= Delta``; the pair ``N_Z(0)`` vs ``N_Z(v)``
  has the loss ``L(x) = (v^2 - 2 v x) / (2 sigma^2)`` (the normalisers cancel), which takes countably
  many values. ``v = Delta`` is the worst neighbour (see "Dominance" below), so its PLD is exact.
* ``DiscreteLaplace``: ``P(X = x) ∝ exp(-noise_parameter |x|)`` (dp_accounting's
  ``DiscreteLaplaceDpEvent``); its loss takes ``Delta + 1`` values, a finite ``DiscreteLoss`` with
  closed-form masses (Poisson-subsampled, composed in exact blocks of steps: ``_atom_blocks``).
* ``DistributedDiscreteGaussian``: the sum of ``clients`` discrete Gaussians (Kairouz, Liu, Steinke 2021),
  its law convolved with certified relative and l1 errors, or, for sigma above about 2.3, the discrete Gaussian
  of the summed variance within a certified factor (``DistributedDiscreteGaussianLoss``); from ``sigma
  sqrt(clients) = 1e4`` on, the same pair through certified masses of blocks of outputs, with no enumeration and no
  cap on the scale (``LargeDistributedDiscreteGaussianLoss``, ``_ddg_large``).
* ``Skellam``: ``Pois(mu) - Pois(mu)`` (Agarwal, Kairouz, Liu 2021), symmetric and log-concave; exact PLD
  by enumeration with 30-digit Bessel functions (``SkellamLoss``). The distributed Skellam mechanism (a sum
  of clients' Skellam noises) is ``Skellam`` with the total ``mu``.
* ``PoissonSampledDiscrete``: any one of them under Poisson sampling (remove: ``P = q N(Delta) + (1 - q) N(0)``
  against ``Q = N(0)``, with ``N`` the discrete noise law; add: the reverse pair). The loss
  ``log(1 - q + q exp(l(x)))`` is a monotone function of the one-step loss ``l(x)`` of the shift, so the
  outputs ``x`` in ``Z`` again give the exact PLD, atom by atom.

Dominance (why the shift ``Delta`` is the worst neighbour, for the whole curve, so that the pair may be
composed adaptively). Let ``p`` be a symmetric log-concave pmf on Z (both laws are: ``x^2`` and ``|x|`` are
convex) and ``P_v = p(. - v)``. (i) For ``v >= 0`` and any ``a > 0``,
``H_a(P_0 || P_v) = sup_S P_0(S) - a P_v(S)`` is attained on a threshold set ``{x <= t}``: the ratio
``p(x) / p(x - v)`` is non-increasing in ``x`` (log-concavity). So ``H_a(P_0 || P_v) = max_t F(t) - a F(t - v)``
(``F`` the CDF), and each term is non-decreasing in ``v`` because ``F(t - v)`` is non-increasing: the curve
grows with ``v`` at every ``a``. Negative shifts and the reversed pair are mirror images (``x -> -x`` and
``x -> v - x``, using symmetry), translations change nothing. (ii) Poisson-subsampled, remove:
``H_a(q P_v + (1 - q) P_0 || P_0) = sup_S q P_v(S) - (a - 1 + q) P_0(S)``, which is ``q H_(a')(P_v || P_0)`` with
``a' = (a - 1 + q) / q`` when ``a' > 0`` and ``1 - a`` (any ``v``: ``S`` everything) otherwise; add:
``H_a(P_0 || q P_v + (1 - q) P_0) = sup_S (1 - a (1 - q)) P_0(S) - a q P_v(S)``, ``(1 - a (1 - q)) H_(a')(P_0 || P_v)``
with ``a' = a q / (1 - a (1 - q))`` when ``1 - a (1 - q) > 0`` and 0 otherwise. Both are non-decreasing in
``|v|`` by (i). So every neighbour's pair is dominated (all ``a``) by the shift-``Delta`` pair, which the
engine composes (Blackwell; dominance survives composition).

Lower ends (attained pairs): each class's exact PLD is the pair of neighbouring data sets whose query
values differ by ``Delta`` (a record that moves an integer sum by its full sensitivity), for the
subsampled ones in the remove / add direction whose curve is the larger; so both ends are certified
bounds on that one pair, and the upper end is also a bound on every pair.

The discrete Gaussian's PLD is enumerated on a window of outputs ``[-m, Delta + m]`` outside which
both noise laws have mass below ``1e-75`` (a geometric bound, ``_window``); that mass is sent to
``+inf`` for upper bounds and dropped by lower bounds (``infinity_is_exact = False``). The normaliser
``Z(sigma)`` is Jacobi's theta identity ``Z = sigma sqrt(2 pi) (1 + 2 sum_k exp(-2 pi^2 sigma^2 k^2))``
for ``sigma >= 1`` (three terms, remainder bounded) and a direct sum below, both certified to a few
ulp; every atom's mass carries a relative error bound that the engine charges (``cell_masses``). Unsampled,
its losses lie on a lattice of spacing ``Delta / sigma^2``, declared to the engine (``lattice_atoms``) for
``sigma <= 50``, and for ``sigma <= 200`` with a spacing of at least ``1 / 2500`` while the composition's window at
that spacing holds at most 2^15 points: the composition is then exact on the lattice, up to rounding and tails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._caches import register as _register_cache
from .._validation import check_choice, check_count, check_positive, check_probability
from ..errors import UnsupportedMechanismError
from ..losses import DiscreteLoss, PrivacyLoss
from ._atom_blocks import FewAtomsLoss
from ._ddg_large import LargeDistributedDiscreteGaussianLoss
from ._discrete_losses import (
    DiscreteGaussianLoss,
    DistributedDiscreteGaussianLoss,
    SkellamLoss,
    discrete_gaussian_log_normaliser,
)
from ._lattice_loss import _U
from .base import LossPair, Mechanism

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Skellam",
    "DistributedDiscreteGaussian",
    "PoissonSampledDiscrete",
    "DiscreteGaussianLoss",
    "SkellamLoss",
    "DistributedDiscreteGaussianLoss",
    "LargeDistributedDiscreteGaussianLoss",
    "discrete_gaussian_log_normaliser",
    "discrete_laplace_loss",
]


@_register_cache
@lru_cache(maxsize=64)  # an accountant asks each step's losses several times a query
def discrete_laplace_loss(
    *, noise_parameter: float, delta: int, q: float = 1.0, direction: str = "remove"
) -> DiscreteLoss:
    """The exact PLD of the discrete Laplace mechanism, optionally Poisson-subsampled.

    ``P(x) ∝ exp(-a |x|)`` with ``a = noise_parameter``, integer shift ``delta``, rate ``q`` (pairs as
    ``DiscreteGaussianLoss``). With ``r = exp(-a)``: ``B = DLap(0)`` has ``B(x <= 0) = 1 / (1 + r)``,
    ``B(x >= Delta) = r^Delta / (1 + r)``, ``B(x) = (1 - r) / (1 + r) r^x`` between; ``A = DLap(Delta)``
    mirrors it. ``l = log(A / B)`` is ``-a Delta`` on ``x <= 0``, ``a Delta`` on ``x >= Delta`` and
    ``a (2x - Delta)`` between: ``Delta + 1`` atoms.

    Parameters
    ----------
    noise_parameter : float
        The decay ``a``, positive.
    delta : int
        The integer shift ``Delta``, positive.
    q : float, default 1.0
        Sampling rate in ``(0, 1]``.
    direction : str, default "remove"
        ``"remove"`` or ``"add"``.

    Returns
    -------
    DiscreteLoss
        ``Delta + 1`` atoms with closed-form masses; subsampled (``q < 1``), a ``FewAtomsLoss`` that also holds the
        Q-masses and the float errors of both, so that the connect-the-dots accountant composes it in exact blocks
        (``mechanisms._atom_blocks``: its atoms lie on no common lattice).

    Raises
    ------
    ValueError
        If ``q`` is not positive (``log(q)``: math domain error).
    """
    a, d = float(noise_parameter), int(delta)
    r = math.exp(-a)
    c = -math.expm1(-a) / (1.0 + r)  # (1 - r) / (1 + r)
    inner = np.arange(1, d, dtype=float)
    log_b = np.concatenate([[-math.log1p(r)], math.log(c) - a * inner, [-a * d - math.log1p(r)]])
    log_a = log_b[::-1].copy()
    ell = np.concatenate([[-a * d], a * (2.0 * inner - d), [a * d]])
    if q >= 1.0:
        values, probs = -ell, np.exp(log_b)  # P = B, Q = A (the mirror image of A against B)
        return DiscreteLoss(values=tuple(map(float, values)), probs=tuple(map(float, probs)))
    lv = np.logaddexp(math.log1p(-q), math.log(q) + ell)
    mix, base = q * np.exp(log_a) + (1.0 - q) * np.exp(log_b), np.exp(log_b)
    if direction == "remove":
        values, probs, q_probs = lv, mix, base
    else:
        values, probs, q_probs = -lv, base, mix
    # each log-mass within (3 |y| + 4) u (log c or log1p r, a x, the subtraction), exp u, the mixture 4u; each loss
    # within the rounding of l, log q, log1p(-q), their sum and logaddexp (as ``DiscreteGaussianLoss``)
    y_max = float(np.max(np.abs(log_b)))
    mass_rel = 1.02 * (4.0 * y_max + 8.0) * _U + 4.0 * _U
    loss_err = (
        8.0
        * _U
        * (1.0 + float(np.max(np.abs(ell))) + float(np.max(np.abs(lv))) + abs(math.log(q)) + abs(math.log1p(-q)))
    )
    return FewAtomsLoss(
        values=tuple(map(float, values)),
        probs=tuple(map(float, probs)),
        q_probs=tuple(map(float, q_probs)),
        mass_rel=mass_rel,
        loss_err=loss_err,
    )


#: from this ``sigma * sqrt(clients)`` on, the distributed discrete Gaussian is accounted by blocks of outputs
#: (``LargeDistributedDiscreteGaussianLoss``) instead of enumerated atoms. The enumeration stops at about 2.2e5 (8
#: million outputs); from 1e4 the blocks measured as tight or tighter and about as fast or faster (connect-dots, s = 1e4
#: to 2e5: unsampled, the same intervals to 1e-10, in 0.01-0.02 s against 0.05-1.8 s by default and within 10 % of the
#: enumeration's time at eps_error 1e-5; subsampled, 2.5e-7 wide against 6e-5 in 6-10 s against 35-135 s; PRV and
#: Fourier, the same intervals, faster), with the block sums' own error (Lemma B) below 3e-14 across the window
_DDG_BLOCKS_SCALE = 1.0e4


def _check_sensitivity(value: object) -> int:
    return check_count("sensitivity", value)


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussian(Mechanism):
    """The discrete Gaussian mechanism ``N_Z(0, sigma^2)`` on a query with integer L1 / L2 sensitivity
    ``sensitivity`` (one coordinate; Canonne, Kamath, Steinke 2020, Def. 1 and Thm 7's setting).

    Exact PLD: ``DiscreteGaussianLoss`` (the normalisers cancel; the shift by ``sensitivity`` is the worst
    neighbour, see the module docstring). Attained pair (lower end): two data sets whose query values
    differ by exactly ``sensitivity``; the PLD is that pair's, so lower and upper ends bound one pair.

    Parameters
    ----------
    sigma : float
        Scale of the discrete Gaussian, in ``[1e-3, 1e5]``.
    sensitivity : int, default 1
        Integer sensitivity ``Delta`` of the query, a positive integer.

    Raises
    ------
    ValueError
        If ``sigma`` lies outside ``[1e-3, 1e5]`` or ``sensitivity`` is not a positive integer.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The discrete Gaussian for differential privacy", Def. 1 and Thm 7.
    """

    type_name = "discrete_gaussian"
    pair_attained = True
    sigma: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        if self.sigma < 1e-3 or self.sigma > 1e5:
            raise ValueError(f"sigma must lie in [1e-3, 1e5] for the exact discrete PLD, got {self.sigma!r}")
        object.__setattr__(self, "sensitivity", _check_sensitivity(self.sensitivity))

    def loss(self, q: float = 1.0, direction: str = "remove") -> PrivacyLoss:
        """The exact privacy loss of this mechanism's shift pair, optionally Poisson-subsampled.

        Parameters
        ----------
        q : float, default 1.0
            Sampling rate in ``(0, 1]``; ``1`` is the mechanism itself.
        direction : str, default "remove"
            ``"remove"`` (``P = q N(Delta) + (1 - q) N(0)`` against ``N(0)``) or ``"add"`` (the reverse pair).

        Returns
        -------
        PrivacyLoss
            The exact PLD of the pair (see the class docstring).

        Raises
        ------
        GridTooLargeError
            If the enumeration would exceed its cap of outputs (the discrete Gaussians and Skellam).
        """
        return DiscreteGaussianLoss(self.sigma, self.sensitivity, q, direction)

    def privacy_losses(self) -> LossPair:
        loss = self.loss()
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class DiscreteLaplace(Mechanism):
    """The discrete Laplace mechanism ``P(X = x) ∝ exp(-noise_parameter |x|)`` on a query with integer
    sensitivity ``sensitivity`` (dp_accounting's ``DiscreteLaplaceDpEvent(noise_parameter, sensitivity)``).

    Exact PLD: ``discrete_laplace_loss`` (``sensitivity + 1`` atoms). Attained pair (lower end): two data
    sets whose query values differ by exactly ``sensitivity``.

    Parameters
    ----------
    noise_parameter : float
        The decay ``a > 0`` of ``P(X = x) ∝ exp(-a |x|)``, with ``a * sensitivity <= 500``.
    sensitivity : int, default 1
        Integer sensitivity ``Delta`` of the query, a positive integer at most 100000.

    Raises
    ------
    ValueError
        If ``noise_parameter`` is not positive, ``sensitivity`` is not a positive integer <= 100000, or
        ``noise_parameter * sensitivity > 500``.

    References
    ----------
    Ghosh, Roughgarden, Sundararajan 2012 (the geometric mechanism); dp_accounting's
    ``DiscreteLaplaceDpEvent``.
    """

    type_name = "discrete_laplace"
    pair_attained = True
    noise_parameter: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_parameter", check_positive("noise_parameter", self.noise_parameter))
        object.__setattr__(self, "sensitivity", _check_sensitivity(self.sensitivity))
        if self.sensitivity > 100_000:
            raise ValueError(f"sensitivity must be <= 100000 (one atom per value), got {self.sensitivity!r}")
        if self.noise_parameter * self.sensitivity > 500.0:
            raise ValueError(
                "noise_parameter * sensitivity must be <= 500 (one step's epsilon), got "
                f"{self.noise_parameter * self.sensitivity!r}"
            )

    def loss(self, q: float = 1.0, direction: str = "remove") -> PrivacyLoss:
        """The exact privacy loss of this mechanism's shift pair, optionally Poisson-subsampled.

        Parameters
        ----------
        q : float, default 1.0
            Sampling rate in ``(0, 1]``; ``1`` is the mechanism itself.
        direction : str, default "remove"
            ``"remove"`` (``P = q N(Delta) + (1 - q) N(0)`` against ``N(0)``) or ``"add"`` (the reverse pair).

        Returns
        -------
        PrivacyLoss
            The exact PLD of the pair (see the class docstring).

        Raises
        ------
        GridTooLargeError
            If the enumeration would exceed its cap of outputs (the discrete Gaussians and Skellam).
        """
        return discrete_laplace_loss(
            noise_parameter=self.noise_parameter, delta=self.sensitivity, q=q, direction=direction
        )

    def privacy_losses(self) -> LossPair:
        loss = self.loss()
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class DistributedDiscreteGaussian(Mechanism):
    """The distributed discrete Gaussian (Kairouz, Liu, Steinke 2021): ``clients`` parties each add
    ``N_Z(0, sigma^2)`` to an integer sum (secure aggregation); the released sum carries their total, a
    sum of discrete Gaussians (not itself a discrete Gaussian). One coordinate with integer sensitivity.

    Exact PLD: ``DistributedDiscreteGaussianLoss`` (atoms enumerated); for ``sigma * sqrt(clients) >= 1e4`` the same
    pair by ``LargeDistributedDiscreteGaussianLoss`` (certified masses of blocks of outputs: the law of the sum within
    ``e^(+-T)`` of the normal density at every integer, Poisson summation; block sums by a corrected midpoint rule;
    proofs in ``tightdp.mechanisms._ddg_large``), which the connect-dots accountant composes at any scale (the PRV and
    Fourier accountants too while the cells between their grid's ends hold at most 2e7 outputs: their partial mean is
    summed output by output). Attained pair (lower end): two data sets whose sums differ by exactly ``sensitivity``:
    both routes bound that one pair from both sides, and it dominates every neighbouring pair.

    Parameters
    ----------
    sigma : float
        Scale of each client's discrete Gaussian, in ``[1e-3, 1e5]``.
    clients : int
        Number of clients, a positive integer at most 100000.
    sensitivity : int, default 1
        Integer sensitivity ``Delta`` of the query, a positive integer.

    Raises
    ------
    ValueError
        If ``sigma`` lies outside ``[1e-3, 1e5]``, ``clients`` is not a positive integer <= 100000 or
        ``sensitivity`` is not a positive integer.

    References
    ----------
    Kairouz, Liu, Steinke 2021, "The distributed discrete Gaussian mechanism for federated learning with
    secure aggregation".
    """

    type_name = "distributed_discrete_gaussian"
    pair_attained = True
    sigma: float
    clients: int
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", DiscreteGaussian(sigma=self.sigma).sigma)
        object.__setattr__(self, "clients", check_count("clients", self.clients))
        if self.clients > 100_000:
            raise ValueError(f"clients must be <= 100000, got {self.clients!r}")
        object.__setattr__(self, "sensitivity", _check_sensitivity(self.sensitivity))

    def loss(self, q: float = 1.0, direction: str = "remove") -> PrivacyLoss:
        """The exact privacy loss of this mechanism's shift pair, optionally Poisson-subsampled.

        Parameters
        ----------
        q : float, default 1.0
            Sampling rate in ``(0, 1]``; ``1`` is the mechanism itself.
        direction : str, default "remove"
            ``"remove"`` (``P = q N(Delta) + (1 - q) N(0)`` against ``N(0)``) or ``"add"`` (the reverse pair).

        Returns
        -------
        PrivacyLoss
            The exact PLD of the pair (see the class docstring): ``DistributedDiscreteGaussianLoss``, or
            ``LargeDistributedDiscreteGaussianLoss`` for ``sigma * sqrt(clients) >= 1e4``.

        Raises
        ------
        GridTooLargeError
            When the loss is first used: below ``sigma * sqrt(clients) = 1e4``, if the enumeration would exceed its
            cap of outputs; above, if ``sensitivity + 19 sigma sqrt(clients)`` reaches ``2^30``.
        """
        if self.clients == 1:
            return DiscreteGaussianLoss(self.sigma, self.sensitivity, q, direction)
        if self.sigma * math.sqrt(self.clients) >= _DDG_BLOCKS_SCALE:  # blocks of outputs: no enumeration
            return LargeDistributedDiscreteGaussianLoss(self.sigma, self.clients, self.sensitivity, q, direction)
        return DistributedDiscreteGaussianLoss(self.sigma, self.clients, self.sensitivity, q, direction)

    def privacy_losses(self) -> LossPair:
        loss = self.loss()
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class Skellam(Mechanism):
    """The Skellam mechanism: noise ``Pois(mu) - Pois(mu)`` on a query with integer sensitivity ``sensitivity``
    (one coordinate; Agarwal, Kairouz, Liu 2021). A sum of ``n`` clients' ``Sk(mu_i)`` noises is
    ``Sk(sum mu_i)``, so the distributed version is this mechanism with the total ``mu``.

    Exact PLD: ``SkellamLoss``. Attained pair (lower end): two data sets whose query values differ by exactly
    ``sensitivity``.

    Parameters
    ----------
    mu : float
        The Poisson parameter of each of the two components, in ``[0.01, 1e6]``.
    sensitivity : int, default 1
        Integer sensitivity ``Delta`` of the query, a positive integer.

    Raises
    ------
    ValueError
        If ``mu`` lies outside ``[0.01, 1e6]`` or ``sensitivity`` is not a positive integer.

    References
    ----------
    Agarwal, Kairouz, Liu 2021, "The Skellam mechanism for differentially private federated learning".
    """

    type_name = "skellam"
    pair_attained = True
    mu: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", check_positive("mu", self.mu))
        if self.mu < 1e-2 or self.mu > 1e6:
            raise ValueError(f"mu must lie in [0.01, 1e6] for the exact PLD, got {self.mu!r}")
        object.__setattr__(self, "sensitivity", _check_sensitivity(self.sensitivity))

    def loss(self, q: float = 1.0, direction: str = "remove") -> PrivacyLoss:
        """The exact privacy loss of this mechanism's shift pair, optionally Poisson-subsampled.

        Parameters
        ----------
        q : float, default 1.0
            Sampling rate in ``(0, 1]``; ``1`` is the mechanism itself.
        direction : str, default "remove"
            ``"remove"`` (``P = q N(Delta) + (1 - q) N(0)`` against ``N(0)``) or ``"add"`` (the reverse pair).

        Returns
        -------
        PrivacyLoss
            The exact PLD of the pair (see the class docstring).

        Raises
        ------
        GridTooLargeError
            If the enumeration would exceed its cap of outputs (the discrete Gaussians and Skellam).
        """
        return SkellamLoss(self.mu, self.sensitivity, q, direction)

    def privacy_losses(self) -> LossPair:
        loss = self.loss()
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class PoissonSampledDiscrete(Mechanism):
    """``DiscreteGaussian`` or ``DiscreteLaplace`` under Poisson sampling at rate ``sampling_rate``.

    ``relation``: ``"add-remove"`` (both directions), ``"remove"`` (``P = q N(Delta) + (1 - q) N(0)``,
    ``Q = N(0)``) or ``"add"`` (the reverse pair); the exact PLDs are ``DiscreteGaussianLoss`` /
    ``discrete_laplace_loss`` with ``q < 1``. A subsampled sum's record shifts the sum by its value, at most
    ``sensitivity`` in size; the shift ``Delta`` is the worst (the subsampled loss is a monotone function of
    the shift's loss, whose curve grows with the shift). Attained pair (lower end): a data set with and
    without one record whose query value is ``sensitivity``, in the direction whose curve is larger.

    Parameters
    ----------
    mechanism : Mechanism
        ``DiscreteGaussian``, ``DiscreteLaplace``, ``Skellam`` or ``DistributedDiscreteGaussian``.
    sampling_rate : float
        Probability ``q`` in ``(0, 1]`` that a record joins the batch.
    relation : str, default "add-remove"
        ``"add-remove"``, ``"remove"`` or ``"add"``.

    Raises
    ------
    UnsupportedMechanismError
        If ``mechanism`` is not one of the discrete mechanisms above.
    ValueError
        If ``sampling_rate`` lies outside ``(0, 1]`` or ``relation`` is not one of the three.

    References
    ----------
    Koskela et al. 2020, Sec. 6.1 (Poisson subsampling of a pair); the dominance argument of this module's
    docstring.
    """

    type_name = "poisson_sampled_discrete"
    pair_attained = True
    mechanism: Mechanism
    sampling_rate: float
    relation: str = "add-remove"

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, (DiscreteGaussian, DiscreteLaplace, Skellam, DistributedDiscreteGaussian)):
            raise UnsupportedMechanismError(
                f"PoissonSampledDiscrete needs a DiscreteGaussian, DiscreteLaplace or Skellam mechanism, got "
                f"{self.mechanism!r}"
            )
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        check_choice("relation", self.relation, ("add-remove", "remove", "add"))

    def privacy_losses(self) -> LossPair:
        q = self.sampling_rate
        if q >= 1.0:
            return self.mechanism.privacy_losses()
        m = self.mechanism
        assert isinstance(m, (DiscreteGaussian, DiscreteLaplace, Skellam, DistributedDiscreteGaussian))  # __post_init__
        remove = m.loss(q, "remove")
        add = m.loss(q, "add")
        pick = {"remove": (remove, remove), "add": (add, add)}.get(self.relation, (remove, add))
        return LossPair(*pick)
