"""Saving and loading the per-example ledger: one ``.npz`` file, written atomically.

``IndividualAccountant`` inherits ``save`` and ``load``. Format 2 stores the options, the step count,
the bucket counts, the sums of squares (``sampling_rate = 1``) and the recording state (the lowest
position of a recorded ratio within its bucket, the last-seen buckets); format-1 files load too.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from typing import Any, Self

import numpy as np

from .._types import AnyArray
from .._validation import check_count
from ._state import _LedgerState

__all__: list[str] = []

_FORMAT = "tightdp.IndividualAccountant/2"
_FORMATS_READ = ("tightdp.IndividualAccountant/1", _FORMAT)


class _Persistence(_LedgerState):
    """The persistence half of ``IndividualAccountant``: ``save``, ``load`` and the extra state."""

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ledger atomically (temporary file in the same directory, then ``os.replace``).

        Parameters
        ----------
        path : str or os.PathLike
            The ``.npz`` file to write (replaced if it exists).

        Raises
        ------
        OSError
            The file cannot be written (the previous file, if any, is left as it was).
        """
        path = os.fspath(path)
        meta = json.dumps({"format": _FORMAT, "options": self.options(), "steps": self._steps})
        buf = io.BytesIO()
        arrays = {"counts": self._ledger(), "meta": np.frombuffer(meta.encode(), dtype=np.uint8)}
        if self._sumsq is not None:
            arrays["sumsq"] = self._sumsq
        arrays.update(self._extra_state())
        np.savez(buf, **arrays)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".tightdp-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):  # best effort: never mask the original error
                os.unlink(tmp)
            raise

    def _extra_state(self) -> dict[str, AnyArray]:
        """Recording state beyond the counts (format 2): per-bucket lowest scaled ratio, last-seen data."""
        out = {"frac_min": np.array([self._frac_min])}
        if self._last is not None:
            assert self._approx is not None  # kept with _last ("last-seen")
            out.update(last=self._last, approx=self._approx)
            if self._last_r is not None:
                out["last_r"] = self._last_r
        return out

    def _set_extra_state(self, z: Any, fmt: str) -> None:
        """Inverse of ``_extra_state`` (validated). A format-1 ledger has no recorded positions: bucket
        ``b`` then stands for every ratio above ``(b - 1) / B`` (``b = ceil(y)``, so ``y > b - 1``)."""
        if fmt == _FORMATS_READ[0] or "frac_min" not in z:
            self._frac_min = 0.0
            return
        fm = np.array(z["frac_min"], dtype=float).reshape(-1)
        if fm.shape != (1,) or not 0.0 <= fm[0] <= 1.0:
            raise ValueError("saved bucket positions do not match the saved options")
        self._frac_min = float(fm[0])
        if self._last is not None:
            last, approx = np.array(z["last"]), np.array(z["approx"])
            if last.shape != (self._n,) or approx.shape != (self._n,) or np.any(last > self._B) or np.any(approx < 0):
                raise ValueError("saved last-seen state does not match the saved options")
            self._last = last.astype(self._code_dtype)
            self._approx = approx.astype(np.int32)
            if self._last_r is not None:
                self._last_r = np.array(z["last_r"], dtype=float)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """Read a ledger written by ``save`` (exact round-trip; format-1 files load too).

        Parameters
        ----------
        path : str or os.PathLike
            A file written by ``save``.

        Returns
        -------
        IndividualAccountant
            The ledger, equal (``==``) to the one saved.

        Raises
        ------
        ValueError
            Not a saved ledger, an unknown format, or contents inconsistent with the saved options.
        """
        try:
            with np.load(os.fspath(path), allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                counts = np.array(z["counts"])
                sumsq = np.array(z["sumsq"]) if "sumsq" in z.files else None
                extra = {k: np.array(z[k]) for k in ("frac_min", "last", "approx", "last_r") if k in z.files}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"path {os.fspath(path)!r} is not a saved IndividualAccountant: {exc}") from None
        if meta.get("format") not in _FORMATS_READ:
            raise ValueError(f"path {os.fspath(path)!r} has unknown format {meta.get('format')!r}")
        acc = cls(**meta["options"])
        try:
            acc._set_extra_state(extra, meta["format"])
        except KeyError as exc:
            raise ValueError(f"path {os.fspath(path)!r}: saved ledger lacks {exc}") from None
        if counts.shape != acc._counts.shape or counts.dtype != np.int32 or np.any(counts < 0):
            raise ValueError("saved bucket counts do not match the saved options")
        if (sumsq is None) != (acc._sumsq is None) or (sumsq is not None and sumsq.shape != (acc._n,)):
            raise ValueError("saved GDP sums do not match the saved options")
        steps = check_count("steps", meta["steps"], minimum=0)
        if np.any(counts.sum(axis=1, dtype=np.int64) != steps):
            raise ValueError("saved bucket counts do not add up to the saved number of steps")
        acc._counts = counts
        acc._sumsq = sumsq
        acc._steps = steps
        return acc
