"""One BLAS thread for small dense linear algebra (if ``threadpoolctl`` is installed).

The per-example population products (``tightdp.individual``: chunks of 2048 examples x ~100 frequencies x
~100 epsilons) and the matrix-mechanism Gram matrices (``tightdp.matrix``: a few hundred to a few thousand
wide) are many or small; on a busy 2-core machine a multi-threaded OpenBLAS spends far longer waking and
synchronising threads than computing (an order of magnitude or more for a population pass or an ``eigh`` of a
few hundred rows). This module imports nothing from tightdp.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

__all__ = ["single_threaded_blas", "one_blas_thread"]

_CONTROLLER: Any = None  # a threadpoolctl.ThreadpoolController once looked up, False without threadpoolctl

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS to one thread inside the block (a no-op without ``threadpoolctl``)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = ThreadpoolController()  # scans the loaded libraries once (a few ms)
        except ImportError:  # optional: without it BLAS keeps its own threading
            _CONTROLLER = False
    if _CONTROLLER is False:
        yield
        return
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


def one_blas_thread(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: run ``fn`` under ``single_threaded_blas`` (signature and docstring kept)."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with single_threaded_blas():
            return fn(*args, **kwargs)

    return wrapper
