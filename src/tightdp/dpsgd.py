"""The commonest question: epsilon of DP-SGD with Poisson sampling under add/remove neighbouring."""

from __future__ import annotations

from ._validation import check_count, check_delta, check_eps_error, check_positive, check_probability
from .accountants import DEFAULT_ACCOUNTANT, create
from .bounds import Bounds
from .mechanisms import Gaussian, PoissonSampled

__all__ = ["dpsgd_epsilon", "dpsgd_mechanism"]


def dpsgd_mechanism(*, noise_multiplier: float, sampling_rate: float, relation: str = "add-remove") -> PoissonSampled:
    """One DP-SGD step: the Poisson-subsampled Gaussian with unit sensitivity (clipping norm C, noise sigma*C)."""
    return PoissonSampled(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                          sampling_rate=sampling_rate, relation=relation)


def dpsgd_epsilon(*, noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                  accountant: str = DEFAULT_ACCOUNTANT, eps_error: float = 0.01) -> Bounds:
    """Bounds on the epsilon of ``steps`` DP-SGD steps at ``delta``.

    >>> b = dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=256/50000, steps=19600, delta=1e-5)
    >>> b.lower <= b.upper
    True
    """
    check_positive("noise_multiplier", noise_multiplier)
    check_probability("sampling_rate", sampling_rate)
    steps = check_count("steps", steps)
    check_delta("delta", delta)
    check_eps_error("eps_error", eps_error)
    acc = create(accountant, eps_error=eps_error)
    acc.compose(dpsgd_mechanism(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate), steps)
    return acc.epsilon(delta)
