"""Chunked products over the rows of a per-example ledger, in memory or on a dask cluster.

A population query (``_population``) answers every example from one row of the counts matrix; these helpers
cut the rows into chunks and run a chunk function over them: in blocks of rows for a numpy ledger, and as one
dask task per chunk for a dask-backed ledger (``map_chunks``), reading only the ledger blocks that hold the
chunk's rows. Row reductions in exact integer arithmetic (``rows_exact``) give keys that do not depend on a
row's position, so the chunks of a permuted copy of a ledger are the same and every answer bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._blas import single_threaded_blas
from .._types import AnyArray, IntArray

__all__ = ["ROW_BLOCK", "hash_weights", "map_chunks", "rows_at", "rows_exact"]

_np = np.asarray  # materialises a (small) reduction of a dask-backed ledger; a no-op on numpy arrays


ROW_BLOCK = 1 << 16


def rows_at(counts: Any, table: AnyArray) -> AnyArray:
    """``counts @ table`` as a numpy array, in blocks of rows for a numpy ledger (an int32 ledger would
    otherwise be cast to a float64 copy of twice its size), lazily blockwise for a dask one."""
    if hasattr(counts, "dask") or counts.shape[0] <= ROW_BLOCK:
        return _np(counts @ table)
    return np.concatenate([counts[i : i + ROW_BLOCK] @ table for i in range(0, counts.shape[0], ROW_BLOCK)])


def rows_exact(counts: Any, table: AnyArray) -> AnyArray:
    """``counts @ table`` in exact integer arithmetic, so a row's value does not depend on its position:
    ``table`` int64 (weights below ``2^24``; a row sums to its number of steps, below ``2^38`` for int32
    cells, so no overflow) or uint64 (sums modulo ``2^64``); in blocks of rows for numpy, lazily for dask."""
    dt = table.dtype
    if hasattr(counts, "dask"):
        return _np(counts.astype(dt) @ table)
    return np.concatenate(
        [counts[i : i + ROW_BLOCK].astype(dt) @ table for i in range(0, counts.shape[0], ROW_BLOCK)] + [np.zeros(0, dt)]
    )


def hash_weights(m: int) -> AnyArray:
    """Fixed pseudo-random odd 64-bit weights (a linear hash of a row modulo ``2^64``)."""
    return np.random.default_rng(0x7D1D).integers(0, 1 << 63, size=m, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _is_dask(counts: Any) -> bool:
    return hasattr(counts, "dask") and hasattr(counts, "chunks")


def _run_chunk(fn: Callable[..., Any], bs: Any, rows: Any, *args: Any) -> Any:
    """``fn(bs, counts_rows, *args)`` with BLAS limited to one thread; ``rows`` is the chunk's counts, or
    ``(local, blocks)``: the chunk gathered on the worker from the ledger blocks it touches (``local``
    indexes their concatenation). The gathered rows are cast to the in-memory ledger's int32."""
    if isinstance(rows, tuple):
        local, blocks = rows
        cc = np.concatenate([np.asarray(b) for b in blocks])[local] if len(blocks) > 1 else np.asarray(blocks[0])[local]
        rows = cc.astype(np.int32, copy=False)
    with single_threaded_blas():
        return fn(bs, np.asarray(rows), *args)


def _gather_plan(row_chunks: tuple[int, ...], order: AnyArray, chunk: int) -> list[tuple[IntArray, AnyArray]]:
    """For every chunk of ``chunk`` rows in ``order``: the ledger blocks it touches (row chunks of a dask
    array, sizes ``row_chunks``) and the chunk's rows as indices into their concatenation."""
    edges = np.concatenate([[0], np.cumsum(row_chunks)])
    blk = np.searchsorted(edges, order, side="right") - 1
    plan = []
    for s0 in range(0, order.size, chunk):
        b = blk[s0 : s0 + chunk]
        used = np.unique(b)
        base = np.concatenate([[0], np.cumsum(edges[used + 1] - edges[used])])[:-1]
        local = order[s0 : s0 + chunk] - edges[b] + base[np.searchsorted(used, b)]
        plan.append((used, local.astype(np.int32 if edges[-1] < 2**31 else np.int64)))
    return plan


def map_chunks(
    fn: Callable[..., Any], bs: Any, counts: Any, order: AnyArray, chunk: int, *args: Any
) -> list[tuple[IntArray, Any]]:
    """``fn(bs, counts[rows], *args)`` for every chunk of ``chunk`` rows in ``order``, returning
    ``[(rows, result)]``. For a dask-backed ledger every chunk is a dask task on the current scheduler
    (a ``distributed.Client`` if one is active) that depends only on the ledger blocks holding its rows
    and gathers them where it runs: nothing else of the ledger moves. A ledger stored sorted like
    ``order`` (``ShardedLedger`` keeps its cluster copy sorted by spread) is thus read block by block,
    with a few neighbouring rows from the next block. The chunks and the code are the same as in
    memory, so the results are bit-identical."""
    starts = range(0, order.size, chunk)
    if not _is_dask(counts):
        return [(order[s0 : s0 + chunk], fn(bs, counts[order[s0 : s0 + chunk]], *args)) for s0 in starts]
    import dask

    blocks = (
        counts.to_delayed()[:, 0]
        if counts.ndim == 2 and len(counts.chunks[1]) == 1
        else counts.rechunk({1: -1}).to_delayed()[:, 0]
    )
    try:  # a distributed client: ship the spectra to every worker once, not inside the graph
        from distributed import default_client

        bs_d = default_client().scatter(bs, broadcast=True, hash=False)  # type: ignore[no-untyped-call]  # dask ships no complete type annotations
    except (ImportError, ValueError):
        bs_d = dask.delayed(bs, pure=True, traverse=False)  # type: ignore[attr-defined]  # dask ships no complete type annotations
    tasks = [
        dask.delayed(_run_chunk, pure=True)(fn, bs_d, (local, [blocks[i] for i in used]), *args)  # type: ignore[attr-defined]
        for used, local in _gather_plan(counts.chunks[0], order, chunk)
    ]
    results = dask.compute(*tasks)  # type: ignore[attr-defined, no-untyped-call]  # dask ships no complete type annotations
    return [(order[s0 : s0 + chunk], res) for s0, res in zip(starts, results)]
