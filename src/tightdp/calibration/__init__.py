"""Calibration: the noise, number of steps or sampling rate that meets a privacy target.

Three questions, one answer type (``Calibration``):

* ``calibrate_noise``: the smallest noise multiplier sigma with
  ``epsilon(sigma) <= target`` for a given sampling rate and number of steps
  (or epochs, data set size and batch size);
* ``calibrate_steps``: the largest number of steps within the budget;
* ``calibrate_sampling_rate``: the largest sampling rate within the budget.

Soundness: feasibility is always judged on the **certified upper bound** of
epsilon (``Bounds.upper`` of ``tightdp.dpsgd_epsilon``: by default the
connect-the-dots dominating pair, or the PRV accountant's Thm 5.5 of Gopi et
al. 2021, with ``accountant="prv"``), and the value returned is one at which
that bound was evaluated and found ``<= target``. A point whose bound cannot be
certified (``PrecisionError``, an infinite or missing upper bound) counts as
infeasible, so the search errs towards more noise / fewer steps / a smaller rate.

Tightness: the search brackets the boundary (exponential expansion), then
narrows the bracket by safeguarded interpolation on ``log epsilon`` against the
log of the searched variable, falling back to bisection on the log scale (the
bound need not be exactly monotone: discretisation moves with the parameters).
Finally it shows tightness: a certified *lower* bound above the target at
``0.99 sigma`` / ``1.01 q`` / ``steps + 1`` (else at a 2 % or 5 % move); if
such a neighbour is itself feasible (a non-monotone wobble of the bound), the
search continues from there. ``Calibration.details["tightness"]`` records the
neighbour, its interval and whether it was proved to exceed the target.

Accuracy: every answer is certified at one accuracy (``eps_error`` / ``rel_error``,
``tightdp._accuracy``; by default the default of ``dpsgd_epsilon`` and of ``tightdp
epsilon``: relative 1e-3), recorded in ``Calibration.eps_error`` and ``rel_error``:
re-evaluating the returned run with ``dpsgd_epsilon`` at that accuracy (with the
default one: the default call) gives an upper bound at or below the target.
Accountants without a relative mode are certified at the absolute accuracy the
relative one asks for at the target, ``max(5e-5, 1e-3 target)``. The returned noise is rounded up (the
sampling rate down) to ``DIGITS`` significant digits before that evaluation, so
the printed value is the certified one. A coarser pass decides points far from
the boundary; a finer one (``min(target / 300, eps_error / 4)``) is used only to prove
tightness.

One calibrator: ``calibrate(run=TrainingRun(...), parameter=..., target_epsilon=..., delta=...)`` solves for
any numeric field of a run (``PARAMETERS``: the noise, the steps or whole epochs, a scheme's free
``sampling_rate``), as dp_accounting's ``calibrate_dp_mechanism`` does for events; ``calibrate_noise``,
``calibrate_steps`` and ``calibrate_sampling_rate`` build the run from their keywords (``sampling=`` a name
of ``tightdp.sampling`` or a scheme object) and call it. The search evaluates ``TrainingRun.epsilon``, so
the answer is certified for the scheme that runs. Epoch-based schemes (``per_epoch``: random allocation,
shuffling, ...) run ``t = 1/sampling_rate`` steps an epoch (from ``dataset_size`` and ``batch_size``,
``t = ceil(dataset_size / batch_size)``) and the steps search counts whole epochs; their sampling rate is
not a free variable. For a scheme whose certified upper bound is the one without amplification
(``amplifies = False``: shuffling) the calibrated noise is what that bound needs; its certified lower bound
is usually far below the target and the tightness record says so (``calibration_note``).

Cost: targets above ``MAX_TARGET_EPSILON`` are refused at once; a target that no
point of the searched range meets is refused after evaluating the range's end;
once a certified evaluation takes seconds, points the coarse pass cannot decide
count as infeasible (safe) instead of being evaluated again.

The package: ``_shared`` (``Calibration``, the checks and the epsilon functions), ``_solvers`` (one search
per parameter) and the public functions here.
"""

from __future__ import annotations

import time

from .._calibration_search import CalibrationError
from .._calibration_search import _Evaluator as _Evaluator
from .._validation import check_count, check_positive, check_probability
from ..accountants import DEFAULT_ACCOUNTANT
from ..runs import TrainingRun
from ..sampling import SamplingScheme

__all__ = [
    "Calibration",
    "calibrate",
    "calibrate_noise",
    "calibrate_steps",
    "calibrate_sampling_rate",
    "steps_from_epochs",
    "CalibrationError",
    "MAX_TARGET_EPSILON",
    "PARAMETERS",
]

from ._shared import (
    _DEFAULT_RTOL,
    _STEPS_MAX,
    MAX_TARGET_EPSILON,
    PARAMETERS,
    Calibration,
    EpsilonFunction,
    _check_scheme,
    _rate_and_steps,
    _scheme_of,
    steps_from_epochs,
)
from ._solvers import _SOLVERS, _rate_is_free


# --------------------------------------------------------------------------- public API
def calibrate(
    *,
    run: TrainingRun,
    parameter: str,
    target_epsilon: float,
    delta: float,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    max_steps: int = _STEPS_MAX,
    multiple_of: int = 1,
    epsilon_fn: EpsilonFunction | None = None,
) -> Calibration:
    """The value of one numeric field of ``run`` at which its certified epsilon meets ``target_epsilon``.

    The one calibrator over a run description (like dp_accounting's ``calibrate_dp_mechanism``): ``run``'s
    value of ``parameter`` is ignored (a placeholder), every other field is kept.

    Parameters
    ----------
    run : TrainingRun
        The run (``tightdp.runs.TrainingRun``); its scheme says how it is accounted.
    parameter : str
        One of ``PARAMETERS``: ``"noise_multiplier"`` (the smallest noise), ``"steps"`` (the largest number of
        steps; whole epochs for the epoch-based schemes), ``"epochs"`` (the same, counted in epochs of an
        epoch-based scheme) or a field of the scheme's ``free_fields`` (``"sampling_rate"``: the largest rate).
    target_epsilon, delta : float
    accountant, eps_error, rel_error
        As for ``dpsgd_epsilon``; the answer is certified at that accuracy.
    rtol : float
        Relative tolerance of the continuous searches (noise, rate).
    max_steps, multiple_of : int
        The steps search: at most ``max_steps``, over multiples of ``multiple_of``.
    epsilon_fn : callable, optional
        ``epsilon_fn(sigma, q, steps, delta) -> Bounds`` replaces the accountant (Poisson runs only).

    Returns
    -------
    Calibration
        ``Calibration.run`` is the calibrated run; ``epsilon.upper <= target_epsilon``.

    Raises
    ------
    ValueError
        Bad input, naming the argument (a ``parameter`` the run's scheme cannot vary among them).
    CalibrationError
        No value in the searched range meets the target.
    """
    if not isinstance(run, TrainingRun):
        raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
    if not isinstance(parameter, str) or parameter not in _SOLVERS:
        raise ValueError(f"parameter must be one of {', '.join(PARAMETERS)}, got {parameter!r}")
    t0 = time.perf_counter()
    _check_scheme(run.sampling, accountant, epsilon_fn)
    return _SOLVERS[parameter](
        run,
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        max_steps=max_steps,
        multiple_of=multiple_of,
        epsilon_fn=epsilon_fn,
        t0=t0,
    )


def calibrate_noise(
    *,
    target_epsilon: float,
    delta: float,
    sampling_rate: float | None = None,
    steps: int | None = None,
    epochs: int | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The smallest noise multiplier whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="noise_multiplier")`` for the run the keywords describe.

    Give ``sampling_rate`` and ``steps``, or ``epochs``, ``dataset_size`` and
    ``batch_size`` (see ``steps_from_epochs``). The answer is certified at the
    accuracy ``eps_error`` / ``rel_error`` (default: the default of
    ``dpsgd_epsilon``): ``dpsgd_epsilon(noise_multiplier=cal.noise_multiplier,
    ..., eps_error=cal.eps_error, rel_error=cal.rel_error).upper <= target_epsilon``. The noise is
    rounded up to ``DIGITS`` significant digits (more noise: the safe side) and
    the rounded value is the one evaluated. ``epsilon_fn(sigma, q, steps,
    delta) -> Bounds`` replaces the accountant (its ``upper`` is used).
    ``sampling`` (a name of ``tightdp.sampling`` or a scheme object) is the batch sampling that runs: for
    the epoch-based schemes ``sampling_rate`` is ``1/t`` and ``steps`` whole epochs (with
    ``epochs``/``dataset_size``/``batch_size``, ``t = ceil(N / B)``); ``truncated-poisson`` needs
    ``dataset_size`` and ``max_batch_size``.
    Raises ``CalibrationError`` when no sigma in [1e-3, 1e6] meets the target.

    Parameters
    ----------
    target_epsilon : float
        The target, in [0, ``MAX_TARGET_EPSILON``].
    delta : float
        The delta, in (0, 1).
    sampling_rate : float, optional
        The sampling rate (with ``steps``).
    steps : int, optional
        The number of steps (with ``sampling_rate``).
    epochs : int, optional
        The passes over the data (with ``dataset_size`` and ``batch_size``, instead of the rate and steps).
    dataset_size, batch_size : int, optional
        The data set and batch sizes (with ``epochs``; ``dataset_size`` also for the schemes that need it).
    accountant : str, default ``DEFAULT_ACCOUNTANT``
        A registered accountant name (the dominance-only schemes: the default only).
    eps_error, rel_error : float, optional
        The accuracy the answer is certified at (``tightdp._accuracy``; default: relative 1e-3).
    rtol : float, default 1e-3
        The relative tolerance of the search, at most 0.01.
    epsilon_fn : callable, optional
        ``epsilon_fn(sigma, q, steps, delta) -> Bounds`` replaces the accountant (Poisson runs only; its
        ``upper`` is used).
    sampling : str or SamplingScheme, optional
        A name of ``tightdp.sampling`` (default ``"poisson"``) or a scheme object.
    max_batch_size : int, optional
        The batch cap (``truncated-poisson``).

    Returns
    -------
    Calibration
        ``Calibration.run`` is the calibrated run; ``epsilon.upper <= target_epsilon``.

    Raises
    ------
    ValueError
        Bad input, naming the argument.
    CalibrationError
        No value in the searched range meets the target.

    Examples
    --------
    >>> cal = calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=0.01, steps=1000)  # doctest: +SKIP
    >>> cal.noise_multiplier, cal.epsilon.upper <= 3.0  # doctest: +SKIP
    """
    if isinstance(sampling, SamplingScheme):
        cls: type[SamplingScheme] = type(sampling)
    else:
        from ..sampling import scheme_class

        cls = scheme_class(sampling)
    q, k = _rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls)
    scheme = _scheme_of(
        sampling, dataset_size, max_batch_size, accountant, epsilon_fn, sampling_rate=q, batch_size=batch_size
    )
    run = TrainingRun(noise_multiplier=1.0, sampling=scheme, steps=k)
    return calibrate(
        run=run,
        parameter="noise_multiplier",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        epsilon_fn=epsilon_fn,
    )


def calibrate_steps(
    *,
    target_epsilon: float,
    delta: float,
    noise_multiplier: float,
    sampling_rate: float,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    max_steps: int = _STEPS_MAX,
    multiple_of: int = 1,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The largest number of steps whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="steps")`` for the run the keywords describe.

    Over the multiples of ``multiple_of`` (1: every integer; the steps per
    epoch: whole epochs), certified at ``eps_error`` / ``rel_error`` (default: that
    of ``dpsgd_epsilon``). Exact (``steps + multiple_of`` does not meet the
    target) up to 10,000 units; beyond, to a relative 1e-4 (the bound cannot
    resolve single steps there). Tightness is shown by a certified lower
    bound above the target at ``steps + multiple_of`` or 1 %, 2 %, 5 % more
    steps. Raises ``CalibrationError`` when even ``multiple_of`` steps exceed the target.
    ``sampling`` as for ``calibrate_noise``; the epoch-based schemes search whole epochs of
    ``t = 1 / sampling_rate`` steps (``multiple_of`` is then made a multiple of ``t``).

    Parameters
    ----------
    target_epsilon : float
        The target, in [0, ``MAX_TARGET_EPSILON``].
    delta : float
        The delta, in (0, 1).
    noise_multiplier : float
        The noise multiplier sigma, > 0.
    sampling_rate : float
        The sampling rate (the epoch-based schemes: ``1/t``).
    accountant : str, default ``DEFAULT_ACCOUNTANT``
        A registered accountant name (the dominance-only schemes: the default only).
    eps_error, rel_error : float, optional
        The accuracy the answer is certified at (``tightdp._accuracy``; default: relative 1e-3).
    max_steps : int, default 10**9
        The largest number of steps searched.
    multiple_of : int, default 1
        The steps are a multiple of this.
    epsilon_fn : callable, optional
        ``epsilon_fn(sigma, q, steps, delta) -> Bounds`` replaces the accountant (Poisson runs only; its
        ``upper`` is used).
    sampling : str or SamplingScheme, optional
        A name of ``tightdp.sampling`` (default ``"poisson"``) or a scheme object.
    dataset_size : int, optional
        The data set size (the schemes that need it).
    max_batch_size : int, optional
        The batch cap (``truncated-poisson``).

    Returns
    -------
    Calibration
        ``Calibration.run`` is the calibrated run; ``epsilon.upper <= target_epsilon``.

    Raises
    ------
    ValueError
        Bad input, naming the argument.
    CalibrationError
        No value in the searched range meets the target.
    """
    check_positive("noise_multiplier", noise_multiplier)
    scheme = _scheme_of(
        sampling,
        dataset_size,
        max_batch_size,
        accountant,
        epsilon_fn,
        sampling_rate=check_probability("sampling_rate", sampling_rate),
    )
    run = TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=scheme.epoch_length() or 1)
    return calibrate(
        run=run,
        parameter="steps",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        max_steps=max_steps,
        multiple_of=multiple_of,
        epsilon_fn=epsilon_fn,
    )


def calibrate_sampling_rate(
    *,
    target_epsilon: float,
    delta: float,
    noise_multiplier: float,
    steps: int,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The largest sampling rate in (0, 1] whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="sampling_rate")`` for the run the keywords describe.

    Certified at ``eps_error`` / ``rel_error`` (default: that of ``dpsgd_epsilon``); the rate is
    rounded down to ``DIGITS`` significant digits. Returns ``1.0`` when full
    batches already meet the target; otherwise tightness is shown by a
    certified lower bound above the target at a 1 % (else 2 %, 5 %) larger
    rate. Raises ``CalibrationError`` at once when even the smallest searched
    rate (1e-9) misses the target. ``sampling``: a scheme whose ``free_fields`` include the rate
    (``poisson``, ``truncated-poisson`` with ``dataset_size`` and ``max_batch_size``); the epoch-based
    schemes are refused (their rate is ``1/t`` with ``steps`` whole epochs, not a free variable:
    calibrate the noise or the epochs).

    Parameters
    ----------
    target_epsilon : float
        The target, in [0, ``MAX_TARGET_EPSILON``].
    delta : float
        The delta, in (0, 1).
    noise_multiplier : float
        The noise multiplier sigma, > 0.
    steps : int
        The number of steps.
    accountant : str, default ``DEFAULT_ACCOUNTANT``
        A registered accountant name (the dominance-only schemes: the default only).
    eps_error, rel_error : float, optional
        The accuracy the answer is certified at (``tightdp._accuracy``; default: relative 1e-3).
    rtol : float, default 1e-3
        The relative tolerance of the search, at most 0.01.
    epsilon_fn : callable, optional
        ``epsilon_fn(sigma, q, steps, delta) -> Bounds`` replaces the accountant (Poisson runs only; its
        ``upper`` is used).
    sampling : str or SamplingScheme, optional
        A name of ``tightdp.sampling`` (default ``"poisson"``) or a scheme object.
    dataset_size : int, optional
        The data set size (the schemes that need it).
    max_batch_size : int, optional
        The batch cap (``truncated-poisson``).

    Returns
    -------
    Calibration
        ``Calibration.run`` is the calibrated run; ``epsilon.upper <= target_epsilon``.

    Raises
    ------
    ValueError
        Bad input, naming the argument.
    CalibrationError
        No value in the searched range meets the target.
    """
    from ..sampling import scheme_class

    cls = type(sampling) if isinstance(sampling, SamplingScheme) else scheme_class(sampling)
    _rate_is_free(cls)
    scheme = _scheme_of(sampling, dataset_size, max_batch_size, accountant, epsilon_fn, sampling_rate=1.0)
    check_positive("noise_multiplier", noise_multiplier)
    run = TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=check_count("steps", steps))
    return calibrate(
        run=run,
        parameter="sampling_rate",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        epsilon_fn=epsilon_fn,
    )
