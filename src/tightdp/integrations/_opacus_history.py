"""The certified epsilon of a ``TightDPAccountant`` history: ``(noise_multiplier, sample_rate, steps)`` segments
of Poisson-subsampled steps, or shuffled / fixed-order batches without amplification.

Part of ``tightdp.integrations.opacus`` (its module docstring states which loader gets which analysis); needs no
Opacus itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .._validation import check_count, check_positive, check_probability
from ..bounds import Bounds
from ._opacus_loaders import UnsupportedSamplerError, loader_scheme


def _accounts_history(sampling: str) -> bool:
    """Whether the history of ``(noise, rate, steps)`` segments describes the loader (Poisson sampling)."""
    cls = loader_scheme(sampling)
    return cls is not None and bool(cls.any_accountant)


#: ``(noise_multiplier, sample_rate, steps)``, one segment of a history
Segment = tuple[float, float, int]


def _seg(i: int, h: Any) -> Segment:
    """``history[i]`` checked: a positive noise, a rate in (0, 1], a whole number of steps."""
    try:
        sigma, q, n = h
    except (TypeError, ValueError):
        raise ValueError(f"history[{i}] must be (noise_multiplier, sample_rate, steps), got {h!r}") from None
    return (
        check_positive(f"history[{i}] noise_multiplier", sigma),
        check_probability(f"history[{i}] sample_rate", q),
        check_count(f"history[{i}] steps", n),
    )


def _epsilon_of_history(
    segments: Sequence[Segment], delta: float, accountant: str, eps_error: float | None, rel_error: float | None = None
) -> Bounds:
    """``dpsgd_epsilon`` for one segment; one composed ledger for a noise schedule."""
    from ..dpsgd import dpsgd_epsilon

    merged: dict[tuple[float, float], int] = {}
    for sigma, q, n in segments:
        merged[(sigma, q)] = merged.get((sigma, q), 0) + n
    if len(merged) == 1:
        (sigma, q), n = next(iter(merged.items()))
        return dpsgd_epsilon(
            noise_multiplier=sigma,
            sampling_rate=q,
            steps=n,
            delta=delta,
            accountant=accountant,
            eps_error=eps_error,
            rel_error=rel_error,
        )
    from ..accountants import create
    from ..dpsgd import dpsgd_mechanism

    acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
    acc.compose([(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), n) for (s, q), n in merged.items()])
    return acc.epsilon(delta)


def _fixed_batches_epsilon(
    segments: Sequence[Segment],
    delta: float,
    sampling: str,
    facts: Mapping[str, Any],
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    """Shuffled or fixed-order batches: the ``TrainingRun`` of the loader's scheme (``loader_scheme``) with the
    epochs counted up for the upper end (more epochs: a larger bound) and down for the lower end; Poisson's
    figure in ``details``."""
    from ..dpsgd import dpsgd_epsilon
    from ..runs import TrainingRun
    from ..sampling import FixedOrder, Shuffle

    if len({(s, q) for s, q, _ in segments}) != 1:
        raise ValueError(
            "history: shuffled / fixed-order batches are accounted for one noise multiplier and one "
            "loader; this history has several segments"
        )
    sigma, q = segments[0][0], segments[0][1]
    steps = sum(n for _, _, n in segments)
    t = max(1, round(1.0 / q))
    physical = facts.get("batches")
    if physical:  # k physical batches per step (q = k / physical): t = physical / k logical batches per epoch
        k = round(q * physical)
        if k < 1 or abs(q * physical - k) > 1e-9 * k or physical % k:
            raise UnsupportedSamplerError(
                f"history: steps accumulate {q * physical:g} of the {physical} batches of an epoch, which does not "
                "divide it: a logical batch then straddles two epochs and can hold an example twice"
            )
        t = physical // k
    cls = loader_scheme(sampling)
    if cls is None or not issubclass(cls, (Shuffle, FixedOrder)):
        raise UnsupportedSamplerError(f"tightdp.sampling: {sampling!r} batches are not shuffled or in a fixed order")
    scheme = cls(steps_per_epoch=t)

    def epochs(e: int) -> Bounds:
        return TrainingRun(noise_multiplier=sigma, sampling=scheme, epochs=e).epsilon(
            delta=delta, eps_error=eps_error, rel_error=rel_error
        )

    up = epochs(math.ceil(steps / t))
    notes: list[str] = []
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
    poisson = dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta, eps_error=eps_error, rel_error=rel_error
    )
    details = {
        **dict(up.details),
        "loader": sampling,
        "epochs_counted": math.ceil(steps / t),
        "poisson_epsilon": poisson.upper,
        "note": "; ".join(
            [
                "the DataLoader is not Poisson-sampled: epsilon of shuffled / fixed batches "
                "without amplification (no tighter certified bound is known)"
            ]
            + notes
        ),
    }
    return Bounds(min(lower, up.upper), up.upper, up.upper, "epsilon", "bound", details)
