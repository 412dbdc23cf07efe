"""The commonest question: epsilon of DP-SGD, for the sampling scheme that actually ran.

``dpsgd_epsilon(run=TrainingRun(...), delta=...)`` accounts a ``tightdp.runs.TrainingRun``; the keywords
(``noise_multiplier``, ``sampling_rate``, ``steps``, ``sampling="poisson"``, ``dataset_size``,
``max_batch_size``) build one through the registry of ``tightdp.sampling``, where every scheme says how it
is accounted:

* ``"poisson"`` (default): Poisson sampling at ``sampling_rate``, add/remove neighbouring, any accountant;
  ``"fixed-batch"``, ``"without-replacement"``, ``"with-replacement"``: their step mechanisms, any accountant;
* ``"random-allocation"``: every example in exactly one of the ``t = 1/sampling_rate`` steps of each epoch,
  drawn afresh every epoch (``tightdp.schemes.allocation_epsilon``); ``"cyclic-allocation"``: one step for
  the whole run, repeated every cycle (jax_privacy's balls-in-bins); ``"balls-and-bins"`` is refused as
  ambiguous between the two;
* ``"shuffle"``: a fresh permutation cut into ``t = 1/sampling_rate`` fixed batches each epoch
  (``tightdp.schemes.shuffle_epsilon``; zero-out neighbouring);
* ``"truncated-poisson"``: Poisson batches cut to ``max_batch_size`` out of ``dataset_size``
  (``tightdp.schemes.truncated_poisson_epsilon``).
"""

from __future__ import annotations

from ._accuracy import check_accuracy
from ._validation import check_count, check_delta, check_positive, check_probability
from .accountants import DEFAULT_ACCOUNTANT
from .bounds import Bounds
from .mechanisms import Gaussian, PoissonSampled
from .runs import TrainingRun
from .sampling import SamplingScheme, parse_sampling

__all__ = ["dpsgd_epsilon", "dpsgd_mechanism", "run_from_keywords"]


def dpsgd_mechanism(*, noise_multiplier: float, sampling_rate: float, relation: str = "add-remove") -> PoissonSampled:
    """One DP-SGD step: the Poisson-subsampled Gaussian with unit sensitivity (clipping norm C, noise sigma*C).

    Parameters
    ----------
    noise_multiplier : float
        The noise multiplier sigma, > 0.
    sampling_rate : float
        The Poisson sampling rate ``q`` in (0, 1].
    relation : str, default ``"add-remove"``
        The neighbouring relation (``"add-remove"``, ``"remove"``, ``"add"`` or ``"substitute"``).

    Returns
    -------
    PoissonSampled
        The step's mechanism, for any accountant.

    Raises
    ------
    ValueError
        If an argument is out of its domain, naming it.
    """
    return PoissonSampled(
        mechanism=Gaussian(noise_multiplier=noise_multiplier), sampling_rate=sampling_rate, relation=relation
    )


def run_from_keywords(
    *,
    noise_multiplier: float,
    sampling_rate: float | None = None,
    steps: int,
    sampling: str | SamplingScheme | None = "poisson",
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
    batch_size: int | None = None,
) -> TrainingRun:
    """The ``TrainingRun`` the convenience keywords of ``dpsgd_epsilon`` describe.

    Parameters
    ----------
    noise_multiplier : float
        The noise multiplier sigma, > 0.
    sampling_rate : float, optional
        The expected fraction of the data per step (the epoch-based schemes: ``1/t``).
    steps : int
        The number of steps, a positive whole number.
    sampling : str or SamplingScheme, default ``"poisson"``
        A registered name (parsed by the registry of ``tightdp.sampling``) or a scheme object.
    dataset_size, max_batch_size, batch_size : int, optional
        The sizes the scheme's ``from_options`` reads.

    Returns
    -------
    TrainingRun
        The run.

    Raises
    ------
    ValueError
        If an argument is out of its domain or the scheme cannot be built from them, naming the argument.
    """
    check_positive("noise_multiplier", noise_multiplier)
    steps = check_count("steps", steps)
    scheme = parse_sampling(
        sampling,
        sampling_rate=sampling_rate,
        dataset_size=dataset_size,
        batch_size=batch_size,
        max_batch_size=max_batch_size,
    )
    return TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=steps)


def dpsgd_epsilon(
    *,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    delta: float,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
    batch_size: int | None = None,
    run: TrainingRun | None = None,
) -> Bounds:
    """Bounds on the epsilon of a DP-SGD run at ``delta``.

    Parameters
    ----------
    run : TrainingRun, optional
        The run (``tightdp.runs.TrainingRun``); replaces the run keywords below.
    noise_multiplier, sampling_rate, steps, sampling, dataset_size, batch_size, max_batch_size
        The run as keywords: ``sampling`` a registered name (``tightdp.sampling.scheme_names()``) or a scheme
        object; ``sampling_rate`` is the expected fraction of the data per step (batch size / dataset
        size); for the epoch-based schemes it must be ``1/t`` and ``steps`` a multiple of ``t``;
        ``truncated-poisson`` also needs ``dataset_size`` and ``max_batch_size``.
    delta : float
        The delta, in (0, 1).
    accountant : str, default ``DEFAULT_ACCOUNTANT``
        Any accountant for schemes with a step mechanism; the others use the dominance accountant
        (``connect-dots``) only.
    eps_error, rel_error : float, optional
        Accuracy (``tightdp._accuracy``): by default relative, ``upper - lower <= 2 max(1e-3 epsilon, 5e-5)``;
        ``eps_error`` alone asks for an absolute width ``2 eps_error``. Accountants other than the default
        take ``eps_error`` only.

    Returns
    -------
    Bounds
        ``details["scheme"]`` names the scheme that was accounted.

    Raises
    ------
    ValueError
        Bad input, naming the argument (an ambiguous sampling name among them).

    >>> b = dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=256/50000, steps=19600, delta=1e-5)
    >>> b.lower <= b.upper
    True
    """
    sigma, k = 0.0, 0  # the keywords' run, validated below (unused with ``run``)
    if run is None:
        if noise_multiplier is None:
            raise ValueError("noise_multiplier is required (or give run)")
        sigma = check_positive("noise_multiplier", noise_multiplier)
        if sampling_rate is not None:
            check_probability("sampling_rate", sampling_rate)
        k = check_count("steps", steps)
    else:
        if not isinstance(run, TrainingRun):
            raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
        given = [
            k
            for k, v in (
                ("noise_multiplier", noise_multiplier),
                ("sampling_rate", sampling_rate),
                ("steps", steps),
                ("dataset_size", dataset_size),
                ("max_batch_size", max_batch_size),
                ("batch_size", batch_size),
            )
            if v is not None
        ]
        if given or sampling is not None:
            raise ValueError(f"run replaces {', '.join(given) or 'sampling'}; give one or the other")
    check_delta("delta", delta)
    check_accuracy(eps_error, rel_error)
    if run is None:
        run = run_from_keywords(
            noise_multiplier=sigma,
            sampling_rate=sampling_rate,
            steps=k,
            sampling=sampling,
            dataset_size=dataset_size,
            max_batch_size=max_batch_size,
            batch_size=batch_size,
        )
    return run.epsilon(delta=delta, accountant=accountant, eps_error=eps_error, rel_error=rel_error)
