"""What ran, as objects: the batch-sampling schemes of DP-SGD and the one registry of their names.

Each scheme is a frozen, keyword-only, validated dataclass that knows everything a front end needs:
how its run is accounted (``epsilon``: a step mechanism composed by any accountant, or the scheme's
certified function in ``tightdp.schemes``), its neighbouring relation, what group privacy can say
for it (``group_analysis``), the sentences of the privacy statement and report, which of its fields
a calibration may solve for, and how it is built from the keyword spellings of the CLI, the report's
config and the Python convenience keywords (``from_options``). ``tightdp.runs.TrainingRun`` pairs a
scheme with the noise and the length of the run.

The schemes (``SCHEMES`` maps every accepted spelling to its class):

* ``Poisson(sampling_rate)``: each example joins each batch independently (Opacus, dp_accounting);
* ``FixedBatch(batch_size, dataset_size)``: batches of exactly ``B`` drawn without replacement, add/remove
  neighbours (Ganesh 2024, Thm 3.3);
* ``WithoutReplacement(batch_size, dataset_size)`` / ``WithReplacement(...)``: substitute relation
  (Koskela et al. 2020, Sec. 6.2 / 6.3);
* ``RandomAllocation(steps_per_epoch, selected=1)``: every epoch each example in ``selected`` of the epoch's
  steps, drawn afresh every epoch (Feldman & Shenfeld; ``tightdp.schemes.allocation_epsilon``);
* ``CyclicAllocation(steps_per_cycle)``: each example in **one** step drawn once for the whole run and
  repeated every cycle (Choquette-Choo et al. ICLR 2025's balls-in-bins, jax_privacy's
  ``BallsInBinsSampling(iterations, cycle_length)``; ``from_jax_privacy``);
* ``Shuffle(steps_per_epoch)``: a fresh permutation cut into fixed batches every epoch (zero-out relation,
  Chua et al. 2403.17673);
* ``FixedOrder(steps_per_epoch)``: the same batches every epoch (no randomness: the Gaussian mechanism once
  per epoch);
* ``TruncatedPoisson(sampling_rate, dataset_size, max_batch_size)``: Poisson batches cut to a cap
  (Ganesh 2025, 2508.15089).

The spelling ``"balls-and-bins"`` is refused: tightdp used it for the fresh-every-epoch scheme while
jax_privacy's balls-in-bins fixes the bin for the whole run, which is far less private (sigma 1, 8 steps a
cycle, 32 steps, epsilon 2: delta 0.088 against 0.010, ``tightdp.schemes.cyclic_allocation_epsilon``).
A name that means either must mean neither.

The scheme classes are named as their samplers; ``tightdp.RandomAllocation`` (the one-epoch *mechanism*
the accountants compose) keeps its name, so the schemes live in this namespace
(``tightdp.sampling.RandomAllocation``) and are not re-exported at the top level.

Adding a scheme is one subclass of ``SamplingScheme`` decorated with ``register_scheme``: every front end
(``dpsgd_epsilon``, ``privacy_statement``, ``group_epsilon``, ``calibrate``, the CLI, the report) reads
what it needs from the class.
"""

from ._base import GroupAnalysis, Relation, SamplingScheme
from ._registry import (
    AMBIGUOUS,
    DEFAULT_SCHEME,
    SCHEMES,
    parse_sampling,
    register_scheme,
    scheme_class,
    scheme_from_dict,
    scheme_names,
    unregister_scheme,
)
from .epochs import CyclicAllocation, FixedOrder, RandomAllocation, Shuffle, from_jax_privacy
from .independent import FixedBatch, Poisson, TruncatedPoisson, WithoutReplacement, WithReplacement

__all__ = [
    "Relation",
    "GroupAnalysis",
    "SamplingScheme",
    "Poisson",
    "FixedBatch",
    "WithoutReplacement",
    "WithReplacement",
    "RandomAllocation",
    "CyclicAllocation",
    "Shuffle",
    "FixedOrder",
    "TruncatedPoisson",
    "SCHEMES",
    "AMBIGUOUS",
    "DEFAULT_SCHEME",
    "register_scheme",
    "unregister_scheme",
    "scheme_class",
    "scheme_names",
    "parse_sampling",
    "scheme_from_dict",
    "from_jax_privacy",
]
