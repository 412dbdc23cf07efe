"""The commonest question: epsilon of DP-SGD, for the sampling scheme that actually ran.

``sampling``:

* ``"poisson"`` (default): Poisson sampling at ``sampling_rate``, add/remove neighbouring, any accountant.
* ``"random-allocation"`` / ``"balls-and-bins"``: every example in exactly one of the ``t = 1/sampling_rate``
  steps of each epoch, chosen uniformly (``tightdp.schemes.allocation_epsilon``; the pairs in
  ``tightdp.mechanisms.allocation``); certified upper and lower bounds.
* ``"shuffle"``: a fresh permutation cut into ``t = 1/sampling_rate`` fixed batches each epoch
  (``tightdp.schemes.shuffle_epsilon``; zero-out neighbouring): the certified upper bound without
  amplification and Chua et al.'s certified lower bound; the gap is what no theorem closes yet.
* ``"truncated-poisson"``: Poisson batches cut to ``max_batch_size`` out of ``dataset_size``
  (``tightdp.schemes.truncated_poisson_epsilon``; dp-accounting's ``TruncatedSubsampledGaussianDpEvent``).
"""

from __future__ import annotations

from ._accuracy import check_accuracy
from ._validation import check_choice, check_count, check_delta, check_positive, check_probability
from .accountants import DEFAULT_ACCOUNTANT, create
from .bounds import Bounds
from .mechanisms import Gaussian, PoissonSampled
from .schemes import allocation_epsilon, shuffle_epsilon, truncated_poisson_epsilon

__all__ = ["dpsgd_epsilon", "dpsgd_mechanism", "SAMPLINGS"]

#: the sampling schemes ``dpsgd_epsilon`` accounts
SAMPLINGS = ("poisson", "random-allocation", "balls-and-bins", "shuffle", "truncated-poisson")


def dpsgd_mechanism(*, noise_multiplier: float, sampling_rate: float, relation: str = "add-remove") -> PoissonSampled:
    """One DP-SGD step: the Poisson-subsampled Gaussian with unit sensitivity (clipping norm C, noise sigma*C)."""
    return PoissonSampled(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                          sampling_rate=sampling_rate, relation=relation)


def _epochs(sampling_rate: float, steps: int) -> tuple[int, int]:
    """``(t, epochs)`` for the epoch-based schemes: ``t = 1/sampling_rate`` steps per epoch, whole epochs."""
    t = round(1.0 / sampling_rate)
    if abs(t * sampling_rate - 1.0) > 1e-9:
        raise ValueError(f"sampling_rate must be 1/t for a whole number t of steps per epoch "
                         f"(batch size = dataset size / t), got {sampling_rate!r}")
    if steps % t:
        raise ValueError(f"steps ({steps}) must be a whole number of epochs of {t} steps "
                         f"(1/sampling_rate) for this sampling scheme")
    return t, steps // t


def dpsgd_epsilon(*, noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                  accountant: str = DEFAULT_ACCOUNTANT, eps_error: float | None = None,
                  rel_error: float | None = None, sampling: str = "poisson",
                  dataset_size: int | None = None, max_batch_size: int | None = None) -> Bounds:
    """Bounds on the epsilon of ``steps`` DP-SGD steps at ``delta`` under the sampling scheme ``sampling``.

    ``sampling_rate`` is the expected fraction of the data per step (batch size / dataset size);
    for ``random-allocation``, ``balls-and-bins`` and ``shuffle`` it must be ``1/t`` and ``steps`` a
    multiple of ``t``; ``truncated-poisson`` also needs ``dataset_size`` and ``max_batch_size``.
    Schemes other than ``poisson`` use the dominance accountant (``accountant`` must be its
    name, ``connect-dots``). See the module docstring for what each scheme's interval promises.

    Accuracy (``tightdp._accuracy``): by default relative, ``upper - lower <= 2 max(1e-3 epsilon, 5e-5)``;
    ``eps_error`` alone asks for an absolute width ``2 eps_error``, ``rel_error`` for another relative
    one. Accountants other than the default take ``eps_error`` only (absolute; their own default if not given).

    >>> b = dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=256/50000, steps=19600, delta=1e-5)
    >>> b.lower <= b.upper
    True
    """
    check_positive("noise_multiplier", noise_multiplier)
    check_probability("sampling_rate", sampling_rate)
    steps = check_count("steps", steps)
    check_delta("delta", delta)
    check_accuracy(eps_error, rel_error)
    check_choice("sampling", sampling, SAMPLINGS)
    if sampling == "poisson":
        acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
        acc.compose(dpsgd_mechanism(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate), steps)
        return acc.epsilon(delta)
    if accountant != DEFAULT_ACCOUNTANT:
        raise ValueError(f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={sampling!r} (its bounds come "
                         f"from dominance pairs only), got {accountant!r}")
    if sampling == "truncated-poisson":
        if dataset_size is None:
            raise ValueError("dataset_size is required for sampling='truncated-poisson'")
        if max_batch_size is None:
            raise ValueError("max_batch_size is required for sampling='truncated-poisson'")
        return truncated_poisson_epsilon(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate,
                                         dataset_size=dataset_size, max_batch_size=max_batch_size, steps=steps,
                                         delta=delta, eps_error=eps_error, rel_error=rel_error)
    t, epochs = _epochs(sampling_rate, steps)
    if dataset_size is not None and check_count("dataset_size", dataset_size) < t:
        raise ValueError(f"dataset_size ({dataset_size}) must be at least the {t} steps per epoch "
                         "(batch size at least 1)")
    if sampling == "shuffle":
        return shuffle_epsilon(noise_multiplier=noise_multiplier, num_batches=t, epochs=epochs, delta=delta,
                               eps_error=eps_error, rel_error=rel_error)
    return allocation_epsilon(noise_multiplier=noise_multiplier, num_steps=t, epochs=epochs, delta=delta,
                              eps_error=eps_error, rel_error=rel_error)
