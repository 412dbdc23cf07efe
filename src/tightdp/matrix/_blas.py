"""One BLAS thread for the dense linear algebra of this package (if ``threadpoolctl`` is installed).

The matrices here are a few hundred to a few thousand wide; on a busy 2-core machine a multi-threaded OpenBLAS
spent 100x longer synchronising than computing (measured: ``eigh`` of a 500 x 500 matrix, 16 s with two threads
at load average 11, 0.12 s with one). Same approach as ``tightdp.individual``'s population code.
"""

from __future__ import annotations

import contextlib
import functools

__all__ = ["single_threaded_blas", "one_blas_thread"]

_CONTROLLER = None


@contextlib.contextmanager
def single_threaded_blas():
    """Limit BLAS to one thread inside the block (a no-op without ``threadpoolctl``)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
            _CONTROLLER = ThreadpoolController()
        except ImportError:  # optional: without it BLAS keeps its own threading
            _CONTROLLER = False
    if _CONTROLLER is False:
        yield
        return
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


def one_blas_thread(fn):
    """Decorator: run ``fn`` under ``single_threaded_blas`` (signature and docstring kept)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return fn(*args, **kwargs)
    return wrapper
