"""The wrappers that let Opacus' ``PrivacyEngine`` show a ``TightDPAccountant`` the training loader, calibrate for
it, and count the physical batches a noise addition accumulates.

Part of ``tightdp.integrations.opacus``, which installs them on import (``register``); each is idempotent and
leaves engines with other accountants unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._opacus_accountant import TightDPAccountant
from ._opacus_calibration import shuffle_noise_multiplier
from ._opacus_history import _accounts_history
from ._opacus_loaders import check_data_loader


def _watch_data_loaders() -> None:
    """Wrap ``PrivacyEngine._prepare_data_loader`` so that a ``TightDPAccountant`` sees the loader training uses
    (idempotent; engines with other accountants are unaffected)."""
    import opacus.privacy_engine as pe

    original = getattr(pe.PrivacyEngine, "_prepare_data_loader", None)
    if original is None or getattr(original, "_tightdp_watch", False):
        return

    def _prepare_data_loader(self: Any, data_loader: Any, *args: Any, **kwargs: Any) -> Any:
        tight = isinstance(getattr(self, "accountant", None), TightDPAccountant)
        if tight:  # before Opacus replaces the sampler: refuse what no analysis describes
            check_data_loader(data_loader, poisson_sampling=bool(kwargs.get("poisson_sampling", True)))
        out = original(self, data_loader, *args, **kwargs)
        if tight:
            self.accountant.observe_data_loader(out)
        return out

    _prepare_data_loader._tightdp_watch = True  # type: ignore[attr-defined]  # a marker on the wrapper (idempotence)
    pe.PrivacyEngine._prepare_data_loader = _prepare_data_loader


def _calibrate_for_the_loader() -> None:
    """Wrap ``PrivacyEngine.make_private_with_epsilon``: with a ``TightDPAccountant`` and
    ``poisson_sampling=False`` the noise is calibrated for the loader's sampling (module docstring);
    other engines and Poisson sampling are unaffected (idempotent)."""
    import opacus.privacy_engine as pe

    original = getattr(pe.PrivacyEngine, "make_private_with_epsilon", None)
    if original is None or getattr(original, "_tightdp_watch", False):
        return

    def make_private_with_epsilon(self: Any, *args: Any, **kwargs: Any) -> Any:
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
            steps_per_epoch=len(loader),
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

    make_private_with_epsilon._tightdp_watch = True  # type: ignore[attr-defined]  # a marker on the wrapper (idempotence)
    pe.PrivacyEngine.make_private_with_epsilon = make_private_with_epsilon


def _count_skipped_steps() -> None:
    """Wrap ``DPOptimizer.signal_skip_step`` to count skipped steps (accumulated physical batches) on the optimizer,
    except those ``BatchMemoryManager``'s ``BatchSplittingSampler`` signals while splitting one sampled batch
    (idempotent)."""
    from opacus.optimizers.optimizer import DPOptimizer
    from opacus.utils.batch_memory_manager import BatchSplittingSampler

    signal = DPOptimizer.signal_skip_step
    if not getattr(signal, "_tightdp_watch", False):

        def signal_skip_step(self: Any, do_skip: bool = True) -> Any:
            if do_skip and not getattr(self, "_tightdp_splitting", False):
                self._tightdp_skips = getattr(self, "_tightdp_skips", 0) + 1
            return signal(self, do_skip)

        signal_skip_step._tightdp_watch = True  # type: ignore[attr-defined]  # a marker on the wrapper (idempotence)
        DPOptimizer.signal_skip_step = signal_skip_step
    split = BatchSplittingSampler.__iter__
    if not getattr(split, "_tightdp_watch", False):

        def __iter__(self: Any) -> Iterator[Any]:
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

        __iter__._tightdp_watch = True  # type: ignore[attr-defined]  # a marker on the wrapper (idempotence)
        BatchSplittingSampler.__iter__ = __iter__
