"""The registry of process-wide memos, so that ``tightdp.clear_caches()`` imports nothing.

A module that memoises with ``functools.lru_cache`` registers the cached function
where it defines it::

    from .._caches import register as _register_cache

    @_register_cache
    @lru_cache(maxsize=48)
    def discretise(...): ...

``clear_caches()`` then empties every memo registered so far (a module that was
never imported has nothing cached). This module imports nothing from tightdp,
so every module may import it without creating an import cycle (before it,
``clear_caches`` imported the accountants and the PLD core, and they imported the
helpers module that defined it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

__all__ = ["register", "registered", "clear_caches"]

_F = TypeVar("_F", bound=Callable[..., Any])

_REGISTRY: list[Callable[..., Any]] = []


class _Memo(Protocol):
    """What ``register`` accepts: a callable with ``cache_clear()`` (an ``lru_cache`` wrapper)."""

    def cache_clear(self) -> None: ...


def register(fn: _F) -> _F:
    """Record ``fn`` (anything with a ``cache_clear()`` method) and return it unchanged (a decorator)."""
    clear = getattr(fn, "cache_clear", None)
    if not callable(clear):
        raise TypeError(f"register needs a function with cache_clear() (an lru_cache), got {fn!r}")
    if fn not in _REGISTRY:
        _REGISTRY.append(fn)
    return fn


def registered() -> tuple[Callable[..., Any], ...]:
    """The memos registered so far, in registration order."""
    return tuple(_REGISTRY)


def clear_caches() -> None:
    """Empty every process-wide memo of the engine (discretisations, dominance cells, RDP/Edgeworth terms, ...).

    The caches only save time when the same mechanism is accounted again; they
    can hold grids of up to about a million points each. Benchmarks call this
    between repetitions so that a repeated call does the whole computation.
    """
    for fn in _REGISTRY:
        cast(_Memo, fn).cache_clear()  # ``register`` checked that it has one
