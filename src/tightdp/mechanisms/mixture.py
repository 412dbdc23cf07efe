"""Mixture-of-Gaussians (MoG) mechanisms and the group-level DP-SGD mechanisms built on them.

Ganesh 2024, Def. 2.8: a scalar MoG mechanism with sensitivities ``c_i >= 0``,
probabilities ``p_i`` and noise ``sigma`` outputs ``N(0, sigma^2)`` on one data
set and ``sum_i p_i N(c_i, sigma^2)`` on its neighbour. By the vector-to-scalar
reduction (Ganesh 2024, Lemma 2.9) a scalar MoG whose sensitivity stochastically
dominates ``||c||_2`` dominates the vector one, so a scalar mechanism suffices.

Group privacy of DP-SGD (groups of up to ``k`` examples) is exactly that of a
MoG mechanism composed ``T`` times:

* Poisson sampling with rate ``q``: sensitivity ``Binom(k, q)`` (Ganesh 2024, Thm 3.1);
* fixed batch size ``B`` from a data set of at least ``n`` examples:
  sensitivity ``2 * Hypergeom(B, n + k, k)``, the number of the ``k`` group
  members among ``B`` draws without replacement from ``n + k`` (Ganesh 2024, Thm 3.3).

Both are tight (Ganesh 2024, Sec. 3.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._types import FloatArray
from .._validation import check_count, check_positive, check_probability, check_real
from ._certified_pmf import CertifiedPMF as CertifiedPMF
from ._certified_pmf import certified_binomial as certified_binomial
from ._certified_pmf import certified_hypergeometric as certified_hypergeometric
from ._mixture_losses import MixtureAddLoss as MixtureAddLoss
from ._mixture_losses import MixtureRemoveLoss as MixtureRemoveLoss
from ._mixture_losses import _mixture_pair
from .base import LossPair, Mechanism

__all__ = [
    "MixtureOfGaussians",
    "GroupPoissonSampled",
    "GroupFixedBatchSampled",
    "binomial_sensitivity",
    "hypergeometric_sensitivity",
]

#: Largest tolerated ``|sum(probabilities) - 1|``; the residue is moved to the safe side.
PROBABILITY_SUM_TOLERANCE = 1e-9


def _as_float_tuple(name: str, values: object) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}")
    out = tuple(check_real(f"{name}[{i}]", v, low=0.0, low_open=False) for i, v in enumerate(values))
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def _safe_side_weights(sens: FloatArray, probs: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """Merge equal sensitivities and sort them; return ``(c, w, missing)``.

    The probabilities must sum to one up to a rounding residue (at most
    ``PROBABILITY_SUM_TOLERANCE``). An excess is taken from the smallest
    sensitivities, which makes the sensitivity distribution stochastically
    larger (safe by Ganesh 2024, Lemma 2.9). A deficit ``missing = 1 - sum(w) > 0`` is
    returned: the remove direction adds it to the largest sensitivity (whether
    the described mechanism is read as "these probabilities, the rest unknown"
    or as renormalised, the completed distribution is stochastically larger, so
    it dominates by Ganesh 2024, Lemma 2.9), the add direction leaves ``Q`` short of it,
    which only raises the loss pointwise. Either way the analysed pair
    dominates the described one. (Counting the deficit as mass at infinite
    loss would also be safe, but it is added to delta at every step, for the
    lower bound as well: with deficits of 1e-11 over thousands of steps the
    certified lower bound rose above the truth.)

    Only the upper bound is proven for a residue: the engine analyses one pair
    per direction, and no single pair is both above and below every completion.
    Mechanisms whose probabilities are computed (``GroupPoissonSampled``,
    ``GroupFixedBatchSampled``) therefore do not come through here: they use
    ``CertifiedPMF`` weights, whose error is proven and reported to the engine.
    """
    uniq, inv = np.unique(sens, return_inverse=True)
    w = np.zeros(uniq.shape, float)
    np.add.at(w, inv, probs)
    residue = 1.0 - math.fsum(w.tolist())
    missing = 0.0
    if residue > 0:
        missing = residue
    elif residue < 0:
        excess = -residue
        for i in range(len(w)):
            take = min(w[i], excess)
            w[i] -= take
            excess -= take
            if excess <= 0:
                break
    keep = w > 0
    return uniq[keep], w[keep], missing


@dataclass(frozen=True, kw_only=True)
class MixtureOfGaussians(Mechanism):
    """Scalar mixture-of-Gaussians mechanism (Ganesh 2024, Def. 2.8; dp_accounting's ``MixtureOfGaussiansDpEvent``).

    ``noise_multiplier``: the noise standard deviation ``sigma`` (in units of
    the sensitivity scale). ``sensitivities``: non-negative scalars ``c_i``.
    ``probabilities``: ``p_i >= 0`` summing to one (up to 1e-9; a rounding
    residue is moved to the safe side, see ``_safe_side_weights``).

    ``privacy_losses()`` gives ``remove``: ``P = sum p_i N(c_i, s^2)`` vs
    ``Q = N(0, s^2)``, and ``add``: ``N(0, s^2)`` vs ``sum p_i N(c_i, s^2)``,
    stored reflected so that the loss is non-decreasing. All evaluations are in
    log space (``logsumexp`` over components), so sensitivities of ``k = 64``
    with ``sigma = 0.5`` (``c^2 / (2 s^2) = 8192``) do not overflow.

    Attained pair: the scalar MoG mechanism (Ganesh 2024, Def. 2.8) on a data set whose sensitive bit is 1 against
    one where it is 0 has exactly these output laws: lower ends are certified.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation ``sigma``, positive and finite.
    sensitivities : sequence of float
        Non-negative finite sensitivities ``c_i``, at least one.
    probabilities : sequence of float
        Probabilities ``p_i`` in ``[0, 1]``, one per sensitivity, summing to 1 within 1e-9.

    Raises
    ------
    ValueError
        If ``noise_multiplier`` is not positive, a sequence is empty, not a sequence of numbers or holds a
        negative value, the lengths differ, a probability exceeds 1, or the sum is not 1 within 1e-9.

    References
    ----------
    Ganesh 2024, "Tight group-level differential privacy guarantees for DP-SGD with sampling", Def. 2.8 and
    Lemma 2.9; dp_accounting's ``MixtureOfGaussiansDpEvent``.
    """

    type_name = "mixture_of_gaussians"
    pair_attained = True
    noise_multiplier: float
    sensitivities: tuple[float, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        sens = _as_float_tuple("sensitivities", self.sensitivities)
        probs = _as_float_tuple("probabilities", self.probabilities)
        if len(sens) != len(probs):
            raise ValueError(
                f"sensitivities and probabilities must have the same length, got {len(sens)} and {len(probs)}"
            )
        if any(p > 1.0 for p in probs):
            raise ValueError(f"probabilities must be <= 1, got {max(probs)!r}")
        total = math.fsum(probs)
        if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
            raise ValueError(f"probabilities must sum to 1, got sum {total!r}")
        object.__setattr__(self, "sensitivities", sens)
        object.__setattr__(self, "probabilities", probs)

    @cached_property
    def _components(self) -> tuple[FloatArray, FloatArray, float]:
        return _safe_side_weights(np.asarray(self.sensitivities, float), np.asarray(self.probabilities, float))

    @property
    def support(self) -> tuple[FloatArray, FloatArray]:
        """The merged, sorted sensitivities with positive probability and their probabilities."""
        c, w, _ = self._components
        return c.copy(), w.copy()

    def privacy_losses(self) -> LossPair:
        c, w, missing = self._components
        w_remove = w.copy()
        if missing > 0.0:  # the deficit goes to the largest sensitivity in the remove direction
            top = float(w_remove[-1]) + missing
            if top - float(w_remove[-1]) < missing:
                top = math.nextafter(top, math.inf)
            w_remove[-1] = top
        return _mixture_pair(c, w_remove, w, self.noise_multiplier)


# --------------------------------------------------------------------------- group sensitivities
def binomial_sensitivity(group_size: int, sampling_rate: float) -> tuple[FloatArray, FloatArray]:
    """Sensitivities ``0..k`` and probabilities ``Binom(k, q)`` of the group's Poisson-sampled step.

    The probabilities are ``certified_binomial``'s upper ends: each within 3 units in the last place above
    the exact value (``q`` taken exactly).

    Parameters
    ----------
    group_size : int
        The group size ``k``, a positive integer.
    sampling_rate : float
        The Poisson sampling rate ``q`` in ``(0, 1]``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(sensitivities, probabilities)``, ``k + 1`` each.

    Raises
    ------
    ValueError
        If ``group_size`` is not a positive integer or ``sampling_rate`` lies outside ``(0, 1]``.

    References
    ----------
    Ganesh 2024, Thm 3.1.
    """
    k = check_count("group_size", group_size)
    q = check_probability("sampling_rate", sampling_rate)
    return np.arange(k + 1, dtype=float), np.array(certified_binomial(k, q).upper)


def hypergeometric_sensitivity(group_size: int, batch_size: int, dataset_size: int) -> tuple[FloatArray, FloatArray]:
    """Sensitivities ``2 m`` with ``m ~ Hypergeom(B, n + k, k)`` and their probabilities.

    ``m`` counts the group members among ``B`` draws without replacement from ``n + k`` examples of which
    ``k`` belong to the group (scipy: ``hypergeom(M=n + k, n=k, N=B)``). Each member drawn displaces one
    other example, so the batch gradient moves by at most ``2`` per member. The probabilities are
    ``certified_hypergeometric``'s upper ends (within 3 units in the last place; scipy's ``logpmf`` is off
    by up to 1e-11 relative here).

    Parameters
    ----------
    group_size : int
        The group size ``k``, a positive integer at most ``dataset_size``.
    batch_size : int
        The batch size ``B``, a positive integer at most ``dataset_size``.
    dataset_size : int
        The data set size ``n``, a positive integer.

    Returns
    -------
    tuple of numpy.ndarray
        ``(sensitivities, probabilities)``, ``min(k, B) + 1`` each.

    Raises
    ------
    ValueError
        If a size is not a positive integer, ``batch_size > dataset_size`` or ``group_size > dataset_size``.

    References
    ----------
    Ganesh 2024, Thm 3.3.
    """
    k, b, n = _check_fixed_batch(group_size, batch_size, dataset_size)
    return 2.0 * np.arange(min(k, b) + 1), np.array(certified_hypergeometric(k, b, n).upper)


def _group_pair(sens: FloatArray, pmf: CertifiedPMF, sigma: float) -> LossPair:
    """The dominating pair of a MoG whose probabilities are computed, not given (Ganesh 2024, Thm 3.1 / 3.3).

    Safe sides. The weights are the certified upper ends ``w_i`` with
    ``p_i <= w_i <= (1 + r) p_i`` (``r = pmf.rel_error``, about 7e-16), used in
    both directions:

    * remove (``P = sum w_i N(c_i)`` vs ``N(0)``): ``P`` is pointwise at least
      the true one, so delta(eps) = int (P - e^eps Q)_+ is at least the true one
      for every eps: the upper bound is safe as it stands; for the lower bound
      ``P`` is at most ``1 + r`` times the true one;
    * add (``N(0)`` vs ``Q = sum w_i N(-c_i)``): ``Q`` too large lowers delta,
      and ``Q <= (1 + r) Q_true`` moves every loss by at most ``log(1 + r)``.

    Both deviations are a relative error ``r`` on every cell mass and a loss
    error ``log(1 + r)`` at every output, which the losses report to the
    engine through ``weight_error`` (``_WeightError`` says which bound of
    which accountant charges them). What would *not* be safe: renormalising computed
    probabilities (a deficit in the true top component, renormalised away,
    lowers the upper bound), counting a deficit as mass at infinite loss for
    the lower bound (it adds ``T`` times the deficit to the lower delta: the
    cause of certified lower bounds above the truth), or dropping
    mass in the add direction (a lighter ``Q`` raises delta, so not a lower
    bound). Components below ``2^-1021`` (outside relative precision) carry
    ``5e-324`` at most, above their exact value: safe for the upper bound.
    """
    w = np.array(pmf.upper)
    keep = w > 0.0
    c, w = sens[keep], w[keep]
    return _mixture_pair(c, w, w, sigma, weight_error=pmf.rel_error)


def _check_fixed_batch(group_size: object, batch_size: object, dataset_size: object) -> tuple[int, int, int]:
    k = check_count("group_size", group_size)
    b = check_count("batch_size", batch_size)
    n = check_count("dataset_size", dataset_size)
    if b > n:
        raise ValueError(f"batch_size ({b}) must be <= dataset_size ({n})")
    if k > n:
        raise ValueError(f"group_size ({k}) must be <= dataset_size ({n})")
    return k, b, n


@dataclass(frozen=True, kw_only=True)
class GroupPoissonSampled(Mechanism):
    """One DP-SGD step with Poisson sampling, seen by a group of up to ``group_size`` examples.

    Dominated (tightly) by ``MixtureOfGaussians`` with sensitivity
    ``Binom(group_size, sampling_rate)`` and the same noise (Ganesh 2024, Thm 3.1);
    ``group_size = 1`` is the Poisson-subsampled Gaussian.

    Attained pair (Ganesh 2024, Sec. 3.3, tightness): one-dimensional gradients, ``+1`` for each of the
    ``group_size`` records of the group and 0 for every other record; adding the group moves the sum by
    ``Binom(group_size, q)``, which is the returned mixture. Lower ends are certified.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit sensitivity, positive and finite.
    sampling_rate : float
        Poisson sampling rate ``q`` in ``(0, 1]``.
    group_size : int
        Largest group size ``k``, a positive integer.

    Raises
    ------
    ValueError
        If ``noise_multiplier`` is not positive, ``sampling_rate`` lies outside ``(0, 1]`` or ``group_size`` is
        not a positive integer.

    References
    ----------
    Ganesh 2024, Thm 3.1 (the pair) and Sec. 3.3 (tightness).
    """

    type_name = "group_poisson_sampled"
    pair_attained = True
    noise_multiplier: float
    sampling_rate: float
    group_size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "group_size", check_count("group_size", self.group_size))

    def as_mixture(self) -> MixtureOfGaussians:
        """The dominating ``MixtureOfGaussians`` with the probabilities rounded (up) to doubles.

        ``privacy_losses`` does not go through it but uses the certified probabilities directly (see
        ``_group_pair``).

        Returns
        -------
        MixtureOfGaussians
            The mixture with the same noise.
        """
        c, p = binomial_sensitivity(self.group_size, self.sampling_rate)
        return MixtureOfGaussians(
            noise_multiplier=self.noise_multiplier, sensitivities=tuple(c.tolist()), probabilities=tuple(p.tolist())
        )

    def privacy_losses(self) -> LossPair:
        return _group_pair(
            np.arange(self.group_size + 1, dtype=float),
            certified_binomial(self.group_size, self.sampling_rate),
            self.noise_multiplier,
        )


@dataclass(frozen=True, kw_only=True)
class GroupFixedBatchSampled(Mechanism):
    """One DP-SGD step with a fixed batch of ``batch_size`` drawn without replacement from a data
    set of at least ``dataset_size`` examples, for groups of up to ``group_size`` examples
    under add-or-remove-up-to-k adjacency.

    Dominated (tightly) by ``MixtureOfGaussians`` with sensitivity
    ``2 * Hypergeom(B, n + k, k)`` and the same noise (Ganesh 2024, Thm 3.3).

    Attained pair (Ganesh 2024, Sec. 3.3, tightness): a data set ``D`` of exactly ``dataset_size`` records, each with
    one-dimensional gradient ``+1``, and ``D'`` = ``D`` plus ``group_size`` records with gradient ``-1``
    (add-up-to-k). A batch of ``B`` from ``D`` sums to ``B``; from ``D'`` it holds
    ``m ~ Hypergeom(B, n + k, k)`` group records and sums to ``B - 2 m``. After the public shift by ``B``
    the outputs are ``N(0)`` and the mixture of ``N(-2 m)``: the returned pair (the remove direction is the
    same pair of data sets read the other way). So the pair is attained under add/remove-up-to-k and lower
    ends are certified.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation per unit sensitivity, positive and finite.
    batch_size : int
        Batch size ``B``, a positive integer at most ``dataset_size``.
    dataset_size : int
        Smallest data set size ``n``, a positive integer.
    group_size : int
        Largest group size ``k``, a positive integer at most ``dataset_size``.

    Raises
    ------
    ValueError
        If ``noise_multiplier`` is not positive, a size is not a positive integer, ``batch_size >
        dataset_size`` or ``group_size > dataset_size``.

    References
    ----------
    Ganesh 2024, Thm 3.3 (the pair) and Sec. 3.3 (tightness).
    """

    type_name = "group_fixed_batch_sampled"
    pair_attained = True
    noise_multiplier: float
    batch_size: int
    dataset_size: int
    group_size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        k, b, n = _check_fixed_batch(self.group_size, self.batch_size, self.dataset_size)
        object.__setattr__(self, "group_size", k)
        object.__setattr__(self, "batch_size", b)
        object.__setattr__(self, "dataset_size", n)

    @property
    def sampling_rate(self) -> float:
        """The fraction ``batch_size / dataset_size`` of the data set in each batch."""
        return self.batch_size / self.dataset_size

    def as_mixture(self) -> MixtureOfGaussians:
        """The dominating ``MixtureOfGaussians`` with the probabilities rounded (up) to doubles.

        ``privacy_losses`` does not go through it but uses the certified probabilities directly (see
        ``_group_pair``).

        Returns
        -------
        MixtureOfGaussians
            The mixture with the same noise.
        """
        c, p = hypergeometric_sensitivity(self.group_size, self.batch_size, self.dataset_size)
        return MixtureOfGaussians(
            noise_multiplier=self.noise_multiplier, sensitivities=tuple(c.tolist()), probabilities=tuple(p.tolist())
        )

    def privacy_losses(self) -> LossPair:
        k, b, n = self.group_size, self.batch_size, self.dataset_size
        return _group_pair(2.0 * np.arange(min(k, b) + 1), certified_hypergeometric(k, b, n), self.noise_multiplier)
