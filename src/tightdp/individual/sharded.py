"""A per-example ledger sharded by example, for data-parallel recording and cluster-wide queries (Koskela et al. 2023, App. D).

``ShardedLedger`` splits the ``(N, B + 1)`` bucket counts of ``IndividualAccountant`` into shards of
consecutive examples; each shard *is* an ``IndividualAccountant`` over its range (same options), so
it can be recorded wherever its examples are processed (a data-parallel rank, a dask worker) and saved
on its own. Nothing in a shard depends on the others.

**Queries.** ``epsilons`` / ``deltas`` run the same computation as ``IndividualAccountant`` on the
concatenated counts. By default (``use_dask=False``) the counts are concatenated in memory (plain numpy).
With ``use_dask=True`` the ledger is brought into the memory of the current dask scheduler's workers
once -- a ``distributed.Client`` if one is active (``Client("tcp://scheduler:8786")`` for an existing
cluster, ``LocalCluster`` on one machine) -- read from the shard files of a saved ledger (out of core:
never through this process) or from the shards in memory, in the smallest integer type that holds the
counts (uint16 up to 65,535 steps), *sorted by spread* (one shuffle), in blocks of ``2^14`` rows, and
kept there (``persist``) until the ledger changes or ``release()``. Every query then reads it in place:
the population-wide reductions (mesh, window, order) are dask reductions whose results (a few numbers
per example) come back, and every chunk of examples is a task that gathers its rows from the one or two
blocks that hold them (``_chunks.map_chunks``), so no pass moves the ledger. The answers are
computed on the sorted population and put back in the examples' order. The chunks are cut by exact
integer keys of the rows' contents (``_population._order``) and the sort keeps identical rows in their
order, so the chunks and the code are those of the in-memory path and the results are bit-identical to
it (tests/integrations/test_sharded_ledger.py checks that on a ``LocalCluster``).

**Persistence.** ``save(directory)`` writes every shard atomically (temporary file, fsync,
``os.replace``) under a new *generation* name, then the manifest (same way) *last*, then removes the
files of older generations. A crash at any point leaves the previous manifest and every file it names
intact, so ``load`` returns the previous ledger; recording then resumes from it. ``save_shard`` /
``write_manifest`` do the same in two halves for ranks that each save their own shard.
``from_shards`` writes the manifest for shard files saved elsewhere (each rank's or dask worker's
``IndividualAccountant.save``), so a ledger can be recorded on a cluster without ever being in one process
(the file handling is in ``_sharded_files``).

Every number means what ``IndividualAccountant.epsilons`` says it means (certified per-example
intervals of the recorded steps; an odometer, not a guarantee fixed in advance).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np

from .._types import AnyArray, ArrayLike, FloatArray
from .._validation import check_count
from ..bounds import Bounds
from ._buckets import _as_norm_array, check_indices, check_norms
from ._chunks import rows_exact
from ._sharded_files import _ShardFiles
from .accountant import IndividualAccountant

__all__ = ["ShardedLedger"]

_DEFAULT_SHARD = 1 << 17
_CLUSTER_BLOCK = 1 << 14  # rows per block of the sorted cluster copy (32 chunks of 512 examples)


class ShardedLedger(_ShardFiles):
    """Per-example ledger in shards of ``shard_size`` consecutive examples (see the module docstring).

    Every answer is the one ``IndividualAccountant`` gives for the whole population (Koskela et al. 2023, Sec. 5,
    App. D), bit for bit.

    Parameters
    ----------
    num_examples, noise_multiplier, clip_norm, sampling_rate
        As for ``IndividualAccountant`` (keyword-only).
    shard_size : int
        Examples per shard (the last shard may be smaller).
    **options
        The other options of ``IndividualAccountant`` (``num_buckets``, ``mesh``, ...), the same for
        every shard.

    Raises
    ------
    ValueError
        As ``IndividualAccountant``, or a ``shard_size`` that is not a positive count.

    References
    ----------
    Koskela et al. 2023, Lemma D.1, Thm D.2 (the per-example answers, as ``IndividualAccountant``).
    """

    def __init__(
        self,
        *,
        num_examples: int,
        noise_multiplier: float,
        clip_norm: float,
        sampling_rate: float = 1.0,
        shard_size: int = _DEFAULT_SHARD,
        **options: Any,
    ) -> None:
        n = check_count("num_examples", num_examples)
        size = check_count("shard_size", shard_size)
        self._n = n
        self._ranges = [(s, min(n, s + size)) for s in range(0, n, size)]
        self._opts = dict(
            noise_multiplier=noise_multiplier, clip_norm=clip_norm, sampling_rate=sampling_rate, **options
        )
        self._shards: list[IndividualAccountant | None] = [
            IndividualAccountant(num_examples=e - s, **self._opts) for s, e in self._ranges
        ]
        self._files: list[str] | None = None  # shard files of a lazily loaded ledger
        self._directory: str | None = None
        self._generation = 0
        self._meta: dict[str, Any] = {}
        self._cluster: tuple[Any, ...] | None = None  # (key, sorted dask counts, permutation): see _cluster_copy

    # ------------------------------------------------------------ properties
    @property
    def num_examples(self) -> int:
        """N, the number of examples over all shards."""
        return self._n

    @property
    def shard_ranges(self) -> list[tuple[int, int]]:
        """``[(start, stop)]`` of every shard (examples ``start .. stop - 1``)."""
        return list(self._ranges)

    @property
    def steps(self) -> int:
        """Number of recorded steps (every shard records every step)."""
        if self._shards[0] is None:
            return int(self._meta["steps"])
        return self._shards[0].steps

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready).

        Returns
        -------
        dict
            Argument name to value; ``ShardedLedger(**options())`` is an empty ledger with the same settings.
        """
        first = self._shard(0).options() if self._shards[0] is not None else dict(self._meta["shard_options"])
        first.pop("num_examples")
        return {"num_examples": self._n, "shard_size": self._ranges[0][1] - self._ranges[0][0], **first}

    def shard(self, k: int) -> IndividualAccountant:
        """The live ``IndividualAccountant`` of shard ``k`` (examples ``shard_ranges[k]``), e.g. for a
        data-parallel rank that records its own examples (``record_step`` with shard-local indices).

        Parameters
        ----------
        k : int
            Shard index in ``[0, len(shard_ranges))``.

        Returns
        -------
        IndividualAccountant
            The shard's accountant (loaded from disk first if the ledger is lazy).

        Raises
        ------
        ValueError
            ``k`` not a shard index.
        """
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k < len(self._ranges):
            raise ValueError(f"k must be a shard index in [0, {len(self._ranges)}), got {k!r}")
        return self._shard(int(k))

    def _shard(self, k: int) -> IndividualAccountant:
        shard = self._shards[k]
        if shard is None:  # lazily loaded: bring this shard into memory
            assert self._files is not None  # only a loaded ledger has shards on disk
            shard = self._shards[k] = IndividualAccountant.load(self._files[k])
        return shard

    # -------------------------------------------------------------- recording
    def record_step(self, grad_norms: ArrayLike, indices: ArrayLike | None = None) -> None:
        """``IndividualAccountant.record_step`` for the whole population, routed to the shards.

        Dense: ``grad_norms`` has one norm per example. Sparse: norms of the examples ``indices``
        (global indices); every shard records the step, the examples it does not list under the
        ``missing_norms`` policy. All input is validated before any shard records anything.

        Parameters
        ----------
        grad_norms : array_like
            Per-example gradient norms, finite and ``>= 0``: N of them, or one per entry of ``indices``.
        indices : array_like of int, optional
            Global indices of the examples ``grad_norms`` belong to (sparse step); default all, in order.

        Raises
        ------
        ValueError
            A norm negative, NaN or infinite, a shape mismatch, or an index out of range or repeated.
        """
        if indices is None:
            arr = check_norms(grad_norms, (self._n,))
            for k, (s, e) in enumerate(self._ranges):
                self._shard(k).record_step(arr[s:e])
            return
        arr = _as_norm_array(grad_norms)
        if arr.ndim != 1:
            raise ValueError(f"grad_norms must be 1-D with indices, got shape {arr.shape}")
        idx = check_indices(indices, arr.size, self._n)
        arr = check_norms(arr, (idx.size,))
        order = np.argsort(idx, kind="stable")
        idx, arr = idx[order], arr[order]
        cuts = np.searchsorted(idx, [s for s, _ in self._ranges] + [self._n])
        for k, (s, _) in enumerate(self._ranges):
            a, b = cuts[k], cuts[k + 1]
            self._shard(k).record_step(arr[a:b], indices=idx[a:b] - s)

    def record_steps(self, grad_norms: ArrayLike) -> None:
        """Several dense steps, shape ``(steps, num_examples)``, routed to the shards.

        Parameters
        ----------
        grad_norms : array_like
            Per-example gradient norms of each step, shape ``(steps, num_examples)``, finite and ``>= 0``.

        Raises
        ------
        ValueError
            Not 2-D, the wrong number of examples, or a norm negative, NaN or infinite.
        """
        arr = _as_norm_array(grad_norms)
        if arr.ndim != 2:
            raise ValueError(f"grad_norms must be 2-D (steps, num_examples), got shape {np.shape(arr)}")
        arr = check_norms(arr, (arr.shape[0], self._n))
        for k, (s, e) in enumerate(self._ranges):
            self._shard(k).record_steps(arr[:, s:e])

    # ---------------------------------------------------------------- queries
    def counts(self, *, use_dask: bool = False) -> Any:
        """The ``(N, B + 1)`` bucket counts: a numpy array, or a dask array chunked by shard (read from
        the shard files of a lazily loaded ledger without bringing them into this process).

        Parameters
        ----------
        use_dask : bool, default False
            Return a dask array instead of a numpy one.

        Returns
        -------
        numpy.ndarray or dask.array.Array
            int32 counts, one row per example in example order.

        Raises
        ------
        ImportError
            ``use_dask=True`` without dask installed.
        """
        if not use_dask:
            return np.concatenate([self._shard(k).bucket_counts for k in range(len(self._ranges))])
        import dask
        import dask.array as da

        cols = self._B() + 1
        parts = []
        for k, (s, e) in enumerate(self._ranges):
            shard = self._shards[k]
            if shard is None:
                assert self._files is not None  # only a loaded ledger has shards on disk
                blk = dask.delayed(_load_counts, pure=True)(self._files[k])  # type: ignore[attr-defined]  # dask ships no complete type annotations
                parts.append(da.from_delayed(blk, shape=(e - s, cols), dtype=np.int32))  # type: ignore[no-untyped-call]
            else:
                counts = np.array(shard.bucket_counts)
                parts.append(da.from_array(counts, chunks=(e - s, cols)))  # type: ignore[no-untyped-call]
        return da.concatenate(parts, axis=0)  # type: ignore[no-untyped-call]

    def _B(self) -> int:
        return int(self.options()["num_buckets"])

    def _view(self, use_dask: bool) -> tuple[IndividualAccountant, FloatArray | None]:
        """An ``IndividualAccountant`` over the whole population whose ledger is ``counts(...)`` (numpy), or
        the sorted cluster copy (``use_dask``; then also the permutation: view row ``j`` is example
        ``perm[j]``)."""
        opts = self.options()
        opts.pop("shard_size")
        opts["num_examples"] = 1
        view = _CountsView(**opts)
        view._n = self._n
        perm = None
        if use_dask and view._q < 1.0:
            view._view_counts, perm = self._cluster_copy()
        else:  # (sampling_rate 1: closed-form GDP from the per-example sums, no counts read)
            view._view_counts = self.counts(use_dask=use_dask)
        view._steps = self.steps
        shards = [self._shard_state(k) for k in range(len(self._ranges))]
        view._frac_min = min(st["frac_min"] for st in shards)
        if view._approx is not None:
            view._approx = np.concatenate([st["approx"] for st in shards])
        if view._sumsq is not None:
            view._sumsq = np.concatenate([st["sumsq"] for st in shards])
        if perm is not None:
            view._approx = None if view._approx is None else view._approx[perm]
            view._sumsq = None if view._sumsq is None else view._sumsq[perm]
        return view, perm

    def _state_key(self) -> tuple[Any, ...]:
        """What the cluster copy was made from: the scheduler, the saved generation, the live shards' steps."""
        try:
            from distributed import default_client

            client = id(default_client())  # type: ignore[no-untyped-call]  # dask ships no complete type annotations
        except (ImportError, ValueError):
            client = None
        live = tuple((k, id(a), a.steps) for k, a in enumerate(self._shards) if a is not None)
        return client, self._directory, self._generation, self.steps, live

    def _cluster_copy(self) -> Any:
        """The ledger in the dask workers' memory, sorted by spread (see the module docstring); built once
        per ledger state and scheduler. Returns the dask array and the permutation (row ``j`` of the copy is
        example ``perm[j]``)."""
        key = self._state_key()
        if self._cluster is not None and self._cluster[0] == key:
            return self._cluster[1], self._cluster[2]
        self._cluster = None  # drop a stale copy before making the new one
        cols = self._B() + 1
        dt = np.uint16 if self.steps <= np.iinfo(np.uint16).max else np.int32  # a count is at most the steps
        base = self.counts(use_dask=True).astype(dt).persist()  # every shard read once
        # layout key: each bucket's one-step loss variance scale q^2 (e^{r^2/sigma^2} - 1), quantised (exact
        # integers: identical rows get identical keys, and the stable sort keeps them in their order)
        o = self.options()
        r = np.arange(cols) / o["num_buckets"]
        v = np.expm1(np.minimum((r / o["noise_multiplier"]) ** 2, 700.0))
        wq = np.rint(v * ((1 << 24) / v[-1])).astype(np.int64)
        perm = np.argsort(rows_exact(base, wq), kind="stable")
        srt = base[perm].rechunk((_CLUSTER_BLOCK, cols)).persist()
        _wait(srt)
        del base
        self._cluster = (key, srt, perm)
        return srt, perm

    def persist(self) -> ShardedLedger:
        """Bring the sorted copy of the ledger into the dask workers' memory now (otherwise the first
        ``use_dask`` query does it).

        Returns
        -------
        ShardedLedger
            ``self``.
        """
        if self.options()["sampling_rate"] < 1.0:
            self._cluster_copy()
        return self

    def release(self) -> None:
        """Drop the sorted copy of the ledger from the cluster's memory (made again by the next
        ``use_dask`` query)."""
        self._cluster = None

    def _shard_state(self, k: int) -> dict[str, Any]:
        a = self._shards[k]
        if a is not None:
            return {"frac_min": a._frac_min, "approx": a.approximated_steps, "sumsq": a._sumsq}
        assert self._files is not None  # only a loaded ledger has shards on disk
        with np.load(self._files[k], allow_pickle=False) as z:
            fm = float(np.array(z["frac_min"]).reshape(-1)[0]) if "frac_min" in z.files else 0.0
            approx = np.array(z["approx"]) if "approx" in z.files else None
            sumsq = np.array(z["sumsq"]) if "sumsq" in z.files else None
        return {"frac_min": fm, "approx": approx, "sumsq": sumsq}

    def epsilons(self, delta: float, *, lower: bool = True, use_dask: bool = False) -> Bounds:
        """``IndividualAccountant.epsilons`` for every example (Koskela et al. 2023, Sec. 5, App. D).

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.
        lower : bool
            Whether to compute the certified lower ends.
        use_dask : bool
            Run on the dask scheduler, over the sorted cluster copy of the ledger (``persist``).

        Returns
        -------
        Bounds
            Arrays of length N in example order, identical to the in-memory query's.

        Raises
        ------
        ValueError, PrecisionError
            As ``IndividualAccountant.epsilons``.
        """
        view, perm = self._view(use_dask)
        return _in_example_order(view.epsilons(delta, lower=lower), perm)

    def deltas(self, epsilon: float, *, use_dask: bool = False) -> Bounds:
        """``IndividualAccountant.deltas`` for every example (Koskela et al. 2023, Lemma D.1).

        Parameters
        ----------
        epsilon : float
            Finite epsilon, ``>= 0``.
        use_dask : bool
            Run on the dask scheduler.

        Returns
        -------
        Bounds
            Certified upper deltas, arrays of length N in example order.

        Raises
        ------
        ValueError
            As ``IndividualAccountant.deltas``.
        """
        view, perm = self._view(use_dask)
        return _in_example_order(view.deltas(epsilon), perm)

    def worst_case_epsilon(self, delta: float) -> Bounds:
        """``IndividualAccountant.worst_case_epsilon``: every recorded step at full sensitivity.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        Bounds
            A certified upper bound on every example's epsilon.

        Raises
        ------
        ValueError
            ``delta`` out of range.
        """
        return self._view(self._n > _DEFAULT_SHARD)[0].worst_case_epsilon(delta)

    def to_accountant(self) -> IndividualAccountant:
        """One in-memory ``IndividualAccountant`` with the concatenated ledger (exact copy).

        Returns
        -------
        IndividualAccountant
            The whole population's accountant; its answers equal this ledger's.
        """
        opts = self.options()
        opts.pop("shard_size")
        acc = IndividualAccountant(**opts)
        acc._counts = np.ascontiguousarray(self.counts())
        acc._steps = self.steps
        states = [self._shard_state(k) for k in range(len(self._ranges))]
        acc._frac_min = min(st["frac_min"] for st in states)
        if acc._sumsq is not None:
            acc._sumsq = np.concatenate([st["sumsq"] for st in states])
        if acc._approx is not None:
            acc._approx = np.concatenate([st["approx"] for st in states]).astype(np.int32)
            acc._last = np.concatenate([self._shard(k)._last for k in range(len(self._ranges))])
            if acc._last_r is not None:
                acc._last_r = np.concatenate([self._shard(k)._last_r for k in range(len(self._ranges))])
        return acc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardedLedger):
            return NotImplemented
        return self._ranges == other._ranges and all(
            self._shard(k) == other._shard(k) for k in range(len(self._ranges))
        )

    def __repr__(self) -> str:
        return f"ShardedLedger(num_examples={self._n}, shards={len(self._ranges)}; {self.steps} steps)"


class _CountsView(IndividualAccountant):
    """An ``IndividualAccountant`` whose ledger is an external (numpy or dask) counts array."""

    _view_counts: Any = None

    def _ledger(self) -> AnyArray:
        return cast("AnyArray", self._view_counts)

    def _flush(self) -> None:
        return None


def _load_counts(path: str) -> FloatArray:
    with np.load(path, allow_pickle=False) as z:
        return np.array(z["counts"])


def _wait(arr: Any) -> None:
    """Block until a persisted dask collection is in the workers' memory (distributed scheduler)."""
    try:
        from distributed import default_client, wait

        default_client()  # type: ignore[no-untyped-call]  # dask ships no complete type annotations
    except (ImportError, ValueError):
        return
    wait(arr)  # type: ignore[no-untyped-call]


def _in_example_order(res: Bounds, perm: FloatArray | None) -> Bounds:
    """A result computed on the sorted cluster copy, back in the examples' order."""
    if perm is None:
        return res

    def back(a: AnyArray) -> Any:
        if a is None:
            return None
        out = np.empty_like(a)
        out[perm] = a
        return out

    return dataclasses.replace(res, lower=back(res.lower), estimate=back(res.estimate), upper=back(res.upper))
