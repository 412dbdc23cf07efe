"""The d-dimensional discrete Gaussian: proven upper bounds (a dominating ledger of one-dimensional discrete
Gaussians, and a continuous Gaussian envelope) and attained worst directions (``DiscreteGaussianVector``; the
first dominance lemma is ``mechanisms.discrete``'s, the envelope lemma is stated in the class docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_count, check_positive
from .base import Mechanism
from .basic import Gaussian
from .discrete import DiscreteGaussian

__all__ = ["DiscreteGaussianVector", "theta_bound"]

#: smoothing widths ``tau`` tried for the continuous envelope (class docstring)
_ENVELOPE_TAUS = (0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0)


def theta_bound(tau: float) -> float:
    """A certified upper bound on ``theta(tau) = max_y |sum_j phi_tau(j - y) - 1|``, the distance of the
    periodised ``N(0, tau^2)`` density from 1.

    By Poisson summation ``sum_j phi_tau(j - y) = 1 + 2 sum_(m >= 1) exp(-2 pi^2 tau^2 m^2) cos(2 pi m y)``, so
    ``theta <= 2 sum_(m >= 1) q^(m^2) <= 2 q / (1 - q^3)`` with ``q = exp(-2 pi^2 tau^2)`` (``m^2 - 1 >= 3 (m - 1)``),
    rounded up.

    Parameters
    ----------
    tau : float
        The smoothing width, positive.

    Returns
    -------
    float
        The bound (``inf`` when it is not below 1).

    Raises
    ------
    ValueError
        ``tau`` not a positive finite number.
    """
    tau = check_positive("tau", tau)
    q = math.exp(-2.0 * math.pi**2 * tau * tau)
    if q >= 0.5:
        return math.inf
    theta = 2.0 * q / (1.0 - q**3) * (1.0 + 1e-12)
    return theta if theta < 1.0 else math.inf


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussianVector:
    """The d-dimensional discrete Gaussian ``N_Z(0, sigma^2)^d`` on an integer vector query whose neighbours
    differ by an integer shift ``v`` with ``|v_i| <= linf_sensitivity``, at most ``max_coordinates`` non-zero
    coordinates and, if given, ``||v||_2 <= l2_sensitivity`` (Canonne, Kamath, Steinke 2020, Sec. 3.1's
    setting; a histogram or count vector to which a record adds at most ``linf_sensitivity`` in at most
    ``max_coordinates`` cells).

    Dominating pair (proof). The noise is a product, so the pair of a shift ``v`` is the product over the
    coordinates of the one-dimensional pairs ``(N_Z(0), N_Z(v_i))``. By the module docstring's (i) each is
    dominated (every ``alpha``) by the pair of the shift ``m = min(linf_sensitivity, floor(l2_sensitivity))``
    (a non-zero integer coordinate is at least 1 in size, so ``|v_i| <= ||v||_2``), and a zero coordinate is
    the identity pair, dominated by any. Dominance is preserved by products (Blackwell: a post-processing
    of each factor is a post-processing of the product), and the number of non-zero coordinates is at most
    ``c = min(max_coordinates, floor(l2_sensitivity^2), dimension)`` (each contributes at least 1 to
    ``||v||_2^2``). So every neighbour's pair is dominated by ``c`` compositions of the one-dimensional pair
    of shift ``m``: ``upper_ledger()``, which any accountant composes (it is *not* the continuous Gaussian's).

    Continuous envelope (``continuous_envelopes``; useful where the L2 cap binds, which the ledger above ignores
    but for the count of coordinates). Lemma: for ``0 < tau < sigma``, ``s = sqrt(sigma^2 - tau^2)`` and every
    integer ``v``, ``N_Z(v, sigma^2)`` is within a pointwise factor ``e^(+-r)``, ``r = log((1 + theta) / (1 -
    theta))`` (``theta = theta_bound(tau)``), of ``K N(v, s^2)``, where the kernel ``K`` rounds a real ``y`` to the
    integer ``k`` with probability ``phi_tau(k - y) / Theta(y)``, ``Theta(y) = sum_j phi_tau(j - y)``. Proof: the
    kernel's output law is ``int phi_s(y - v) phi_tau(k - y) / Theta(y) dy``; with ``Theta in [1 - theta, 1 +
    theta]`` (``theta_bound``) and ``phi_s * phi_tau = phi_sigma`` it lies in ``[phi_sigma(k - v) / (1 + theta),
    phi_sigma(k - v) / (1 - theta)]``, while ``N_Z(k; v, sigma^2) = phi_sigma(k - v) / Z`` with ``Z =
    sum_j phi_sigma(j) in [1 - theta, 1 + theta]`` (the same Poisson sum at ``sigma > tau``). Applied to each
    of the at most ``c`` moved coordinates (the others are identical on both sides), the pair of a shift ``v``
    is, pointwise and on both sides, within ``e^(+-c r)`` of a post-processing of the Gaussian pair of shift
    ``||v||_2 <= l2_sensitivity`` at noise ``s``. For laws with ``P <= e^R P'`` and ``Q >= e^(-R) Q'`` pointwise,
    ``P(S) - e^eps Q(S) <= e^R (P'(S) - e^(eps - 2R) Q'(S))``: so ``(eps' + 2R, e^R delta')`` holds whenever
    the Gaussian pair (composed ``count`` times, ``R = count c r``) has ``(eps', delta')``. Each ``tau`` of a
    few gives one such certified bound; ``tightdp.tuning.discrete_vector_epsilon`` takes the smallest.

    Attained pairs (lower end, ``attained_ledgers()``): the explicit worst directions ``v = m e_1`` (one
    coordinate moved by ``m``), ``v = (1, ..., 1, 0, ...)`` on ``min(c', d)`` coordinates with ``c'`` the
    largest count with ``c' <= max_coordinates`` and ``c' <= l2^2``, and ``v = m`` on ``floor(l2^2 / m^2)``
    coordinates (capped as before): each is an admissible neighbour, so its certified lower bound bounds the
    mechanism's epsilon from below. Where ``l2_sensitivity`` does not bind (or ``m = 1``), the last one is
    the dominating ledger itself and the interval is exact.

    Parameters
    ----------
    sigma : float
        Scale of each coordinate's discrete Gaussian, in ``[1e-3, 1e5]``.
    dimension : int
        Number of coordinates ``d``, a positive integer.
    linf_sensitivity : int, default 1
        Largest shift of one coordinate, a positive integer.
    max_coordinates : int, default 1
        Most coordinates a record moves, a positive integer.
    l2_sensitivity : float or None, default None
        Cap on ``||v||_2``, at least 1; ``None``: no cap.

    Raises
    ------
    ValueError
        If ``sigma`` lies outside ``[1e-3, 1e5]``, a count is not a positive integer, or ``l2_sensitivity`` is
        below 1.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The discrete Gaussian for differential privacy", Sec. 3.1.
    """

    sigma: float
    dimension: int
    linf_sensitivity: int = 1
    max_coordinates: int = 1
    l2_sensitivity: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", DiscreteGaussian(sigma=self.sigma).sigma)
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension))
        object.__setattr__(self, "linf_sensitivity", check_count("linf_sensitivity", self.linf_sensitivity))
        object.__setattr__(self, "max_coordinates", check_count("max_coordinates", self.max_coordinates))
        if self.l2_sensitivity is not None:
            l2 = check_positive("l2_sensitivity", self.l2_sensitivity)
            if l2 < 1.0:
                raise ValueError(f"l2_sensitivity must be >= 1 (a non-zero integer shift has norm >= 1), got {l2!r}")
            object.__setattr__(self, "l2_sensitivity", l2)

    def _limits(self) -> tuple[int, int, float]:
        """``(m, c, l2^2)``: the largest coordinate shift, the most non-zero coordinates, the squared L2 cap."""
        m, c = self.linf_sensitivity, min(self.max_coordinates, self.dimension)
        l2sq = math.inf
        if self.l2_sensitivity is not None:
            l2sq = self.l2_sensitivity**2 * (1.0 + 1e-12)  # (an integer square given as a float)
            m = min(m, int(math.floor(math.sqrt(l2sq))))
            c = min(c, int(math.floor(l2sq)))
        return m, c, l2sq

    def upper_ledger(self) -> list[tuple[Mechanism, int]]:
        """The dominating pair: ``c`` compositions of the one-dimensional discrete Gaussian with shift ``m``.

        Returns
        -------
        list of (Mechanism, int)
            One ``(DiscreteGaussian, count)`` entry, to compose with any accountant.
        """
        m, c, _ = self._limits()
        return [(DiscreteGaussian(sigma=self.sigma, sensitivity=m), c)]

    def continuous_envelopes(self, count: int = 1) -> list[tuple[Gaussian, float]]:
        """The continuous Gaussian envelopes of the class docstring, one per smoothing width ``tau < sigma``.

        Parameters
        ----------
        count : int, default 1
            The number of releases composed (the pointwise factor grows with it).

        Returns
        -------
        list of (Gaussian, float)
            ``(Gaussian(noise_multiplier=s, sensitivity=L2 bound), R)``: ``count`` compositions of that
            Gaussian with ``(eps', delta')`` give the mechanism ``(eps' + 2 R, e^R delta')``. Empty when no
            ``tau`` applies (``sigma`` too small).

        Raises
        ------
        ValueError
            ``count`` not a positive integer.
        """
        count = check_count("count", count)
        m, c, l2sq = self._limits()
        l2 = math.sqrt(min(l2sq, c * m * m))  # the L2 norm of any admissible shift
        out: list[tuple[Gaussian, float]] = []
        for tau in _ENVELOPE_TAUS:
            if tau >= self.sigma:
                break
            theta = theta_bound(tau)
            if not math.isfinite(theta):
                continue
            r = math.log1p(2.0 * theta / (1.0 - theta)) * (1.0 + 1e-12)
            s = math.sqrt(self.sigma**2 - tau * tau) * (1.0 - 1e-15)
            out.append((Gaussian(noise_multiplier=s, sensitivity=l2 * (1.0 + 1e-15)), count * c * r))
        return out

    def attained_ledgers(self) -> list[list[tuple[Mechanism, int]]]:
        """The explicit directions' pairs (class docstring), each as a ledger of one-dimensional pairs.

        Returns
        -------
        list of list of (Mechanism, int)
            Two or three ledgers; each one's certified lower bound bounds the mechanism's epsilon from below.
        """
        m, c, l2sq = self._limits()
        out: list[list[tuple[Mechanism, int]]] = [
            [(DiscreteGaussian(sigma=self.sigma, sensitivity=m), 1)],
            [(DiscreteGaussian(sigma=self.sigma, sensitivity=1), c)],
        ]
        full = min(c, int(math.floor(l2sq / (m * m))) if math.isfinite(l2sq) else c)
        if full >= 1:
            out.append([(DiscreteGaussian(sigma=self.sigma, sensitivity=m), full)])
        return out
