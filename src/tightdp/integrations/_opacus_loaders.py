"""Which sampling a PyTorch / Opacus ``DataLoader`` performs, and the refusal of samplers no analysis describes.

Used by ``tightdp.integrations.opacus`` (which re-exports these names); needs PyTorch and Opacus.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TightDPError

if TYPE_CHECKING:
    from ..sampling import SamplingScheme

__all__ = ["UNKNOWN", "UnsupportedSamplerError", "check_data_loader", "classify_data_loader", "loader_scheme"]

#: ``classify_data_loader``'s answer for a loader no scheme of ``tightdp.sampling`` describes
UNKNOWN = "unknown"


class UnsupportedSamplerError(TightDPError, ValueError):
    """A training loader, a way of accumulating batches or a clipping rule that no certified analysis describes.

    A ``TightDPError`` and a ``ValueError``; the message names the sampler (or optimizer) and why.
    """


def _sampler_reason(data_loader: Any) -> str:
    """Why the sampling of an ``UNKNOWN`` loader cannot be accounted (for ``UnsupportedSamplerError``)."""
    from torch.utils.data import BatchSampler, RandomSampler, WeightedRandomSampler

    bs = getattr(data_loader, "batch_sampler", None)
    if bs is None:
        return (
            f"{type(data_loader).__name__} has no batch sampler (an iterable dataset?): which examples a batch "
            "can hold is unknown"
        )
    if not isinstance(bs, BatchSampler):
        return (
            f"custom batch sampler {type(bs).__name__}: which examples each batch can contain, and with what "
            "probability, is not known to tightdp"
        )
    sampler = bs.sampler
    name = type(sampler).__name__
    if isinstance(sampler, WeightedRandomSampler):
        return (
            f"{name} draws examples with non-uniform per-example probabilities (weights), "
            f"{'with' if sampler.replacement else 'without'} replacement, num_samples={sampler.num_samples}: "
            "no single sampling rate describes it, and Opacus' Poisson replacement ignores the weights and "
            "infers the rate 1 / len(data_loader) from num_samples / batch_size, not from the dataset size "
            "(opacus #813)"
        )
    if type(sampler) is RandomSampler:
        return (
            f"{name}(replacement={sampler.replacement}, num_samples={sampler._num_samples}) does not visit each "
            "example once per epoch, and the rate 1 / len(data_loader) Opacus infers is not batch_size / "
            "dataset size"
        )
    return (
        f"custom sampler {name}: its per-example inclusion probabilities are unknown, so the rate "
        "1 / len(data_loader) Opacus infers need not be any example's"
    )


def check_data_loader(data_loader: Any, *, poisson_sampling: bool) -> str:
    """The loader's sampling (``classify_data_loader``), or ``UnsupportedSamplerError`` naming its sampler and why
    no certified epsilon exists for it. With ``poisson_sampling=True`` Opacus replaces the loader by a uniform
    Poisson one at rate ``1 / len(data_loader)``; that is the standard DP-SGD substitute only for a loader that
    visits every example once per epoch (shuffled, sequential, or a ``DistributedSampler``), so any other sampler
    (``WeightedRandomSampler``, a custom (batch) sampler, sampling with replacement) is refused in both modes.

    Parameters
    ----------
    data_loader : torch.utils.data.DataLoader
        The loader given to ``PrivacyEngine.make_private``, before Opacus replaces its sampler.
    poisson_sampling : bool
        ``make_private``'s argument of that name.

    Returns
    -------
    str
        ``"poisson"``, ``"shuffle"`` or ``"fixed-order"`` (names of ``tightdp.sampling`` schemes).

    Raises
    ------
    UnsupportedSamplerError
        For any other sampler, naming its class and why (opacus #813 for ``WeightedRandomSampler``).
    """
    from torch.utils.data.distributed import DistributedSampler

    sampling, _ = classify_data_loader(data_loader)
    if sampling != UNKNOWN:
        return sampling
    bs = getattr(data_loader, "batch_sampler", None)
    if poisson_sampling and type(getattr(bs, "sampler", None)) is DistributedSampler:
        return "poisson"  # Opacus' distributed Poisson sampler replaces it, over the whole dataset
    raise UnsupportedSamplerError(
        f"data_loader: tightdp refuses to account this training loader: "
        f"{_sampler_reason(data_loader)}; use a shuffled or sequential DataLoader "
        "(make_private replaces it by Poisson sampling) or a uniform sampler"
    )


def loader_scheme(label: str) -> type[SamplingScheme] | None:
    """The ``tightdp.sampling`` class a loader classification names (``None`` for ``UNKNOWN``).

    Parameters
    ----------
    label : str
        A ``classify_data_loader`` answer: ``"poisson"``, ``"shuffle"``, ``"fixed-order"`` or ``UNKNOWN``.

    Returns
    -------
    type or None
        ``Poisson``, ``Shuffle`` or ``FixedOrder`` (``None`` for ``UNKNOWN``).

    Raises
    ------
    ValueError
        Naming ``tightdp.sampling``, for a name of no scheme or of another scheme (a data loader is
        Poisson-sampled, shuffled or in a fixed order).
    """
    from ..sampling import FixedOrder, Poisson, Shuffle, scheme_class

    if label == UNKNOWN:
        return None
    cls = scheme_class(label, argument="tightdp.sampling")
    if cls not in (Poisson, Shuffle, FixedOrder):
        raise ValueError(
            f"tightdp.sampling: a data loader is Poisson-sampled, shuffled or in a fixed order, got {label!r}"
        )
    return cls


def classify_data_loader(data_loader: Any) -> tuple[str, dict[str, Any]]:
    """``(sampling, facts)`` of a PyTorch / Opacus data loader.

    Parameters
    ----------
    data_loader : torch.utils.data.DataLoader
        Any loader (an object without a batch sampler is ``"unknown"``).

    Returns
    -------
    tuple
        ``(sampling, facts)``. ``sampling``: ``"poisson"`` (Opacus' ``DPDataLoader`` or a
        ``(Distributed)UniformWithReplacementSampler``), ``"shuffle"`` (a ``BatchSampler`` over a ``RandomSampler``
        without replacement), ``"fixed-order"`` (over a ``SequentialSampler``) or ``"unknown"``; the first three
        are names of ``tightdp.sampling`` schemes (``loader_scheme``). ``facts``: ``batches`` (``len(loader)``),
        ``dataset_size``, ``batch_size``, ``drop_last`` and ``sampler`` (a type name), as far as known.

    Raises
    ------
    ImportError
        Without PyTorch or Opacus.
    """
    from opacus.data_loader import DPDataLoader
    from opacus.utils.uniform_sampler import (
        DistributedUniformWithReplacementSampler,
        UniformWithReplacementSampler,
    )
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

    bs = getattr(data_loader, "batch_sampler", None)
    facts: dict[str, Any] = {"sampler": type(bs).__name__ if bs is not None else type(data_loader).__name__}
    try:
        facts["dataset_size"] = len(data_loader.dataset)
        facts["batches"] = len(data_loader)
    except TypeError:  # an iterable dataset: no length
        pass
    if isinstance(data_loader, DPDataLoader) or isinstance(
        bs, (UniformWithReplacementSampler, DistributedUniformWithReplacementSampler)
    ):
        return "poisson", facts
    if isinstance(bs, BatchSampler):
        facts.update(batch_size=bs.batch_size, drop_last=bool(bs.drop_last), sampler=type(bs.sampler).__name__)
        if type(bs.sampler) is RandomSampler and not bs.sampler.replacement and bs.sampler._num_samples is None:
            return "shuffle", facts
        if type(bs.sampler) is SequentialSampler:
            return "fixed-order", facts
    return UNKNOWN, facts
