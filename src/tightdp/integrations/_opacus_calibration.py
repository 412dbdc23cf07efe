"""Noise calibration for Opacus: ``get_noise_multiplier`` (Poisson, a drop-in for Opacus' own),
``shuffle_noise_multiplier`` (shuffled / fixed-order batches) and ``install_calibration``.

Part of ``tightdp.integrations.opacus``; every noise returned is checked against the epsilon that
``TightDPAccountant`` will report for it.
"""

from __future__ import annotations

from .._validation import check_count, check_probability, check_real
from ..accountants import DEFAULT_ACCOUNTANT
from ._opacus_accountant import MECHANISM
from ._opacus_history import _epsilon_of_history, _fixed_batches_epsilon

__all__ = ["get_noise_multiplier", "install_calibration", "shuffle_noise_multiplier"]


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
