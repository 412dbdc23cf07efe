"""Correlated-noise training (matrix mechanism: DP-FTRL / tree aggregation, banded MF, BLT) with certified bounds.

* ``strategies``: the strategy matrix ``C`` (``Identity``, ``BinaryTree``, ``BandedToeplitz``, ``BLT``,
  ``DenseStrategy``; ``as_strategy`` from a ``c_col`` array, a matrix or jax_privacy's ``BufferedToeplitz``);
* ``sensitivity``: participation patterns (``SINGLE``, ``MinSeparation``, ``Cyclic``) and the certified
  two-sided sensitivity ``sensitivity(strategy, participation, steps=n)``.
"""

from .sensitivity import SINGLE, Cyclic, MinSeparation, Participation, SensitivityBounds, pattern_value, sensitivity
from .strategies import BLT, BandedToeplitz, BinaryTree, DenseStrategy, Identity, Strategy, as_strategy, \
    strategy_from_dict

__all__ = ["Strategy", "Identity", "BinaryTree", "BandedToeplitz", "BLT", "DenseStrategy", "as_strategy",
           "strategy_from_dict", "Participation", "MinSeparation", "Cyclic", "SINGLE", "SensitivityBounds",
           "sensitivity", "pattern_value"]

from .accounting import (BallsInBins, CyclicPoisson, EpochAllocation, NoAmplification, PoissonSampling,  # noqa: E402
                         Sampler, matrix_epsilon)

__all__ += ["Sampler", "NoAmplification", "CyclicPoisson", "PoissonSampling", "BallsInBins", "EpochAllocation",
            "matrix_epsilon"]

from .calibration import MatrixCalibration, calibrate_matrix_noise  # noqa: E402

__all__ += ["MatrixCalibration", "calibrate_matrix_noise"]
