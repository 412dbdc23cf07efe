"""Saving and loading a ``ShardedLedger``: one file per shard, then a manifest naming them (both atomic).

``ShardedLedger`` (``sharded``) is assembled from this mixin. A ledger directory holds the shard files of
the current generation (``shard-KKKKK-gGEN.npz``, each an ``IndividualAccountant.save`` file) and
``manifest.json`` naming them; the manifest is written last, so a crash leaves the previous generation
readable. ``from_shards`` writes the manifest for shards saved by other processes (data-parallel ranks,
dask workers), so that no process ever holds the whole ledger.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self, cast

import numpy as np

from .._validation import check_count
from .accountant import IndividualAccountant

__all__: list[str] = []

_FORMAT = "tightdp.ShardedLedger/1"
_MANIFEST = "manifest.json"


class _ShardFiles:
    """The persistence half of ``ShardedLedger``: ``save``, ``save_shard``, ``write_manifest``, ``from_shards``,
    ``load``."""

    _n: int
    _ranges: list[tuple[int, int]]
    _opts: dict[str, Any]
    _shards: list[IndividualAccountant | None]
    _files: list[str] | None
    _directory: str | None
    _generation: int
    _meta: dict[str, Any]
    _cluster: tuple[Any, ...] | None

    if TYPE_CHECKING:

        @property
        def steps(self) -> int: ...

        def _shard(self, k: int) -> IndividualAccountant: ...

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write every shard (atomically, new generation) and then the manifest (atomically, last).

        Parameters
        ----------
        directory : str or os.PathLike
            The ledger's directory (created if missing); files of older generations are removed.

        Raises
        ------
        OSError
            The directory or a file cannot be written (the previous generation stays readable).
        """
        d = os.fspath(directory)
        os.makedirs(d, exist_ok=True)
        old = _read_manifest(d) if os.path.exists(os.path.join(d, _MANIFEST)) else None
        gen = max(self._generation, old["generation"] if old else 0) + 1
        files = [self.save_shard(d, k, generation=gen) for k in range(len(self._ranges))]
        self.write_manifest(d, files, generation=gen)
        keep = set(files) | {_MANIFEST}
        for name in os.listdir(d):  # files of older generations (best effort)
            if name.startswith("shard-") and name.endswith(".npz") and name not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(d, name))
        self._generation = gen

    def save_shard(self, directory: str | os.PathLike[str], k: int, *, generation: int) -> str:
        """Write shard ``k`` atomically as ``shard-KKKKK-gGEN.npz``.

        Parameters
        ----------
        directory : str or os.PathLike
            The ledger's directory.
        k : int
            Shard index.
        generation : int
            The generation the file belongs to (``write_manifest`` names it).

        Returns
        -------
        str
            The file name (within ``directory``).

        Raises
        ------
        ValueError
            ``k`` not a shard index.
        OSError
            The file cannot be written.
        """
        name = f"shard-{int(k):05d}-g{int(generation)}.npz"
        self._shard(int(k)).save(os.path.join(os.fspath(directory), name))
        return name

    def write_manifest(self, directory: str | os.PathLike[str], files: list[str], *, generation: int) -> None:
        """Write the manifest naming ``files`` (one per shard), atomically; call after every shard is saved.

        Parameters
        ----------
        directory : str or os.PathLike
            The ledger's directory.
        files : list of str
            The shard file names, one per shard, in shard order.
        generation : int
            The generation of those files.

        Raises
        ------
        ValueError
            Not one file per shard.
        OSError
            The manifest cannot be written.
        """
        d = os.fspath(directory)
        if len(files) != len(self._ranges):
            raise ValueError(f"files must name one file per shard ({len(self._ranges)}), got {len(files)}")
        _write_manifest(d, self._n, self.steps, self._shard(0).options(), self._ranges, files, generation)

    @classmethod
    def from_shards(
        cls, directory: str | os.PathLike[str], files: Sequence[str | os.PathLike[str]], *, generation: int = 1
    ) -> Self:
        """The ledger of shards recorded and saved elsewhere -- data-parallel ranks or dask workers, each an
        ``IndividualAccountant`` over consecutive examples written with its ``save`` (atomic) into
        ``directory`` -- so that no process ever holds the whole ledger. ``files``: their names, in the
        examples' order. Checks that they share options and steps, writes the manifest (atomically, last,
        as ``save`` does) and returns the ledger loaded lazily (``load(directory, lazy=True)``).

        Parameters
        ----------
        directory : str or os.PathLike
            The directory holding the shard files.
        files : list of str or os.PathLike
            The shard files (names within ``directory``), in the examples' order.
        generation : int, default 1
            The generation written into the manifest, ``>= 1``.

        Returns
        -------
        ShardedLedger
            The ledger, loaded lazily.

        Raises
        ------
        ValueError
            No files, a shard whose options or steps differ from the first's, or a bad ``generation``.
        OSError
            A file cannot be read or the manifest written.
        """
        d = os.fspath(directory)
        gen = check_count("generation", generation)
        names = [os.path.basename(os.fspath(f)) for f in files]
        if not names:
            raise ValueError("files must name at least one shard file")
        ranges, opts0, steps, start = [], None, None, 0
        for f in names:
            meta = _shard_meta(os.path.join(d, f))
            opts = dict(meta["options"])
            n = int(opts.pop("num_examples"))
            if opts0 is None:
                opts0, steps = opts, int(meta["steps"])
            elif opts != opts0 or int(meta["steps"]) != steps:
                raise ValueError(
                    f"files: shard {f!r} ({meta['steps']} steps, options {opts}) differs from the "
                    f"first shard ({steps} steps, options {opts0})"
                )
            ranges.append((start, start + n))
            start += n
        assert opts0 is not None and steps is not None  # set by the first of the (non-empty) files
        _write_manifest(d, start, steps, {"num_examples": ranges[0][1], **opts0}, ranges, names, gen)
        return cls.load(d, lazy=True)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, lazy: bool = False) -> Self:
        """Read a ledger written by ``save``. ``lazy=True`` keeps the shards on disk (queries with
        ``use_dask=True`` read them chunk by chunk; recording loads a shard when it is first touched).

        Parameters
        ----------
        directory : str or os.PathLike
            The ledger's directory (``save``).
        lazy : bool, default False
            Keep the shards on disk until they are needed.

        Returns
        -------
        ShardedLedger
            The ledger.

        Raises
        ------
        ValueError
            A manifest whose shards do not tile the examples, a missing shard file, or a shard that does
            not match the manifest.
        OSError
            The manifest or a shard cannot be read.
        """
        d = os.fspath(directory)
        man = _read_manifest(d)
        shards = man["shards"]
        if (
            not shards
            or shards[0]["start"] != 0
            or shards[-1]["stop"] != man["num_examples"]
            or any(a["stop"] != b["start"] for a, b in itertools.pairwise(shards))
        ):
            raise ValueError(f"directory {d!r}: the manifest's shard ranges do not tile the examples")
        self = cls.__new__(cls)
        self._n = int(man["num_examples"])
        self._ranges = [(int(x["start"]), int(x["stop"])) for x in shards]
        opts = dict(man["shard_options"])
        opts.pop("num_examples")
        self._opts = opts
        self._files = [os.path.join(d, x["file"]) for x in shards]
        self._directory = d
        self._generation = int(man["generation"])
        self._meta = man
        self._cluster = None
        self._shards = [None] * len(shards)
        for k, f in enumerate(self._files):
            if not os.path.exists(f):
                raise ValueError(
                    f"directory {d!r}: shard file {os.path.basename(f)!r} named by the manifest is missing"
                )
            if not lazy:
                shard = self._shard(k)
                if shard.num_examples != self._ranges[k][1] - self._ranges[k][0] or shard.steps != int(man["steps"]):
                    raise ValueError(f"directory {d!r}: shard {k} does not match the manifest")
        return self


def _shard_meta(path: str) -> dict[str, Any]:
    """The options and steps saved with one shard (``IndividualAccountant.save``), without its counts."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
        meta["options"], meta["steps"]
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"files: {os.path.basename(path)!r} is not a saved IndividualAccountant: {exc}") from None
    return cast("dict[str, Any]", meta)


def _write_manifest(
    d: str,
    n: int,
    steps: int,
    opts: dict[str, Any],
    ranges: Sequence[tuple[int, int]],
    files: Sequence[str],
    generation: int,
) -> None:
    man = {
        "format": _FORMAT,
        "generation": int(generation),
        "num_examples": int(n),
        "steps": int(steps),
        "shard_options": opts,
        "shards": [{"start": s, "stop": e, "file": f} for (s, e), f in zip(ranges, files)],
    }
    _atomic_write(os.path.join(d, _MANIFEST), json.dumps(man, indent=1).encode())


def _read_manifest(d: str) -> dict[str, Any]:
    try:
        with open(os.path.join(d, _MANIFEST), "rb") as f:
            man = json.loads(f.read().decode())
    except (OSError, ValueError) as exc:
        raise ValueError(f"directory {d!r} holds no readable ShardedLedger manifest: {exc}") from None
    if man.get("format") != _FORMAT:
        raise ValueError(f"directory {d!r}: unknown manifest format {man.get('format')!r}")
    return cast("dict[str, Any]", man)


def _atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tightdp-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
