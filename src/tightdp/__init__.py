"""tightdp: tight differential-privacy accounting with certified lower and upper bounds.

Every answer is a ``Bounds(lower, estimate, upper)``; ``upper`` is a proven
bound unless the result's ``kind`` says ``"approximation"``.

The public API, by topic (each name is listed once, in ``__all__`` below):

* results and errors: ``Bounds``, ``TightDPError``, ``CalibrationError``, ``PrecisionError``,
  ``GridTooLargeError``, ``UnsupportedMechanismError``;
* mechanisms: ``Mechanism``, ``Gaussian``, ``Laplace``, ``RandomizedResponse``, ``PureDP``,
  ``ApproximateDP``, ``PoissonSampled``, ``SampledWithoutReplacement``, ``SampledWithReplacement``,
  ``MixtureOfGaussians``, ``GroupPoissonSampled``, ``GroupFixedBatchSampled``, and the sampling schemes
  people run: ``RandomAllocation`` (one epoch, a fresh step per epoch), ``TruncatedPoissonSampled``;
  discrete noise: ``DiscreteGaussian``, ``DiscreteLaplace``, ``Skellam``, ``DistributedDiscreteGaussian``,
  ``PoissonSampledDiscrete``, ``DiscreteGaussianVector``; selection: ``ExponentialMechanism``,
  ``PermuteAndFlip``, ``ReportNoisyMax``, ``SparseVector``, ``BoundedRange``;
* accountants: ``Accountant``, ``accountant_from_dict``, ``ConnectDotsAccountant`` (the default),
  ``PRVAccountant``, ``FourierAccountant``, ``RDPAccountant``, ``GDPAccountant``, ``EdgeworthAccountant``;
* what ran: ``TrainingRun`` (noise, sampling scheme, steps or epochs, ``Relation``) and the module
  ``sampling`` (the schemes ``sampling.Poisson``, ``sampling.RandomAllocation``, ``sampling.CyclicAllocation``,
  ``sampling.Shuffle``, ... and the one registry of their names; the scheme classes stay in that
  namespace, apart from the one-epoch mechanism ``RandomAllocation``);
* DP-SGD questions: ``dpsgd_epsilon`` (any sampling scheme), ``allocation_epsilon``,
  ``cyclic_allocation_epsilon``, ``shuffle_epsilon``, ``truncated_poisson_epsilon``, ``dpsgd_mechanism``, ``privacy_statement``, ``calibrate`` (any numeric
  field of a run) and its wrappers ``calibrate_noise``, ``calibrate_steps``, ``calibrate_sampling_rate``,
  ``group_epsilon``, ``group_epsilon_schedule``, ``group_report``, ``group_curve``;
* correlated noise (DP-FTRL, BandMF, BLT): ``matrix_epsilon``, ``calibrate_matrix_noise`` (the strategies
  and samplers stay in ``tightdp.matrix``);
* selection and tuning: ``selection_epsilon``, ``tuning_epsilon`` and ``Tuning`` (hyper-parameter tuning runs),
  ``discrete_vector_epsilon``;
* auditing: the module ``tightdp.audit`` (empirical lower bounds from canaries beside the certificate);
* operational views: ``tradeoff_curve`` / ``TradeoffCurve`` (certified f-DP trade-off curve, attack
  TPR at a given FPR, mu-GDP interval);
* interoperability and housekeeping: ``from_dp_event`` (dp_accounting events), ``clear_caches``.

The command line is ``tightdp.cli``, the privacy report ``tightdp.report``, per-example
accounting ``tightdp.individual``; framework integrations live in ``tightdp.integrations``
and are imported only by those who use them.
"""

from . import sampling
from ._caches import clear_caches
from ._version import __version__ as __version__
from .accountants import (
    Accountant,
    ConnectDotsAccountant,
    EdgeworthAccountant,
    FourierAccountant,
    GDPAccountant,
    PRVAccountant,
    RDPAccountant,
    accountant_from_dict,
)
from .bounds import Bounds
from .calibration import calibrate, calibrate_noise, calibrate_sampling_rate, calibrate_steps
from .dpsgd import dpsgd_epsilon, dpsgd_mechanism
from .errors import CalibrationError, GridTooLargeError, PrecisionError, TightDPError, UnsupportedMechanismError
from .group import group_curve, group_epsilon, group_epsilon_schedule, group_report
from .integrations.dp_accounting import from_dp_event
from .matrix import calibrate_matrix_noise, matrix_epsilon

# the schemes' accounting functions run the accountants: they live above them, in tightdp.schemes
from .mechanisms import (
    ApproximateDP,
    BoundedRange,
    DiscreteGaussian,
    DiscreteGaussianVector,
    DiscreteLaplace,
    DistributedDiscreteGaussian,
    ExponentialMechanism,
    Gaussian,
    GroupFixedBatchSampled,
    GroupPoissonSampled,
    Laplace,
    Mechanism,
    MixtureOfGaussians,
    PermuteAndFlip,
    PoissonSampled,
    PoissonSampledDiscrete,
    PureDP,
    RandomAllocation,
    RandomizedResponse,
    ReportNoisyMax,
    SampledWithoutReplacement,
    SampledWithReplacement,
    Skellam,
    SparseVector,
)
from .mechanisms.truncated import TruncatedPoissonSampled
from .runs import TrainingRun
from .sampling import Relation
from .schemes import allocation_epsilon, cyclic_allocation_epsilon, shuffle_epsilon, truncated_poisson_epsilon
from .statement import privacy_statement
from .tradeoff import TradeoffCurve, tradeoff_curve
from .tuning import Tuning, discrete_vector_epsilon, selection_epsilon, tuning_epsilon

__all__ = [
    # results and errors
    "Bounds",
    "TightDPError",
    "CalibrationError",
    "PrecisionError",
    "GridTooLargeError",
    "UnsupportedMechanismError",
    # mechanisms
    "Mechanism",
    "Gaussian",
    "Laplace",
    "RandomizedResponse",
    "PureDP",
    "ApproximateDP",
    "PoissonSampled",
    "SampledWithoutReplacement",
    "SampledWithReplacement",
    "MixtureOfGaussians",
    "GroupPoissonSampled",
    "GroupFixedBatchSampled",
    "RandomAllocation",
    "TruncatedPoissonSampled",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Skellam",
    "DistributedDiscreteGaussian",
    "PoissonSampledDiscrete",
    "DiscreteGaussianVector",
    "ExponentialMechanism",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "SparseVector",
    "BoundedRange",
    # accountants
    "Accountant",
    "accountant_from_dict",
    "ConnectDotsAccountant",
    "PRVAccountant",
    "FourierAccountant",
    "RDPAccountant",
    "GDPAccountant",
    "EdgeworthAccountant",
    # what ran
    "TrainingRun",
    "Relation",
    "sampling",
    # DP-SGD questions
    "dpsgd_epsilon",
    "allocation_epsilon",
    "cyclic_allocation_epsilon",
    "shuffle_epsilon",
    "truncated_poisson_epsilon",
    "dpsgd_mechanism",
    "privacy_statement",
    "calibrate",
    "calibrate_noise",
    "calibrate_steps",
    "calibrate_sampling_rate",
    "group_epsilon",
    "group_epsilon_schedule",
    "group_report",
    "group_curve",
    # correlated noise (matrix mechanism)
    "matrix_epsilon",
    "calibrate_matrix_noise",
    # selection mechanisms and tuning runs
    "selection_epsilon",
    "tuning_epsilon",
    "Tuning",
    "discrete_vector_epsilon",
    # operational views: f-DP trade-off curve, attack TPR at FPR, mu-GDP
    "TradeoffCurve",
    "tradeoff_curve",
    # interoperability and housekeeping
    "from_dp_event",
    "clear_caches",
]
