"""The one registry of the sampling schemes' names (``SCHEMES``, ``register_scheme``, ``scheme_class``,
``parse_sampling``, ``scheme_from_dict``) and the checks of the convenience keywords the schemes share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._validation import check_count, check_probability
from ._base import SamplingScheme

__all__ = [
    "SCHEMES",
    "AMBIGUOUS",
    "DEFAULT_SCHEME",
    "register_scheme",
    "unregister_scheme",
    "scheme_class",
    "scheme_names",
    "parse_sampling",
    "scheme_from_dict",
]

# ------------------------------------------------------------------------------------------- registry
#: every accepted spelling (lower case, hyphens) -> its scheme class
SCHEMES: dict[str, type[SamplingScheme]] = {}

#: spellings refused because they name more than one scheme, with the reason
AMBIGUOUS: dict[str, str] = {
    "balls-and-bins": (
        "'balls-and-bins' is ambiguous: say 'random-allocation' (a fresh step for every example "
        "in every epoch; tightdp's former 'balls-and-bins') or 'cyclic-allocation' (alias "
        "'balls-in-bins-fixed': one step per example for the whole run, repeated every cycle; "
        "jax_privacy's BallsInBinsSampling), which is much less private"
    ),
}


#: the scheme a front end assumes when none is named
DEFAULT_SCHEME = "poisson"


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def register_scheme(scheme: type[SamplingScheme]) -> type[SamplingScheme]:
    """Class decorator: make ``scheme`` known under ``scheme.name`` and ``scheme.aliases`` to every front end.

    Parameters
    ----------
    scheme : type
        A ``SamplingScheme`` subclass with a ``name``.

    Returns
    -------
    type
        ``scheme`` itself, registered.

    Raises
    ------
    ValueError
        If ``scheme`` is not a named ``SamplingScheme`` subclass, or one of its spellings is taken or ambiguous.
    """
    if not (isinstance(scheme, type) and issubclass(scheme, SamplingScheme)) or not scheme.name:
        raise ValueError(f"register_scheme needs a SamplingScheme subclass with a name, got {scheme!r}")
    for n in (scheme.name, *scheme.aliases):
        k = _key(n)
        if k in AMBIGUOUS or (k in SCHEMES and SCHEMES[k] is not scheme):
            raise ValueError(f"sampling name {n!r} is already taken")
        SCHEMES[k] = scheme
    return scheme


def unregister_scheme(scheme: type[SamplingScheme]) -> None:
    """Forget ``scheme`` (for tests that register a scheme of their own).

    Parameters
    ----------
    scheme : type
        A registered ``SamplingScheme`` subclass (an unregistered one is ignored).

    Raises
    ------
    ValueError
        Never: unknown classes are ignored (the section is kept for uniformity).
    """
    for k in [k for k, v in SCHEMES.items() if v is scheme]:
        del SCHEMES[k]


def scheme_names(*, step_mechanism: bool | None = None) -> tuple[str, ...]:
    """The registered names (not aliases), in registration order.

    Parameters
    ----------
    step_mechanism : bool, optional
        ``False``: only the schemes answered by their own certified function (dominance accountant);
        ``True``: only those with a step mechanism for every accountant; ``None`` (default): all.

    Returns
    -------
    tuple of str
        The names.

    Raises
    ------
    ValueError
        Never: every value of ``step_mechanism`` is accepted.
    """
    out = []
    for cls in dict.fromkeys(SCHEMES.values()):
        if step_mechanism is None or cls.any_accountant == step_mechanism:
            out.append(cls.name)
    return tuple(out)


def scheme_class(name: str | type[SamplingScheme] | None, *, argument: str = "sampling") -> type[SamplingScheme]:
    """The class registered under ``name``.

    Parameters
    ----------
    name : str or type or None
        A registered spelling (hyphens or underscores, any case), a ``SamplingScheme`` subclass (returned as
        it is) or ``None`` (the default, ``DEFAULT_SCHEME``).
    argument : str, default ``"sampling"``
        The argument's name in error messages.

    Returns
    -------
    type
        The ``SamplingScheme`` subclass.

    Raises
    ------
    ValueError
        If ``name`` is not a registered spelling (or is an ambiguous one), naming ``argument``.
    """
    if isinstance(name, type) and issubclass(name, SamplingScheme):
        return name
    if name is None:
        name = DEFAULT_SCHEME
    if not isinstance(name, str):
        raise ValueError(
            f"{argument} must be a sampling scheme name or object (one of {', '.join(scheme_names())}), got {name!r}"
        )
    k = _key(name)
    if k in AMBIGUOUS:
        raise ValueError(f"{argument}: {AMBIGUOUS[k]}")
    if k not in SCHEMES:
        raise ValueError(f"{argument} must be one of {', '.join(scheme_names())}; got {name!r}")
    return SCHEMES[k]


def parse_sampling(
    sampling: str | SamplingScheme | type[SamplingScheme] | None, *, argument: str = "sampling", **options: Any
) -> SamplingScheme:
    """A scheme object from a name and the convenience keywords (``SamplingScheme.from_options``).

    Parameters
    ----------
    sampling : str or SamplingScheme or None
        A registered name (``None``: ``DEFAULT_SCHEME``), or a scheme object (returned as it is).
    argument : str, default ``"sampling"``
        The argument's name in error messages.
    **options
        ``sampling_rate``, ``dataset_size``, ``batch_size``, ``max_batch_size`` (``None``: not given).

    Returns
    -------
    SamplingScheme
        The scheme.

    Raises
    ------
    ValueError
        If the name is not registered or the keywords do not build the scheme.
    """
    if isinstance(sampling, SamplingScheme):
        return sampling
    return scheme_class(sampling, argument=argument).from_options(**options)


def _whole_steps_per_epoch(sampling_rate: float) -> int:
    q = check_probability("sampling_rate", sampling_rate)
    t = round(1.0 / q)
    if abs(t * q - 1.0) > 1e-9:
        raise ValueError(
            f"sampling_rate must be 1/t for a whole number t of steps per epoch "
            f"(batch size = dataset size / t), got {sampling_rate!r}"
        )
    return t


def _epoch_options(name: str, sampling_rate: float | None, dataset_size: int | None) -> int:
    if sampling_rate is None:
        raise ValueError(f"sampling_rate (1/t, t steps per epoch) is required for sampling={name!r}")
    t = _whole_steps_per_epoch(sampling_rate)
    if dataset_size is not None and check_count("dataset_size", dataset_size) < t:
        raise ValueError(
            f"dataset_size ({dataset_size}) must be at least the {t} steps per epoch (batch size at least 1)"
        )
    return t


def scheme_from_dict(d: Mapping[str, Any]) -> SamplingScheme:
    """Inverse of ``SamplingScheme.to_dict``.

    Parameters
    ----------
    d : mapping
        ``{"sampling": name, field: value, ...}``.

    Returns
    -------
    SamplingScheme
        The scheme.

    Raises
    ------
    ValueError
        If the name is not registered or a field is out of its domain.
    TypeError
        If a field is unknown to the scheme.
    """
    d = dict(d)
    cls = scheme_class(d.pop("sampling", None))
    return cls(**d)
