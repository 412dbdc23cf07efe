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

Requires the ``opacus`` extra (``pip install torch==2.13.0`` first, then
``pip install 'tightdp[opacus]'``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Optional

from ..accountants import DEFAULT_ACCOUNTANT
from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive, check_probability, check_real

try:
    from opacus.accountants import IAccountant
    from opacus.accountants import register_accountant
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tightdp.integrations.opacus needs Opacus: pip install torch==2.13.0 && "
                      "pip install 'tightdp[opacus]'") from exc

__all__ = ["TightDPAccountant", "MECHANISM", "get_noise_multiplier", "install_calibration", "register"]

#: The name under which the accountant is registered with Opacus.
MECHANISM = "tightdp"


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
        """Certified upper bound on epsilon spent so far at ``delta`` (Opacus' contract: a float)."""
        b = self.get_bounds(delta)
        return float(b.upper)

    def get_bounds(self, delta: float):
        """The full ``tightdp.Bounds`` (lower, estimate, upper) behind ``get_epsilon``."""
        from ..bounds import Bounds

        delta = check_delta("delta", delta)
        segments = self._segments()
        if not segments:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": "no steps taken"})
        key = (tuple(segments), delta, self.accountant, self.eps_error, self.rel_error)
        if key not in self._cache:
            self._cache.clear()
            self._cache[key] = _epsilon_of_history(segments, delta, self.accountant, self.eps_error,
                                                         self.rel_error)
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
                                  "rel_error": self.rel_error}
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
        super().load_state_dict(state_dict)  # Opacus' checks: keys present, same mechanism name
        self.history = history if history is not None else []
        self.accountant, self.eps_error, self.rel_error = accountant, eps_error, rel_error
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
    # The engine will report TightDPAccountant's epsilon (default accountant and accuracy); make sure that number, not
    # only the calibration's own certificate, is within the target (a 0.1 % step up settles rare ties).
    sigma = cal.noise_multiplier
    for _ in range(20):
        reported = _epsilon_of_history([(sigma, q, steps)], target_delta, DEFAULT_ACCOUNTANT, None)
        if reported.upper <= target_epsilon:
            return sigma
        sigma *= 1.001
    return sigma  # pragma: no cover - the calibration's certificate already holds at the first sigma


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


def register() -> None:
    """Register ``TightDPAccountant`` with Opacus under ``"tightdp"`` (done on import; idempotent)."""
    register_accountant(MECHANISM, TightDPAccountant, force=True)


register()
