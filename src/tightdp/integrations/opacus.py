"""Opacus drop-in: ``PrivacyEngine(accountant="tightdp")`` with certified epsilon.

Importing this module registers ``TightDPAccountant`` with Opacus under the
mechanism name ``"tightdp"``::

    import tightdp.integrations.opacus  # noqa: F401  (registers "tightdp")
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    model, optimizer, loader = engine.make_private_with_epsilon(..., target_epsilon=3.0, target_delta=1e-5,
                                                                epochs=10, ...)
    engine.get_epsilon(1e-5)    # the certified upper bound of tightdp's default accountant

The accountant implements Opacus' ``IAccountant`` interface (``step``,
``get_epsilon``, ``__len__``, ``mechanism``, ``state_dict`` /
``load_state_dict``, ``history`` of ``(noise_multiplier, sample_rate,
steps)`` segments, the same layout as Opacus' own accountants) and returns the
**upper** end of tightdp's certified bounds (Gopi et al. 2021, Thm. 5.5), so
it never under-reports. For a single segment it equals
``tightdp.dpsgd_epsilon(...).upper``; heterogeneous histories (a noise
schedule) compose every segment's Poisson-subsampled Gaussian in one PLD
(Koskela et al. 2020, Sec. 5.5).

``make_private_with_epsilon`` works unchanged: Opacus' ``get_noise_multiplier``
creates this accountant by name, sets its history and bisects on its
``get_epsilon``, so the noise it picks is certified to meet the target. For
the tightest noise use ``get_noise_multiplier`` from this module (same
signature; it runs ``tightdp.calibration.calibrate_noise``) and pass it to
``make_private``, or call ``install_calibration()`` once so that
``make_private_with_epsilon`` uses it.

**Which sampling ran.** Opacus' privacy analysis is that of Poisson sampling, which only its
``DPDataLoader`` (``UniformWithReplacementSampler``) performs; ``make_private(..., poisson_sampling=False)``
keeps the caller's loader, usually shuffled fixed batches. Importing this module wraps
``PrivacyEngine._prepare_data_loader`` so that an engine whose accountant is ``TightDPAccountant``
shows it the loader its training will use (``TightDPAccountant.observe_data_loader``; other accountants
are untouched). The accountant then reports the certified epsilon of the scheme that runs:

* ``DPDataLoader`` / ``UniformWithReplacementSampler``: Poisson sampling, as above;
* a ``BatchSampler`` over a ``RandomSampler`` without replacement (``shuffle=True``): shuffled fixed
  batches, ``tightdp.schemes.shuffle_epsilon`` (``upper``: no amplification, ``sqrt(E)/sigma``-GDP; no
  tighter certified bound is known), with a ``UserWarning`` that states what Poisson accounting would
  have claimed; epochs are counted up (``ceil(steps / t)``, ``t = len(loader)``) for the upper end and
  down for the lower end;
* a ``BatchSampler`` over a ``SequentialSampler`` (fixed order, ``tightdp.sampling.FixedOrder``): the same
  upper bound, which is then exact (each example in one known step per epoch);
* anything else is refused (``UnsupportedSamplerError``, a ``TightDPError`` and ``ValueError`` naming the sampler
  class and why), by ``make_private`` / ``make_private_with_epsilon`` before Opacus replaces the sampler, in both
  modes (``check_data_loader``): a ``WeightedRandomSampler`` has non-uniform per-example inclusion probabilities,
  which no single rate describes, and with ``poisson_sampling=True`` Opacus drops its weights and infers the rate
  ``1 / len(data_loader) = batch_size / num_samples``, not ``batch_size / N`` (opacus #813); a custom (batch)
  sampler or sampling with replacement has unknown inclusion probabilities. A loader given to
  ``observe_data_loader`` directly makes ``get_epsilon`` refuse instead.

**Accumulated batches are logical steps.** The accountant counts noise additions, not physical batches: Opacus
calls its hook (``get_optimizer_hook_fn``) once per noise addition, i.e. per optimizer step that is not skipped.
The logical batch of a step is what that one noise addition summed:

* ``BatchMemoryManager`` splits one Poisson batch into physical batches (``signal_skip_step`` on all but the last):
  one step at Opacus' Poisson rate; the split changes nothing;
* with ``poisson_sampling=False``, ``k`` backward passes before a step (``accumulated_iterations``) or ``k - 1``
  skipped steps (``signal_skip_step``) join ``k`` consecutive shuffled / fixed batches into one batch of ``k`` times
  the size: one step at rate ``k / len(loader)``, so ``len(loader) / k`` logical batches per epoch; a ``k`` that does
  not divide ``len(loader)`` is refused (a logical batch would straddle two epochs and could hold an example twice);
* skipped steps over Poisson batches outside ``BatchMemoryManager`` sum independent Poisson samples (an example
  can enter one noise addition several times): no Poisson-subsampled Gaussian describes it (Opacus counts one step
  at rate ``q``, an under-report; jax_privacy #271 is the same bug), so ``get_epsilon`` refuses. With
  ``poisson_sampling=True`` Opacus itself forbids several backward passes per step.

**Which mechanism ran (opacus #819).** ``DPOptimizer`` clips each per-example gradient to norm ``C``, sums the
logical batch, adds ``N(0, (noise_multiplier C)^2 I)`` once, then (``loss_reduction="mean"``) divides by
``expected_batch_size * accumulated_iterations``. ``expected_batch_size = int(N / len(data_loader))`` is fixed by
``make_private`` before training, whatever the realised Poisson batch size, so the division is a data-independent
post-processing of the noisy sum, and the accounted mechanism, the Poisson-subsampled Gaussian sum under add/remove
of one example, is the one that ran; the certified interval is ``dpsgd_epsilon``'s. Dividing by the realised batch
size ``|B|`` instead (or any data-dependent scale, e.g. adaptive clipping) would not be post-processing: ``|B|``
changes by one with the example's inclusion, so the output's scale depends on it and the Gaussian analysis no
longer bounds it (in high dimension the noise's scale reveals ``|B|``, a count released without noise); such a run is not what
tightdp certifies (``AdaClipDPOptimizer`` is refused). ``get_bounds(delta).details["mechanism"]``
(``TightDPAccountant.mechanism_statement``) states the mechanism, rate, accumulation and divisor of the run.

``make_private_with_epsilon(..., poisson_sampling=False)`` with this accountant calibrates the noise for
the loader it is given (shuffled or fixed-order batches: ``shuffle_noise_multiplier``, the smallest noise
whose epsilon, as ``get_epsilon`` will report it after ``epochs`` epochs, meets the target), not Opacus'
Poisson calibration, whose noise the shuffle bound then put far above the target (target 3 at
delta 1e-5, 10 epochs of 100 batches: Poisson's noise 0.814 reports epsilon 23.4 for shuffled batches;
the shuffle calibration picks 4.40); a loader no analysis describes is refused there, before training. Opacus looks
``get_noise_multiplier`` up at call time; the wrapper substitutes the calibrated noise for the duration of
that one call.

Requires the ``opacus`` extra (``pip install torch==2.13.0`` first, then
``pip install 'tightdp[opacus]'``).
"""

from __future__ import annotations

from ._opacus_accountant import MECHANISM, TightDPAccountant
from ._opacus_calibration import get_noise_multiplier, install_calibration, shuffle_noise_multiplier
from ._opacus_loaders import UNKNOWN, UnsupportedSamplerError, check_data_loader, classify_data_loader, loader_scheme
from ._opacus_patches import _calibrate_for_the_loader, _count_skipped_steps, _watch_data_loaders

try:
    from opacus.accountants import register_accountant
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "tightdp.integrations.opacus needs Opacus: pip install torch==2.13.0 && pip install 'tightdp[opacus]'"
    ) from exc

__all__ = [
    "TightDPAccountant",
    "MECHANISM",
    "get_noise_multiplier",
    "shuffle_noise_multiplier",
    "install_calibration",
    "register",
    "classify_data_loader",
    "loader_scheme",
    "check_data_loader",
    "UnsupportedSamplerError",
    "UNKNOWN",
]


def register() -> None:
    """Register ``TightDPAccountant`` with Opacus under ``"tightdp"``, let it see the training loader
    (``_watch_data_loaders``) and calibrate for it (``_calibrate_for_the_loader``); done on import; idempotent."""
    register_accountant(MECHANISM, TightDPAccountant, force=True)
    _watch_data_loaders()
    _calibrate_for_the_loader()
    _count_skipped_steps()


register()
