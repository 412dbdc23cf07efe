"""tightdp: tight differential-privacy accounting with certified lower and upper bounds.

Every answer is a ``Bounds(lower, estimate, upper)``; ``upper`` is a proven
bound unless the result's ``kind`` says ``"approximation"``.
"""

from .bounds import Bounds
from .errors import GridTooLargeError, PrecisionError, TightDPError, UnsupportedMechanismError
from .mechanisms import (ApproximateDP, Gaussian, Laplace, Mechanism, PoissonSampled, PureDP,
                         RandomizedResponse, SampledWithoutReplacement, SampledWithReplacement)
from .mechanisms import GroupFixedBatchSampled, GroupPoissonSampled, MixtureOfGaussians
from .accountants import Accountant, ConnectDotsAccountant, FourierAccountant, PRVAccountant, accountant_from_dict
from .dpsgd import dpsgd_epsilon, dpsgd_mechanism
from ._numerics import clear_caches
from .accountants import EdgeworthAccountant, GDPAccountant, RDPAccountant

__version__ = "0.1.0"

__all__ = [
    "Bounds", "GridTooLargeError", "PrecisionError", "TightDPError", "UnsupportedMechanismError",
    "Mechanism", "Gaussian", "Laplace", "RandomizedResponse", "PureDP", "ApproximateDP",
    "PoissonSampled", "SampledWithoutReplacement", "SampledWithReplacement",
    "Accountant", "accountant_from_dict", "PRVAccountant", "FourierAccountant", "ConnectDotsAccountant",
    "dpsgd_epsilon", "dpsgd_mechanism", "clear_caches",
]
__all__ += ["RDPAccountant", "GDPAccountant", "EdgeworthAccountant"]
__all__ += ["MixtureOfGaussians", "GroupPoissonSampled", "GroupFixedBatchSampled"]
from .integrations.dp_accounting import from_dp_event
from .calibration import calibrate_noise, calibrate_sampling_rate, calibrate_steps
__all__ += ["from_dp_event", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate"]
from .group import group_curve, group_epsilon, group_epsilon_schedule, group_report
__all__ += ["group_epsilon", "group_epsilon_schedule", "group_report", "group_curve"]
