"""Correlated-noise training (matrix mechanism: DP-FTRL / tree aggregation, banded MF, BLT) with certified bounds.

The pipeline, one module each:

* ``strategies``: what ran, the strategy matrix ``C``: ``Identity`` (DP-SGD), ``BinaryTree`` (tree aggregation),
  ``BandedToeplitz`` (BandMF, from ``c_col`` and ``num_bands``), ``BLT`` (jax_privacy's ``BufferedToeplitz``
  parameters), ``BandedInverseToeplitz`` (a banded ``C^(-1)``: BISR, DP-lambda-CGD), ``DenseStrategy`` (any
  lower-triangular array); ``as_strategy`` builds one from a ``c_col`` vector, a matrix, a dict or a jax_privacy
  ``BufferedToeplitz`` (jax_privacy is never imported);
* ``participation`` and ``sensitivity``: participation patterns (``SINGLE``, ``MinSeparation``, ``Cyclic``,
  ``PerEpoch``) and the certified two-sided sensitivity ``sensitivity(strategy, participation, steps=n)`` (exact
  where a proof makes it so);
* ``accounting``: the samplers (``NoAmplification``, ``CyclicPoisson``, ``PoissonSampling``, ``BallsInBins``,
  ``EpochAllocation``, ``MinSepSampling``) and the one-call ``matrix_epsilon(strategy=..., noise_multiplier=...,
  steps=..., delta=..., sampler=...)`` -> ``tightdp.Bounds``; ``sampler_from_dict`` for run descriptions;
* ``mmcc``: MMCC's conditional composition (Choquette-Choo et al. 2024) for Poisson sampling with a
  non-negative ``C``, ``mmcc_epsilon(...)`` (``PoissonSampling`` uses it as one of its upper bounds);
* ``allocation``: balls-in-bins through comparisons of the modes' Gram matrix (Loewner, entrywise, mixed);
* ``calibration``: ``calibrate_matrix_noise(target_epsilon=..., ...)``.

Every answer's upper end is proven, its lower end comes from an explicit pair of neighbouring inputs; each
sampler's docstring says which theorem gives which end and where the interval is wide.
"""

from .accounting import (
    BallsInBins,
    CyclicPoisson,
    EpochAllocation,
    MinSepSampling,
    NoAmplification,
    PoissonSampling,
    Sampler,
    matrix_epsilon,
    sampler_from_dict,
)
from .calibration import MatrixCalibration, calibrate_matrix_noise
from .mmcc import mmcc_epsilon
from .participation import participation_from_dict
from .sensitivity import (
    SINGLE,
    Cyclic,
    MinSeparation,
    Participation,
    PerEpoch,
    SensitivityBounds,
    pattern_value,
    sensitivity,
)
from .strategies import (
    BLT,
    BandedInverseToeplitz,
    BandedToeplitz,
    BinaryTree,
    DenseStrategy,
    Identity,
    Strategy,
    as_strategy,
    strategy_from_dict,
)

__all__ = [
    # what ran
    "Strategy",
    "Identity",
    "BinaryTree",
    "BandedToeplitz",
    "BLT",
    "BandedInverseToeplitz",
    "DenseStrategy",
    "as_strategy",
    "strategy_from_dict",
    "Participation",
    "PerEpoch",
    "MinSeparation",
    "Cyclic",
    "SINGLE",
    "Sampler",
    "NoAmplification",
    "CyclicPoisson",
    "PoissonSampling",
    "BallsInBins",
    "EpochAllocation",
    "MinSepSampling",
    "participation_from_dict",
    "sampler_from_dict",
    # the answers
    "SensitivityBounds",
    "sensitivity",
    "pattern_value",
    "matrix_epsilon",
    "mmcc_epsilon",
    "MatrixCalibration",
    "calibrate_matrix_noise",
]
