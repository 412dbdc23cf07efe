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
**upper** end of tightdp's certified bounds (Gopi et al. 2021, 003 Thm 5.5), so
it never under-reports. For a single segment it equals
``tightdp.dpsgd_epsilon(...).upper``; heterogeneous histories (a noise
schedule) compose every segment's Poisson-subsampled Gaussian in one PLD
(001 Sec. 5.5).

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

import math
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive, check_probability, check_real
from ..accountants import DEFAULT_ACCOUNTANT
from ._opacus_loaders import UNKNOWN, UnsupportedSamplerError, check_data_loader, classify_data_loader, loader_scheme

try:
    from opacus.accountants import IAccountant, register_accountant
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

#: The name under which the accountant is registered with Opacus.
MECHANISM = "tightdp"


def _accounts_history(sampling: str) -> bool:
    """Whether the history of ``(noise, rate, steps)`` segments describes the loader (Poisson sampling)."""
    cls = loader_scheme(sampling)
    return cls is not None and cls.any_accountant


class TightDPAccountant(IAccountant):
    """Opacus accountant backed by tightdp's certified default accountant (connect-dots).

    Parameters
    ----------
    accountant:
        tightdp accountant name for the epsilon (default ``"connect-dots"``, certified).
    eps_error, rel_error:
        The accuracy asked for (``tightdp._accuracy``): by default relative, an interval of width
        at most ``2 max(1e-3 epsilon, 5e-5)``; ``eps_error`` alone is an absolute width ``2 eps_error``.
        The reported epsilon is the interval's upper end.
    """

    def __init__(
        self, *, accountant: str = DEFAULT_ACCOUNTANT, eps_error: float | None = None, rel_error: float | None = None
    ) -> None:
        super().__init__()
        self.history: list[tuple[float, float, int]] = []
        self.accountant = accountant
        self.eps_error, self.rel_error = check_accuracy(eps_error, rel_error)
        self._cache: dict[Any, Any] = {}
        #: the sampling the training loader performs (``observe_data_loader``); ``"poisson"`` until a loader
        #: is seen, which is Opacus' contract for ``step(sample_rate=...)``
        self.sampling = "poisson"
        self.loader_facts: dict[str, Any] = {}
        #: what the last noise addition saw of the optimizer (``get_optimizer_hook_fn``): its type,
        #: ``expected_batch_size``, ``loss_reduction``, ``max_grad_norm``, ``accumulated`` physical batches
        self.optimizer_facts: dict[str, Any] = {}
        #: why no epsilon can be reported (an accumulation no analysis describes), or ``None``
        self.refusal: str | None = None
        self._warned = False

    def observe_data_loader(self, data_loader) -> str:
        """Record which sampling ``data_loader`` performs (``classify_data_loader``); returns it. Called by
        ``PrivacyEngine`` through the wrapper this module installs; call it yourself for a loader that Opacus
        did not prepare. A loader that is not Poisson-sampled makes ``get_epsilon`` account what it does."""
        sampling, facts = classify_data_loader(data_loader)
        self.sampling, self.loader_facts = sampling, facts
        self._cache.clear()
        self._warned = False
        if not _accounts_history(sampling):
            warnings.warn(
                f"tightdp: the training DataLoader is not Poisson-sampled ({sampling}: "
                f"{facts.get('sampler')}); Opacus' Poisson accounting does not describe it. "
                + (
                    "TightDPAccountant reports the certified epsilon of shuffled / fixed batches "
                    "(no amplification) instead."
                    if loader_scheme(sampling) is not None
                    else "TightDPAccountant will refuse to report an epsilon for it."
                ),
                UserWarning,
                stacklevel=2,
            )
        return sampling

    # ---------------------------------------------------------------- Opacus API
    def get_optimizer_hook_fn(self, sample_rate: float):
        """The hook Opacus runs after each noise addition (``DPOptimizer.pre_step``): one logical step per call,
        at the rate of the logical batch, ``sample_rate`` times the physical batches it accumulated (backward
        passes, ``accumulated_iterations``, times the skipped steps, ``signal_skip_step``, that were not a
        ``BatchMemoryManager`` split of one sampled batch). Skipped steps over a Poisson loader accumulate
        independent Poisson batches (an example can enter one noise addition several times), which no
        Poisson-subsampled Gaussian describes: ``get_epsilon`` then refuses (``UnsupportedSamplerError``)."""
        base = check_probability("sample_rate", sample_rate)

        def hook_fn(optim) -> None:
            skips, optim._tightdp_skips = int(getattr(optim, "_tightdp_skips", 0)), 0
            k = int(optim.accumulated_iterations) * (skips + 1)
            self.optimizer_facts = {
                "optimizer": type(optim).__name__,
                "accumulated": k,
                "expected_batch_size": getattr(optim, "expected_batch_size", None),
                "loss_reduction": getattr(optim, "loss_reduction", None),
                "max_grad_norm": getattr(optim, "max_grad_norm", None),
            }
            if skips and _accounts_history(self.sampling) and self.refusal is None:
                self.refusal = (
                    f"gradient accumulation over {skips + 1} Poisson batches by signal_skip_step: "
                    "one noise addition then sums independent Poisson samples, in which an example "
                    "can appear several times; use BatchMemoryManager (it splits one Poisson batch) "
                    "or a larger Poisson batch"
                )
            if type(optim).__name__.startswith("AdaClip") and self.refusal is None:
                self.refusal = (
                    f"{type(optim).__name__} adapts the clipping norm to the data: not the "
                    "subsampled Gaussian accounted here"
                )
            self._cache.clear()
            # Poisson: Opacus' own rate (it forbids backward passes without a step); otherwise k consecutive
            # shuffled / fixed batches form one logical batch of k times the size
            mult = int(optim.accumulated_iterations) if _accounts_history(self.sampling) else k
            self.step(noise_multiplier=optim.noise_multiplier, sample_rate=min(1.0, base * mult))

        return hook_fn

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimisation step (consecutive identical steps share a history segment)."""
        sigma = check_positive("noise_multiplier", noise_multiplier)
        q = check_probability("sample_rate", sample_rate)
        if self.history and self.history[-1][0] == sigma and self.history[-1][1] == q:
            s, r, n = self.history[-1]
            self.history[-1] = (s, r, n + 1)
        else:
            self.history.append((sigma, q, 1))

    def get_epsilon(self, delta: float, *args, **kwargs) -> float:
        """Certified upper bound on epsilon spent so far at ``delta`` (Opacus' contract: a float), for the
        sampling the loader performs (module docstring); refuses (``ValueError``) for an unknown sampler."""
        b = self.get_bounds(delta)
        if not _accounts_history(self.sampling) and not self._warned:
            self._warned = True
            poisson = dict(b.details).get("poisson_epsilon")
            warnings.warn(
                f"tightdp: {self.sampling} batches: certified epsilon <= {b.upper:.4g} at delta = {delta:g} "
                f"(interval [{b.lower:.4g}, {b.upper:.4g}]); Poisson accounting would claim "
                f"{poisson:.4g}, which no theorem supports for this loader.",
                UserWarning,
                stacklevel=2,
            )
        return float(b.upper)

    def get_bounds(self, delta: float):
        """The full ``tightdp.Bounds`` (lower, estimate, upper) behind ``get_epsilon``."""
        from ..bounds import Bounds

        delta = check_delta("delta", delta)
        segments = self._segments()
        if not segments:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": "no steps taken"})
        if self.refusal is not None:
            raise UnsupportedSamplerError(f"training: tightdp refuses to account this run: {self.refusal}")
        key = (tuple(segments), delta, self.accountant, self.eps_error, self.rel_error, self.sampling)
        if key not in self._cache:
            if loader_scheme(self.sampling) is None:
                raise ValueError(
                    f"data_loader: no epsilon for this training loader: its sampler "
                    f"({self.loader_facts.get('sampler')}) is neither Opacus' Poisson sampler nor "
                    "shuffled or fixed-order batches, and Opacus' Poisson accounting does not describe "
                    "it; use make_private(poisson_sampling=True) or a shuffled DataLoader"
                )
            self._cache.clear()
            if _accounts_history(self.sampling):
                self._cache[key] = _epsilon_of_history(segments, delta, self.accountant, self.eps_error, self.rel_error)
            else:
                self._cache[key] = _fixed_batches_epsilon(
                    segments, delta, self.sampling, self.loader_facts, self.eps_error, self.rel_error
                )
        b = self._cache[key]
        return replace(b, details={**dict(b.details), "mechanism": self.mechanism_statement()})

    def mechanism_statement(self) -> str:
        """The mechanism the reported interval is for (module docstring, "Which mechanism ran")."""
        seg = self._segments()
        rates = sorted({q for _, q, _ in seg})
        f = self.optimizer_facts
        k = f.get("accumulated", 1)
        if _accounts_history(self.sampling):
            text = (
                "Poisson-subsampled Gaussian (add/remove one example): each optimizer step adds "
                "N(0, (noise_multiplier * C)^2 I) once to the sum of the per-example gradients, each clipped to "
                f"norm C, of one Poisson sample at rate {', '.join(f'{q:g}' for q in rates) or 'q'}"
            )
        else:
            text = (
                f"Gaussian on the sum of clipped per-example gradients over {self.sampling} batches, one noise "
                "addition per logical batch, no amplification by sampling"
            )
        if k > 1:
            text += f"; the logical batch of a step was accumulated from {k} physical batches (one noise addition)"
        if f.get("loss_reduction") == "mean":
            text += (
                f"; Opacus then divides by the constant expected_batch_size * accumulated_iterations "
                f"({f.get('expected_batch_size')} * {k}), fixed before training: post-processing, no change "
                "to epsilon (a division by the realised batch size would not be covered)"
            )
        return text

    def __len__(self) -> int:
        """Number of history segments (as Opacus' accountants: ``len(history)``)."""
        return len(self.history)

    @property
    def steps(self) -> int:
        """Total number of steps taken."""
        return sum(int(n) for _, _, n in self.history)

    @classmethod
    def mechanism(cls) -> str:
        return MECHANISM

    def state_dict(self, destination=None):
        if destination is None:
            destination = OrderedDict()
        destination = super().state_dict(destination)
        destination["tightdp"] = {
            "accountant": self.accountant,
            "eps_error": self.eps_error,
            "rel_error": self.rel_error,
            "sampling": self.sampling,
            "loader": dict(self.loader_facts),
            "refusal": self.refusal,
            "optimizer": dict(self.optimizer_facts),
        }
        return destination

    def load_state_dict(self, state_dict) -> None:
        """Restore ``state_dict()`` output; everything is validated before anything changes."""
        history = None
        opts = {}
        if isinstance(state_dict, Mapping):
            if "history" in state_dict:
                history = [_seg(i, h) for i, h in enumerate(state_dict["history"])]
            opts = dict(state_dict.get("tightdp") or {})
        accountant = opts.get("accountant", self.accountant)
        if not isinstance(accountant, str):
            raise ValueError(f"tightdp.accountant must be a name, got {accountant!r}")
        eps_error, rel_error = check_accuracy(
            opts.get("eps_error", self.eps_error),
            opts.get("rel_error", self.rel_error if "eps_error" not in opts else None),
        )
        sampling = opts.get("sampling", "poisson")
        loader_scheme(sampling)  # a ValueError naming tightdp.sampling if no loader samples that way
        super().load_state_dict(state_dict)  # Opacus' checks: keys present, same mechanism name
        self.history = history if history is not None else []
        self.accountant, self.eps_error, self.rel_error = accountant, eps_error, rel_error
        self.sampling, self.loader_facts = sampling, dict(opts.get("loader") or {})
        self.refusal, self.optimizer_facts = opts.get("refusal"), dict(opts.get("optimizer") or {})
        self._cache.clear()

    def _segments(self) -> list[tuple[float, float, int]]:
        return [_seg(i, h) for i, h in enumerate(self.history)]


def _seg(i: int, h) -> tuple[float, float, int]:
    try:
        sigma, q, n = h
    except (TypeError, ValueError):
        raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {h!r}") from None
    return (
        check_positive(f"history[{i}] noise_multiplier", sigma),
        check_probability(f"history[{i}] sample_rate", q),
        check_count(f"history[{i}] steps", n),
    )


def _epsilon_of_history(
    segments, delta: float, accountant: str, eps_error: float | None, rel_error: float | None = None
):
    """``dpsgd_epsilon`` for one segment; one composed ledger for a noise schedule."""
    from ..dpsgd import dpsgd_epsilon

    merged: dict[tuple[float, float], int] = {}
    for sigma, q, n in segments:
        merged[(sigma, q)] = merged.get((sigma, q), 0) + n
    if len(merged) == 1:
        (sigma, q), n = next(iter(merged.items()))
        return dpsgd_epsilon(
            noise_multiplier=sigma,
            sampling_rate=q,
            steps=n,
            delta=delta,
            accountant=accountant,
            eps_error=eps_error,
            rel_error=rel_error,
        )
    from ..accountants import create
    from ..dpsgd import dpsgd_mechanism

    acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
    acc.compose([(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), n) for (s, q), n in merged.items()])
    return acc.epsilon(delta)


def _fixed_batches_epsilon(
    segments, delta: float, sampling: str, facts: Mapping[str, Any], eps_error: float | None, rel_error: float | None
):
    """Shuffled or fixed-order batches: the ``TrainingRun`` of the loader's scheme (``loader_scheme``) with the
    epochs counted up for the upper end (more epochs: a larger bound) and down for the lower end; Poisson's
    figure in ``details``."""
    from ..bounds import Bounds
    from ..dpsgd import dpsgd_epsilon
    from ..runs import TrainingRun
    from ..sampling import FixedOrder

    if len({(s, q) for s, q, _ in segments}) != 1:
        raise ValueError(
            "history: shuffled / fixed-order batches are accounted for one noise multiplier and one "
            "loader; this history has several segments"
        )
    sigma, q = segments[0][0], segments[0][1]
    steps = sum(n for _, _, n in segments)
    t = max(1, round(1.0 / q))
    physical = facts.get("batches")
    if physical:  # k physical batches per step (q = k / physical): t = physical / k logical batches per epoch
        k = round(q * physical)
        if k < 1 or abs(q * physical - k) > 1e-9 * k or physical % k:
            raise UnsupportedSamplerError(
                f"history: steps accumulate {q * physical:g} of the {physical} batches of an epoch, which does not "
                "divide it: a logical batch then straddles two epochs and can hold an example twice"
            )
        t = physical // k
    scheme = loader_scheme(sampling)(steps_per_epoch=t)

    def epochs(e: int):
        return TrainingRun(noise_multiplier=sigma, sampling=scheme, epochs=e).epsilon(
            delta=delta, eps_error=eps_error, rel_error=rel_error
        )

    up = epochs(math.ceil(steps / t))
    notes = []
    if isinstance(scheme, FixedOrder):  # each example in one known step per epoch: the interval is exact
        lower = float(up.lower) if steps % t == 0 else 0.0
    elif steps // t == 0:
        lower = 0.0
        notes.append("less than one epoch: no attack lower bound")
    elif facts.get("drop_last") and facts.get("dataset_size", 0) % max(1, facts.get("batch_size", 1)):
        lower = 0.0
        notes.append("drop_last leaves some examples out of an epoch: Chua et al.'s lower bound does not apply")
    else:
        lower = epochs(steps // t).lower
    poisson = dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta, eps_error=eps_error, rel_error=rel_error
    )
    details = {
        **dict(up.details),
        "loader": sampling,
        "epochs_counted": math.ceil(steps / t),
        "poisson_epsilon": poisson.upper,
        "note": "; ".join(
            [
                "the DataLoader is not Poisson-sampled: epsilon of shuffled / fixed batches "
                "without amplification (no tighter certified bound is known)"
            ]
            + notes
        ),
    }
    return Bounds(min(lower, up.upper), up.upper, up.upper, "epsilon", "bound", details)


def get_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    epochs: int | None = None,
    steps: int | None = None,
    accountant: str = MECHANISM,
    epsilon_tolerance: float = 0.01,
    **kwargs,
) -> float:
    """Drop-in for ``opacus.accountants.utils.get_noise_multiplier``, calibrated by tightdp.

    Same arguments (``steps = int(epochs / sample_rate)`` as in Opacus). The
    result is the smallest noise multiplier (to 0.1 %) whose certified epsilon
    is at most ``target_epsilon`` (``tightdp.calibration.calibrate_noise``);
    ``epsilon_tolerance`` is accepted for compatibility and ignored, since the
    search is on the noise, not on epsilon. For any other ``accountant`` name
    the call goes to Opacus' own function.
    """
    if accountant != MECHANISM:
        from opacus.accountants.utils import get_noise_multiplier as opacus_gnm

        return opacus_gnm(
            target_epsilon=target_epsilon,
            target_delta=target_delta,
            sample_rate=sample_rate,
            epochs=epochs,
            steps=steps,
            accountant=accountant,
            epsilon_tolerance=epsilon_tolerance,
            **kwargs,
        )
    from ..calibration import calibrate_noise

    q = check_probability("sample_rate", sample_rate)
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps and epochs")
    if steps is None:
        steps = int(check_real("epochs", epochs, low=0.0) / q)
    steps = check_count("steps", steps)
    cal = calibrate_noise(target_epsilon=target_epsilon, delta=target_delta, sampling_rate=q, steps=steps)
    # The engine will report TightDPAccountant's epsilon (default accountant and accuracy): that number is checked
    return _as_reported(
        cal.noise_multiplier,
        target_epsilon,
        lambda s: _epsilon_of_history([(s, q, steps)], target_delta, DEFAULT_ACCOUNTANT, None),
    )


def shuffle_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    num_batches: int,
    epochs: int,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> float:
    """The smallest noise multiplier (to 0.1 %) for ``epochs`` epochs of ``num_batches`` shuffled (or
    fixed-order) batches whose epsilon, as ``TightDPAccountant.get_epsilon`` reports it for such a loader
    (``tightdp.schemes.shuffle_epsilon``, no amplification), is at most ``target_epsilon``."""
    from ..calibration import calibrate_noise

    t = check_count("num_batches", num_batches)
    e = check_count("epochs", epochs)
    cal = calibrate_noise(
        target_epsilon=target_epsilon,
        delta=target_delta,
        sampling_rate=1.0 / t,
        steps=t * e,
        sampling="shuffle",
        eps_error=eps_error,
        rel_error=rel_error,
    )
    return _as_reported(
        cal.noise_multiplier,
        target_epsilon,
        lambda s: _fixed_batches_epsilon([(s, 1.0 / t, t * e)], target_delta, "shuffle", {}, eps_error, rel_error),
    )


def _as_reported(sigma: float, target_epsilon: float, reported) -> float:
    """``sigma``, raised in 0.1 % steps until the epsilon the engine will report (``reported(sigma).upper``), not
    only the calibration's own certificate, is within the target (a step settles rare ties between accuracies);
    ``CalibrationError`` if twenty steps do not (never a noise whose reported epsilon misses the target)."""
    from ..calibration import CalibrationError

    for _ in range(20):
        if reported(sigma).upper <= target_epsilon:
            return sigma
        sigma *= 1.001
    raise CalibrationError(f"the calibrated noise {sigma:.6g} still reports an epsilon above {target_epsilon:g}")


def install_calibration() -> None:
    """Opt in: make ``PrivacyEngine.make_private_with_epsilon`` use ``get_noise_multiplier`` above.

    Opacus looks the function up in ``opacus.privacy_engine`` at call time;
    this replaces that one name with the tightdp dispatcher, which handles
    ``accountant="tightdp"`` by a certified, tight calibration and passes
    every other accountant to Opacus' original function. Idempotent. Without
    it, ``make_private_with_epsilon`` still works with ``"tightdp"`` (Opacus'
    own bisection on this accountant's certified epsilon), only less tightly.
    """
    import opacus.privacy_engine as pe

    pe.get_noise_multiplier = get_noise_multiplier


def _watch_data_loaders() -> None:
    """Wrap ``PrivacyEngine._prepare_data_loader`` so that a ``TightDPAccountant`` sees the loader training uses
    (idempotent; engines with other accountants are unaffected)."""
    import opacus.privacy_engine as pe

    original = getattr(pe.PrivacyEngine, "_prepare_data_loader", None)
    if original is None or getattr(original, "_tightdp_watch", False):
        return

    def _prepare_data_loader(self, data_loader, *args, **kwargs):
        tight = isinstance(getattr(self, "accountant", None), TightDPAccountant)
        if tight:  # before Opacus replaces the sampler: refuse what no analysis describes
            check_data_loader(data_loader, poisson_sampling=bool(kwargs.get("poisson_sampling", True)))
        out = original(self, data_loader, *args, **kwargs)
        if tight:
            self.accountant.observe_data_loader(out)
        return out

    _prepare_data_loader._tightdp_watch = True  # type: ignore[attr-defined]
    pe.PrivacyEngine._prepare_data_loader = _prepare_data_loader


def _calibrate_for_the_loader() -> None:
    """Wrap ``PrivacyEngine.make_private_with_epsilon``: with a ``TightDPAccountant`` and
    ``poisson_sampling=False`` the noise is calibrated for the loader's sampling (module docstring);
    other engines and Poisson sampling are unaffected (idempotent)."""
    import opacus.privacy_engine as pe

    original = getattr(pe.PrivacyEngine, "make_private_with_epsilon", None)
    if original is None or getattr(original, "_tightdp_watch", False):
        return

    def make_private_with_epsilon(self, *args, **kwargs):
        if (
            args
            or not isinstance(getattr(self, "accountant", None), TightDPAccountant)
            or kwargs.get("data_loader") is None
        ):
            return original(self, *args, **kwargs)
        loader = kwargs["data_loader"]
        poisson = bool(kwargs.get("poisson_sampling", True))
        sampling = check_data_loader(loader, poisson_sampling=poisson)  # refused before any calibration
        if poisson or _accounts_history(sampling):  # Opacus' Poisson loader: its calibration describes it
            return original(self, *args, **kwargs)
        acc = self.accountant
        sigma = shuffle_noise_multiplier(
            target_epsilon=kwargs["target_epsilon"],
            target_delta=kwargs["target_delta"],
            num_batches=len(loader),
            epochs=kwargs["epochs"],
            eps_error=acc.eps_error,
            rel_error=acc.rel_error,
        )
        saved = pe.get_noise_multiplier
        pe.get_noise_multiplier = lambda **_: sigma  # what Opacus' method calls; restored below
        try:
            return original(self, *args, **kwargs)
        finally:
            pe.get_noise_multiplier = saved

    make_private_with_epsilon._tightdp_watch = True  # type: ignore[attr-defined]
    pe.PrivacyEngine.make_private_with_epsilon = make_private_with_epsilon


def _count_skipped_steps() -> None:
    """Wrap ``DPOptimizer.signal_skip_step`` to count skipped steps (accumulated physical batches) on the optimizer,
    except those ``BatchMemoryManager``'s ``BatchSplittingSampler`` signals while splitting one sampled batch
    (idempotent)."""
    from opacus.optimizers.optimizer import DPOptimizer
    from opacus.utils.batch_memory_manager import BatchSplittingSampler

    signal = DPOptimizer.signal_skip_step
    if not getattr(signal, "_tightdp_watch", False):

        def signal_skip_step(self, do_skip=True):
            if do_skip and not getattr(self, "_tightdp_splitting", False):
                self._tightdp_skips = getattr(self, "_tightdp_skips", 0) + 1
            return signal(self, do_skip)

        signal_skip_step._tightdp_watch = True  # type: ignore[attr-defined]
        DPOptimizer.signal_skip_step = signal_skip_step
    split = BatchSplittingSampler.__iter__
    if not getattr(split, "_tightdp_watch", False):

        def __iter__(self):
            batches = split(self)
            while True:
                self.optimizer._tightdp_splitting = True
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                finally:
                    self.optimizer._tightdp_splitting = False
                yield batch

        __iter__._tightdp_watch = True  # type: ignore[attr-defined]
        BatchSplittingSampler.__iter__ = __iter__


def register() -> None:
    """Register ``TightDPAccountant`` with Opacus under ``"tightdp"``, let it see the training loader
    (``_watch_data_loaders``) and calibrate for it (``_calibrate_for_the_loader``); done on import; idempotent."""
    register_accountant(MECHANISM, TightDPAccountant, force=True)
    _watch_data_loaders()
    _calibrate_for_the_loader()
    _count_skipped_steps()


register()
