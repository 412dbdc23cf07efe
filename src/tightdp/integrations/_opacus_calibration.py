"""Noise calibration for Opacus: ``get_noise_multiplier`` (Poisson, a drop-in for Opacus' own),
``shuffle_noise_multiplier`` (shuffled / fixed-order batches) and ``install_calibration``.

Part of ``tightdp.integrations.opacus``; every noise returned is checked against the epsilon that
``TightDPAccountant`` will report for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._validation import check_count, check_probability, check_real
from ..accountants import DEFAULT_ACCOUNTANT
from ..bounds import Bounds
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
    **kwargs: Any,
) -> float:
    """Drop-in for ``opacus.accountants.utils.get_noise_multiplier``, calibrated by tightdp.

    Same arguments as Opacus' function (``steps = int(epochs / sample_rate)`` as in Opacus). The result is the
    smallest noise multiplier (to 0.1 %) whose certified epsilon, as ``TightDPAccountant`` will report it, is at
    most ``target_epsilon`` (``tightdp.calibration.calibrate_noise``). For any other ``accountant`` name the call
    goes to Opacus' own function.

    Parameters
    ----------
    target_epsilon : float
        The epsilon to meet, > 0.
    target_delta : float
        The delta, in (0, 1).
    sample_rate : float
        The Poisson rate, in (0, 1].
    epochs : int, optional
        Epochs (exactly one of ``epochs`` and ``steps``).
    steps : int, optional
        Steps, >= 1.
    accountant : str, default "tightdp"
        ``"tightdp"``, or an Opacus accountant name (the call then goes to Opacus).
    epsilon_tolerance : float, default 0.01
        Accepted for compatibility and ignored: the search is on the noise, not on epsilon.
    **kwargs
        Passed to Opacus' function for another accountant.

    Returns
    -------
    float
        The noise multiplier.

    Raises
    ------
    ValueError
        Not exactly one of ``steps`` and ``epochs``, or a bad rate, count, epsilon or delta.
    CalibrationError
        If no noise meets the target as the accountant reports it.

    References
    ----------
    Gopi et al. 2021, Thm. 5.5 (the certified epsilon the search meets).
    """
    if accountant != MECHANISM:
        from opacus.accountants.utils import get_noise_multiplier as opacus_gnm

        return float(
            opacus_gnm(
                target_epsilon=target_epsilon,
                target_delta=target_delta,
                sample_rate=sample_rate,
                epochs=epochs,
                steps=steps,
                accountant=accountant,
                epsilon_tolerance=epsilon_tolerance,
                **kwargs,
            )
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
    steps_per_epoch: int,
    epochs: int,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> float:
    """The smallest noise multiplier (to 0.1 %) for ``epochs`` epochs of ``steps_per_epoch`` shuffled (or
    fixed-order) batches whose epsilon, as ``TightDPAccountant.get_epsilon`` reports it, is at most
    ``target_epsilon``.

    Parameters
    ----------
    target_epsilon : float
        The epsilon to meet, > 0.
    target_delta : float
        The delta, in (0, 1).
    steps_per_epoch : int
        Batches per epoch (``len(data_loader)``), >= 1.
    epochs : int
        Epochs, >= 1.
    eps_error : float, optional
        Absolute accuracy of the epsilon (as ``TightDPAccountant``).
    rel_error : float, optional
        Relative accuracy of the epsilon.

    Returns
    -------
    float
        The noise multiplier.

    Raises
    ------
    ValueError
        A bad count, epsilon, delta or accuracy.
    CalibrationError
        If no noise meets the target as the accountant reports it.

    References
    ----------
    ``tightdp.schemes.shuffle_epsilon`` (shuffled batches without amplification, ``sqrt(E)/sigma``-GDP).
    """
    from ..calibration import calibrate_noise

    t = check_count("steps_per_epoch", steps_per_epoch)
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


def _as_reported(sigma: float, target_epsilon: float, reported: Callable[[float], Bounds]) -> float:
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

    Raises
    ------
    ImportError
        Without Opacus.
    """
    import opacus.privacy_engine as pe

    pe.get_noise_multiplier = get_noise_multiplier
