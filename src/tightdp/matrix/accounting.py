"""Epsilon of a matrix-mechanism run (strategy ``C``, noise ``sigma``, ``n`` steps, a sampler), certified two-sided.

The release is ``C x + z`` with ``z ~ N(0, sigma^2 I)`` and ``x`` the clipped (norm <= 1) gradient sums; a
sampler decides at which steps a user's gradient enters. Each sampler is a small frozen object; its
``ledgers`` give two lists of tightdp mechanisms, composed by the default (connect-dots) accountant:

* the **upper ledger** dominates the run (a proof is in the sampler's docstring), so its certified upper
  end is an upper bound on the run's epsilon;
* the **lower ledger** is the exact privacy-loss distribution of an explicit pair of neighbouring inputs
  (or of a post-processing of one), so its certified lower end is a lower bound on the run's epsilon.

**Noise splitting** (used by the samplers for a ``b``-banded ``C``): write ``z = z_0 + ... + z_(b-1)`` with
independent ``z_r ~ N(0, sigma^2 / b I)`` and release ``y_r = sum_{s = r mod b} C_s x_s + z_r`` for every ``r``;
``C x + z = sum_r y_r`` is a post-processing, so this richer release's epsilon is an upper bound. In ``y_r`` the
steps ``s = r (mod b)`` are at least ``b`` apart, so their row windows ``[s, s + b)`` are disjoint: the richer
release is a sequence of independent Gaussian steps, step ``s`` with noise ``sigma / sqrt b`` and sensitivity
``||C_s||``, on orthogonal coordinates, i.e. DP-SGD with the same sampler. It turns every DP-SGD amplification
result into a certified (if loose by up to ``sqrt b`` in noise) amplified bound for banded strategies.

Adaptivity: for a lower-triangular ``C`` (and tree aggregation released node by node) a user's adaptively
chosen gradients are no worse than non-adaptive ones of the same norms (Denisov et al. 2022, arXiv
2202.08312, Thm 2.1), so every pattern-wise argument below holds in the adaptive setting.
"""

from __future__ import annotations

from typing import Any

from .._accuracy import check_accuracy
from .._blas import one_blas_thread
from .._validation import check_count, check_delta, check_positive
from ..bounds import Bounds
from ._allocation_samplers import BallsInBins, EpochAllocation, MinSepSampling
from ._ledger_samplers import CyclicPoisson, NoAmplification, PoissonSampling
from ._sampler_base import Sampler
from .participation import participation_from_dict
from .strategies import as_strategy, reject

__all__ = [
    "BallsInBins",
    "CyclicPoisson",
    "EpochAllocation",
    "MinSepSampling",
    "NoAmplification",
    "PoissonSampling",
    "Sampler",
    "matrix_epsilon",
    "sampler_from_dict",
]


def sampler_from_dict(data: dict[str, Any]) -> Sampler:
    """Rebuild a sampler from ``Sampler.to_dict()`` output (a run description, a CLI strategy file).

    Parameters
    ----------
    data : dict
        ``{"type": name, **fields}``.

    Returns
    -------
    Sampler
        The sampler.

    Raises
    ------
    ValueError
        An unknown ``type`` or bad fields.
    """
    types = {
        c.type_name: c
        for c in (NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins, EpochAllocation, MinSepSampling)
    }
    if not isinstance(data, dict) or data.get("type") not in types:
        reject(f"sampler must be a dict with 'type' one of {sorted(types)}, got {data!r}")
    kw = {k: v for k, v in data.items() if k != "type"}
    part = kw.get("participation")
    if isinstance(part, dict):
        kw["participation"] = participation_from_dict(part)
    try:
        return types[data["type"]](**kw)
    except TypeError as exc:
        raise ValueError(f"sampler {data['type']!r}: {exc}") from None


@one_blas_thread
def matrix_epsilon(
    *,
    strategy: Any,
    noise_multiplier: float,
    steps: int,
    delta: float,
    sampler: Sampler | None = None,
    bands: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """Certified bounds on the epsilon of a matrix-mechanism run at ``delta`` (add/remove neighbouring).

    Parameters
    ----------
    strategy : Strategy, array or jax_privacy ``BufferedToeplitz``
        The strategy matrix ``C`` (``tightdp.matrix.as_strategy``: a one-dimensional ``c_col`` is banded
        Toeplitz with ``bands``).
    noise_multiplier : float
        ``sigma``: the noise ``z ~ N(0, sigma^2 I)`` added to ``C x`` for clipping norm 1 (jax_privacy's
        ``noise_multiplier`` when ``C``'s largest column norm is 1).
    steps : int
        ``n``, the number of training steps (columns of ``C``).
    delta : float
        The target delta.
    sampler : Sampler, optional
        ``NoAmplification(participation=...)`` (default, single participation), ``CyclicPoisson``,
        ``PoissonSampling``, ``BallsInBins`` (jax_privacy's), ``EpochAllocation`` or ``MinSepSampling``
        (jax_privacy's ``BMinSepSampling``); each docstring states what
        its ends prove.
    bands : int, optional
        The band count of a ``c_col`` vector given as ``strategy`` (default its length).
    eps_error, rel_error : float, optional
        Accuracy of the engine (``tightdp._accuracy``); the interval may be wider where a sampler's theory is.

    Returns
    -------
    Bounds
        ``lower``/``upper`` proven; ``details`` name the strategy, sampler, sensitivity and methods.

    Raises
    ------
    ValueError
        Bad arguments, naming the argument.
    PrecisionError
        No upper bound of the run is within the engine's reach (every alternative refused).
    """
    strat = as_strategy(strategy, bands=bands)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = check_count("steps", steps)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    sampler = NoAmplification() if sampler is None else sampler
    if not isinstance(sampler, Sampler):
        reject(
            f"sampler must be NoAmplification, CyclicPoisson, PoissonSampling, BallsInBins, "
            f"EpochAllocation or MinSepSampling, got {sampler!r}"
        )
    head = {"strategy": strat.describe(), "sampler": sampler.describe(), "steps": n}
    out = sampler.epsilon(strat, sigma, n, delta, eps_error, rel_error)
    return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound", {**head, **dict(out.details)})
