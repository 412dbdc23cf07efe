"""Mechanisms ("what ran") and their privacy loss random variables (what the engine composes)."""

from .allocation import AllocationLoss, RandomAllocation
from .base import LossPair, Mechanism, mechanism_from_dict
from .basic import ApproximateDP, Gaussian, Laplace, PureDP, RandomizedResponse
from .discrete import DiscreteGaussian, DiscreteLaplace, DistributedDiscreteGaussian, PoissonSampledDiscrete, Skellam
from .discrete_vector import DiscreteGaussianVector
from .mixture import GroupFixedBatchSampled, GroupPoissonSampled, MixtureOfGaussians
from .selection import BoundedRange, ExponentialMechanism, PermuteAndFlip, ReportNoisyMax, SparseVector
from .subsampled import RELATIONS, PoissonSampled, SampledWithoutReplacement, SampledWithReplacement

__all__ = [
    "Mechanism",
    "LossPair",
    "mechanism_from_dict",
    "Gaussian",
    "Laplace",
    "RandomizedResponse",
    "PureDP",
    "ApproximateDP",
    "PoissonSampled",
    "SampledWithoutReplacement",
    "SampledWithReplacement",
    "RELATIONS",
    "MixtureOfGaussians",
    "GroupPoissonSampled",
    "GroupFixedBatchSampled",
    "RandomAllocation",
    "AllocationLoss",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Skellam",
    "DistributedDiscreteGaussian",
    "PoissonSampledDiscrete",
    "DiscreteGaussianVector",
    "BoundedRange",
    "ExponentialMechanism",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "SparseVector",
]
