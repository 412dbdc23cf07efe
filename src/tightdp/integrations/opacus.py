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
* anything else (a weighted or custom sampler): ``get_epsilon`` refuses with a ``ValueError`` rather
  than report Poisson's figure for sampling it does not describe.

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
from typing import Any, Mapping, Optional

from ..accountants import DEFAULT_ACCOUNTANT
from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive, check_probability, check_real
from ..errors import TightDPError

try:
    from opacus.accountants import IAccountant
    from opacus.accountants import register_accountant
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tightdp.integrations.opacus needs Opacus: pip install torch==2.13.0 && "
                      "pip install 'tightdp[opacus]'") from exc

__all__ = ["TightDPAccountant", "MECHANISM", "get_noise_multiplier", "shuffle_noise_multiplier", "install_calibration",
           "register", "classify_data_loader", "loader_scheme", "check_data_loader", "UnsupportedSamplerError",
           "UNKNOWN"]

#: The name under which the accountant is registered with Opacus.
MECHANISM = "tightdp"

#: ``classify_data_loader``'s answer for a loader no scheme of ``tightdp.sampling`` describes
UNKNOWN = "unknown"


class UnsupportedSamplerError(TightDPError, ValueError):
    """A training loader (or a way of accumulating batches) whose sampling no certified analysis describes."""


def _sampler_reason(data_loader) -> str:
    """Why the sampling of an ``UNKNOWN`` loader cannot be accounted (for ``UnsupportedSamplerError``)."""
    from torch.utils.data import BatchSampler, RandomSampler, WeightedRandomSampler

    bs = getattr(data_loader, "batch_sampler", None)
    if bs is None:
        return (f"{type(data_loader).__name__} has no batch sampler (an iterable dataset?): which examples a batch "
                "can hold is unknown")
    if not isinstance(bs, BatchSampler):
        return (f"custom batch sampler {type(bs).__name__}: which examples each batch can contain, and with what "
                "probability, is not known to tightdp")
    sampler = bs.sampler
    name = type(sampler).__name__
    if isinstance(sampler, WeightedRandomSampler):
        return (f"{name} draws examples with non-uniform per-example probabilities (weights), "
                f"{'with' if sampler.replacement else 'without'} replacement, num_samples={sampler.num_samples}: "
                "no single sampling rate describes it, and Opacus' Poisson replacement ignores the weights and "
                "infers the rate 1 / len(data_loader) from num_samples / batch_size, not from the dataset size "
                "(opacus #813)")
    if type(sampler) is RandomSampler:
        return (f"{name}(replacement={sampler.replacement}, num_samples={sampler._num_samples}) does not visit each "
                "example once per epoch, and the rate 1 / len(data_loader) Opacus infers is not batch_size / "
                "dataset size")
    return (f"custom sampler {name}: its per-example inclusion probabilities are unknown, so the rate "
            "1 / len(data_loader) Opacus infers need not be any example's")


def check_data_loader(data_loader, *, poisson_sampling: bool) -> str:
    """The loader's sampling (``classify_data_loader``), or ``UnsupportedSamplerError`` naming its sampler and why
    no certified epsilon exists for it. With ``poisson_sampling=True`` Opacus replaces the loader by a uniform
    Poisson one at rate ``1 / len(data_loader)``; that is the standard DP-SGD substitute only for a loader that
    visits every example once per epoch (shuffled, sequential, or a ``DistributedSampler``), so any other sampler
    (``WeightedRandomSampler``, a custom (batch) sampler, sampling with replacement) is refused in both modes."""
    from torch.utils.data.distributed import DistributedSampler

    sampling, facts = classify_data_loader(data_loader)
    if sampling != UNKNOWN:
        return sampling
    bs = getattr(data_loader, "batch_sampler", None)
    if poisson_sampling and type(getattr(bs, "sampler", None)) is DistributedSampler:
        return "poisson"  # Opacus' distributed Poisson sampler replaces it, over the whole dataset
    raise UnsupportedSamplerError(f"data_loader: tightdp refuses to account this training loader: "
                                  f"{_sampler_reason(data_loader)}; use a shuffled or sequential DataLoader "
                                  "(make_private replaces it by Poisson sampling) or a uniform sampler")


def loader_scheme(label: str):
    """The ``tightdp.sampling`` class a loader classification names (``None`` for ``UNKNOWN``); a data loader
    is Poisson-sampled, shuffled or in a fixed order, so other schemes are refused (``ValueError``)."""
    from ..sampling import FixedOrder, Poisson, Shuffle, scheme_class

    if label == UNKNOWN:
        return None
    cls = scheme_class(label, argument="tightdp.sampling")
    if cls not in (Poisson, Shuffle, FixedOrder):
        raise ValueError(f"tightdp.sampling: a data loader is Poisson-sampled, shuffled or in a fixed order, got "
                         f"{label!r}")
    return cls


def _accounts_history(sampling: str) -> bool:
    """Whether the history of ``(noise, rate, steps)`` segments describes the loader (Poisson sampling)."""
    cls = loader_scheme(sampling)
    return cls is not None and cls.any_accountant


def classify_data_loader(data_loader) -> tuple[str, dict[str, Any]]:
    """``(sampling, facts)`` of a PyTorch / Opacus data loader: ``"poisson"`` (Opacus' ``DPDataLoader`` or a
    ``(Distributed)UniformWithReplacementSampler``), ``"shuffle"`` (a ``BatchSampler`` over a ``RandomSampler``
    without replacement), ``"fixed-order"`` (over a ``SequentialSampler``) or ``"unknown"``. ``facts`` has
    ``batches`` (``len(loader)``), ``dataset_size``, ``batch_size``, ``drop_last`` and ``sampler`` (a type name).
    The first three are names of ``tightdp.sampling`` schemes (``loader_scheme``)."""
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

    from opacus.data_loader import DPDataLoader
    from opacus.utils.uniform_sampler import DistributedUniformWithReplacementSampler, UniformWithReplacementSampler

    bs = getattr(data_loader, "batch_sampler", None)
    facts: dict[str, Any] = {"sampler": type(bs).__name__ if bs is not None else type(data_loader).__name__}
    try:
        facts["dataset_size"] = len(data_loader.dataset)
        facts["batches"] = len(data_loader)
    except TypeError:  # an iterable dataset: no length
        pass
    if isinstance(data_loader, DPDataLoader) or isinstance(
            bs, (UniformWithReplacementSampler, DistributedUniformWithReplacementSampler)):
        return "poisson", facts
    if isinstance(bs, BatchSampler):
        facts.update(batch_size=bs.batch_size, drop_last=bool(bs.drop_last), sampler=type(bs.sampler).__name__)
        if type(bs.sampler) is RandomSampler and not bs.sampler.replacement and bs.sampler._num_samples is None:
            return "shuffle", facts
        if type(bs.sampler) is SequentialSampler:
            return "fixed-order", facts
    return UNKNOWN, facts


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

    def __init__(self, *, accountant: str = DEFAULT_ACCOUNTANT, eps_error: float | None = None,
                 rel_error: float | None = None) -> None:
        super().__init__()
        self.history: list[tuple[float, float, int]] = []
        self.accountant = accountant
        self.eps_error, self.rel_error = check_accuracy(eps_error, rel_error)
        self._cache: dict[Any, Any] = {}
        #: the sampling the training loader performs (``observe_data_loader``); ``"poisson"`` until a loader
        #: is seen, which is Opacus' contract for ``step(sample_rate=...)``
        self.sampling = "poisson"
        self.loader_facts: dict[str, Any] = {}
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
            warnings.warn(f"tightdp: the training DataLoader is not Poisson-sampled ({sampling}: "
                          f"{facts.get('sampler')}); Opacus' Poisson accounting does not describe it. "
                          + ("TightDPAccountant reports the certified epsilon of shuffled / fixed batches "
                             "(no amplification) instead." if loader_scheme(sampling) is not None else
                             "TightDPAccountant will refuse to report an epsilon for it."), UserWarning,
                          stacklevel=2)
        return sampling

    # ---------------------------------------------------------------- Opacus API
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
            warnings.warn(f"tightdp: {self.sampling} batches: certified epsilon <= {b.upper:.4g} at delta = {delta:g} "
                          f"(interval [{b.lower:.4g}, {b.upper:.4g}]); Poisson accounting would claim "
                          f"{poisson:.4g}, which no theorem supports for this loader.", UserWarning, stacklevel=2)
        return float(b.upper)

    def get_bounds(self, delta: float):
        """The full ``tightdp.Bounds`` (lower, estimate, upper) behind ``get_epsilon``."""
        from ..bounds import Bounds

        delta = check_delta("delta", delta)
        segments = self._segments()
        if not segments:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": "no steps taken"})
        key = (tuple(segments), delta, self.accountant, self.eps_error, self.rel_error, self.sampling)
        if key not in self._cache:
            if loader_scheme(self.sampling) is None:
                raise ValueError(f"data_loader: no epsilon for this training loader: its sampler "
                                 f"({self.loader_facts.get('sampler')}) is neither Opacus' Poisson sampler nor "
                                 "shuffled or fixed-order batches, and Opacus' Poisson accounting does not describe "
                                 "it; use make_private(poisson_sampling=True) or a shuffled DataLoader")
            self._cache.clear()
            if _accounts_history(self.sampling):
                self._cache[key] = _epsilon_of_history(segments, delta, self.accountant, self.eps_error,
                                                       self.rel_error)
            else:
                self._cache[key] = _fixed_batches_epsilon(segments, delta, self.sampling, self.loader_facts,
                                                          self.eps_error, self.rel_error)
        return self._cache[key]

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
        destination["tightdp"] = {"accountant": self.accountant, "eps_error": self.eps_error,
                                  "rel_error": self.rel_error, "sampling": self.sampling,
                                  "loader": dict(self.loader_facts)}
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
        eps_error, rel_error = check_accuracy(opts.get("eps_error", self.eps_error),
                                              opts.get("rel_error", self.rel_error if "eps_error" not in opts else None))
        sampling = opts.get("sampling", "poisson")
        loader_scheme(sampling)  # a ValueError naming tightdp.sampling if no loader samples that way
        super().load_state_dict(state_dict)  # Opacus' checks: keys present, same mechanism name
        self.history = history if history is not None else []
        self.accountant, self.eps_error, self.rel_error = accountant, eps_error, rel_error
        self.sampling, self.loader_facts = sampling, dict(opts.get("loader") or {})
        self._cache.clear()

    def _segments(self) -> list[tuple[float, float, int]]:
        return [_seg(i, h) for i, h in enumerate(self.history)]


def _seg(i: int, h) -> tuple[float, float, int]:
    try:
        sigma, q, n = h
    except (TypeError, ValueError):
        raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {h!r}") from None
    return (check_positive(f"history[{i}] noise_multiplier", sigma),
            check_probability(f"history[{i}] sample_rate", q),
            check_count(f"history[{i}] steps", n))


def _epsilon_of_history(segments, delta: float, accountant: str, eps_error: float | None,
                        rel_error: float | None = None):
    """``dpsgd_epsilon`` for one segment; one composed ledger for a noise schedule."""
    from .. import dpsgd_epsilon

    merged: dict[tuple[float, float], int] = {}
    for sigma, q, n in segments:
        merged[(sigma, q)] = merged.get((sigma, q), 0) + n
    if len(merged) == 1:
        (sigma, q), n = next(iter(merged.items()))
        return dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=n, delta=delta,
                             accountant=accountant, eps_error=eps_error, rel_error=rel_error)
    from ..accountants import create
    from ..dpsgd import dpsgd_mechanism

    acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
    acc.compose([(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), n) for (s, q), n in merged.items()])
    return acc.epsilon(delta)


def _fixed_batches_epsilon(segments, delta: float, sampling: str, facts: Mapping[str, Any],
                           eps_error: float | None, rel_error: float | None):
    """Shuffled or fixed-order batches: the ``TrainingRun`` of the loader's scheme (``loader_scheme``) with the
    epochs counted up for the upper end (more epochs: a larger bound) and down for the lower end; Poisson's
    figure in ``details``."""
    from ..bounds import Bounds
    from ..dpsgd import dpsgd_epsilon
    from ..runs import TrainingRun
    from ..sampling import FixedOrder

    if len({(s, q) for s, q, _ in segments}) != 1:
        raise ValueError("history: shuffled / fixed-order batches are accounted for one noise multiplier and one "
                         "loader; this history has several segments")
    sigma, q = segments[0][0], segments[0][1]
    steps = sum(n for _, _, n in segments)
    t = max(1, round(1.0 / q))
    scheme = loader_scheme(sampling)(steps_per_epoch=t)

    def epochs(e: int):
        return TrainingRun(noise_multiplier=sigma, sampling=scheme, epochs=e).epsilon(
            delta=delta, eps_error=eps_error, rel_error=rel_error)

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
    poisson = dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta, eps_error=eps_error,
                            rel_error=rel_error)
    details = {**dict(up.details), "loader": sampling, "epochs_counted": math.ceil(steps / t),
               "poisson_epsilon": poisson.upper,
               "note": "; ".join(["the DataLoader is not Poisson-sampled: epsilon of shuffled / fixed batches "
                                  "without amplification (no tighter certified bound is known)"] + notes)}
    return Bounds(min(lower, up.upper), up.upper, up.upper, "epsilon", "bound", details)


def get_noise_multiplier(*, target_epsilon: float, target_delta: float, sample_rate: float,
                         epochs: Optional[int] = None, steps: Optional[int] = None,
                         accountant: str = MECHANISM, epsilon_tolerance: float = 0.01, **kwargs) -> float:
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

        return opacus_gnm(target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=sample_rate,
                          epochs=epochs, steps=steps, accountant=accountant,
                          epsilon_tolerance=epsilon_tolerance, **kwargs)
    from ..calibration import calibrate_noise

    q = check_probability("sample_rate", sample_rate)
    if (steps is None) == (epochs is None):
        raise ValueError("give exactly one of steps and epochs")
    if steps is None:
        steps = int(check_real("epochs", epochs, low=0.0) / q)
    steps = check_count("steps", steps)
    cal = calibrate_noise(target_epsilon=target_epsilon, delta=target_delta, sampling_rate=q, steps=steps)
    # The engine will report TightDPAccountant's epsilon (default accountant and accuracy): that number is checked
    return _as_reported(cal.noise_multiplier, target_epsilon,
                        lambda s: _epsilon_of_history([(s, q, steps)], target_delta, DEFAULT_ACCOUNTANT, None))


def shuffle_noise_multiplier(*, target_epsilon: float, target_delta: float, num_batches: int, epochs: int,
                             eps_error: float | None = None, rel_error: float | None = None) -> float:
    """The smallest noise multiplier (to 0.1 %) for ``epochs`` epochs of ``num_batches`` shuffled (or
    fixed-order) batches whose epsilon, as ``TightDPAccountant.get_epsilon`` reports it for such a loader
    (``tightdp.schemes.shuffle_epsilon``, no amplification), is at most ``target_epsilon``."""
    from ..calibration import calibrate_noise

    t = check_count("num_batches", num_batches)
    e = check_count("epochs", epochs)
    cal = calibrate_noise(target_epsilon=target_epsilon, delta=target_delta, sampling_rate=1.0 / t, steps=t * e,
                          sampling="shuffle", eps_error=eps_error, rel_error=rel_error)
    return _as_reported(cal.noise_multiplier, target_epsilon,
                        lambda s: _fixed_batches_epsilon([(s, 1.0 / t, t * e)], target_delta, "shuffle", {}, eps_error,
                                                         rel_error))


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
        if args or not isinstance(getattr(self, "accountant", None), TightDPAccountant) or \
                kwargs.get("data_loader") is None:
            return original(self, *args, **kwargs)
        loader = kwargs["data_loader"]
        poisson = bool(kwargs.get("poisson_sampling", True))
        sampling = check_data_loader(loader, poisson_sampling=poisson)  # refused before any calibration
        if poisson or _accounts_history(sampling):  # Opacus' Poisson loader: its calibration describes it
            return original(self, *args, **kwargs)
        acc = self.accountant
        sigma = shuffle_noise_multiplier(target_epsilon=kwargs["target_epsilon"], target_delta=kwargs["target_delta"],
                                         num_batches=len(loader), epochs=kwargs["epochs"], eps_error=acc.eps_error,
                                         rel_error=acc.rel_error)
        saved = pe.get_noise_multiplier
        pe.get_noise_multiplier = lambda **_: sigma  # what Opacus' method calls; restored below
        try:
            return original(self, *args, **kwargs)
        finally:
            pe.get_noise_multiplier = saved

    make_private_with_epsilon._tightdp_watch = True  # type: ignore[attr-defined]
    pe.PrivacyEngine.make_private_with_epsilon = make_private_with_epsilon


def register() -> None:
    """Register ``TightDPAccountant`` with Opacus under ``"tightdp"``, let it see the training loader
    (``_watch_data_loaders``) and calibrate for it (``_calibrate_for_the_loader``); done on import; idempotent."""
    register_accountant(MECHANISM, TightDPAccountant, force=True)
    _watch_data_loaders()
    _calibrate_for_the_loader()


register()
