"""``TightDPAccountant``: Opacus' ``IAccountant`` backed by tightdp's certified accountants.

Part of ``tightdp.integrations.opacus`` (which registers it with Opacus and documents what it accounts).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_delta, check_positive, check_probability
from ..accountants import DEFAULT_ACCOUNTANT
from ..bounds import Bounds
from ._opacus_history import _accounts_history, _epsilon_of_history, _fixed_batches_epsilon, _seg
from ._opacus_loaders import UnsupportedSamplerError, classify_data_loader, loader_scheme

try:
    from opacus.accountants import IAccountant
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "tightdp.integrations.opacus needs Opacus: pip install torch==2.13.0 && pip install 'tightdp[opacus]'"
    ) from exc

__all__ = ["MECHANISM", "TightDPAccountant"]

#: The name under which the accountant is registered with Opacus.
MECHANISM = "tightdp"


class TightDPAccountant(IAccountant):  # type: ignore[misc]  # Opacus has no type stubs: IAccountant is Any
    """Opacus accountant backed by tightdp's certified default accountant (connect-dots).

    Parameters
    ----------
    accountant : str, default "connect-dots"
        tightdp accountant name for the epsilon (certified).
    eps_error : float, optional
        An absolute accuracy: an interval of width at most ``2 eps_error`` (``tightdp._accuracy``).
    rel_error : float, optional
        A relative accuracy; by default an interval of width at most ``2 max(1e-3 epsilon, 5e-5)``.
        The reported epsilon is the interval's upper end.

    Raises
    ------
    ValueError
        For an accuracy that is not positive and finite.

    References
    ----------
    Gopi et al. 2021, Thm. 5.5 (the certified upper end reported); Koskela et al. 2020, Sec. 5.5 (a noise
    schedule composed in one PLD).
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

    def observe_data_loader(self, data_loader: Any) -> str:
        """Record which sampling ``data_loader`` performs (``classify_data_loader``).

        Called by ``PrivacyEngine`` through the wrapper ``tightdp.integrations.opacus`` installs; call it yourself
        for a loader that Opacus did not prepare. A loader that is not Poisson-sampled makes ``get_epsilon``
        account what it does (with a ``UserWarning``).

        Parameters
        ----------
        data_loader : torch.utils.data.DataLoader
            The loader training uses.

        Returns
        -------
        str
            ``"poisson"``, ``"shuffle"``, ``"fixed-order"`` or ``"unknown"``.

        Raises
        ------
        ImportError
            Without PyTorch or Opacus.
        """
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
    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """The hook Opacus runs after each noise addition (``DPOptimizer.pre_step``).

        One logical step per call, at the rate of the logical batch, ``sample_rate`` times the physical batches it
        accumulated (backward passes, ``accumulated_iterations``, times the skipped steps, ``signal_skip_step``,
        that were not a ``BatchMemoryManager`` split of one sampled batch). Skipped steps over a Poisson loader
        accumulate independent Poisson batches (an example can enter one noise addition several times), which no
        Poisson-subsampled Gaussian describes: ``get_epsilon`` then refuses (``UnsupportedSamplerError``).

        Parameters
        ----------
        sample_rate : float
            The rate of one physical batch, in (0, 1].

        Returns
        -------
        callable
            ``hook_fn(optimizer)``, recording one step.

        Raises
        ------
        ValueError
            If ``sample_rate`` is not in (0, 1].
        """
        base = check_probability("sample_rate", sample_rate)

        def hook_fn(optim: Any) -> None:
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
        """Record one optimisation step (consecutive identical steps share a history segment).

        Parameters
        ----------
        noise_multiplier : float
            The step's noise multiplier, > 0.
        sample_rate : float
            The step's Poisson rate, in (0, 1].

        Raises
        ------
        ValueError
            If ``noise_multiplier`` is not positive or ``sample_rate`` not in (0, 1].
        """
        sigma = check_positive("noise_multiplier", noise_multiplier)
        q = check_probability("sample_rate", sample_rate)
        if self.history and self.history[-1][0] == sigma and self.history[-1][1] == q:
            s, r, n = self.history[-1]
            self.history[-1] = (s, r, n + 1)
        else:
            self.history.append((sigma, q, 1))

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Certified upper bound on epsilon spent so far at ``delta`` (Opacus' contract: a float).

        For the sampling the loader performs (``tightdp.integrations.opacus``'s module docstring); a
        ``UserWarning`` states what Poisson accounting would have claimed for a loader that is not Poisson-sampled.

        Parameters
        ----------
        delta : float
            The delta, in (0, 1).
        *args, **kwargs
            Accepted for Opacus' interface (e.g. ``poisson``) and ignored.

        Returns
        -------
        float
            The upper end of ``get_bounds(delta)`` (0 before any step).

        Raises
        ------
        ValueError
            For a bad ``delta``, or a loader no analysis describes.
        UnsupportedSamplerError
            For a run tightdp refuses to account (e.g. ``signal_skip_step`` over Poisson batches, adaptive
            clipping).

        References
        ----------
        Gopi et al. 2021, Thm. 5.5; Koskela et al. 2020.
        """
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

    def get_bounds(self, delta: float) -> Bounds:
        """The full ``tightdp.Bounds`` (lower, estimate, upper) behind ``get_epsilon``.

        Parameters
        ----------
        delta : float
            The delta, in (0, 1).

        Returns
        -------
        Bounds
            The certified epsilon interval of the steps taken; ``details["mechanism"]`` states the mechanism.

        Raises
        ------
        ValueError
            For a bad ``delta``, or a loader no analysis describes.
        UnsupportedSamplerError
            For a run tightdp refuses to account.

        References
        ----------
        Gopi et al. 2021, Thm. 5.5; Koskela et al. 2020.
        """
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
        b: Bounds = self._cache[key]
        return replace(b, details={**dict(b.details), "mechanism": self.mechanism_statement()})

    def mechanism_statement(self) -> str:
        """The mechanism the reported interval is for.

        Returns
        -------
        str
            A sentence: the mechanism, rate, accumulation and divisor of the run
            (``tightdp.integrations.opacus``'s module docstring, "Which mechanism ran").
        """
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
        """The name the accountant is registered under with Opacus.

        Returns
        -------
        str
            ``MECHANISM`` (``"tightdp"``).
        """
        return MECHANISM

    def state_dict(self, destination: dict[str, Any] | None = None) -> dict[str, Any]:
        """The accountant's state: Opacus' (``history``, ``mechanism``) and tightdp's settings and observations.

        Parameters
        ----------
        destination : dict, optional
            The dict to fill (a new ``OrderedDict`` by default).

        Returns
        -------
        dict
            ``destination`` with Opacus' keys and ``"tightdp"``: accountant, accuracy, sampling, loader facts,
            refusal and optimizer facts.

        Raises
        ------
        TypeError
            If ``destination`` is not a mutable mapping.
        """
        if destination is None:
            destination = OrderedDict()
        out: dict[str, Any] = super().state_dict(destination)
        out["tightdp"] = {
            "accountant": self.accountant,
            "eps_error": self.eps_error,
            "rel_error": self.rel_error,
            "sampling": self.sampling,
            "loader": dict(self.loader_facts),
            "refusal": self.refusal,
            "optimizer": dict(self.optimizer_facts),
        }
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore ``state_dict()`` output; everything is validated before anything changes.

        Parameters
        ----------
        state_dict : mapping
            A ``state_dict()`` output (Opacus' keys and, optionally, ``"tightdp"``).

        Raises
        ------
        ValueError
            For a history entry that is not ``(noise_multiplier, sample_rate, steps)`` with valid values, an
            accountant that is not a name, a bad accuracy or an unknown sampling; Opacus' own errors for missing
            keys or another mechanism.
        """
        history = None
        opts: dict[str, Any] = {}
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
        """The history, each segment checked."""
        return [_seg(i, h) for i, h in enumerate(self.history)]
