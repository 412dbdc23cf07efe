"""Canary scores and the guesses made from them.

An audit inserts ``m`` canaries; each is *in* (trained on) or *out*. The attack gives every canary
a score, higher meaning "more likely in". ``CanaryScores`` holds the scores of the in and the out
canaries; the guessing rule of a one-run audit (Steinke, Nasr, Jagielski 2023, Sec. 3) guesses
"in" for the canaries whose score is at least the ``k``-th largest of all ``m`` scores and abstains
on the rest. The threshold is a function of the pooled scores alone (what the attacker sees), so
the rule never looks at which canaries were in; only the *choice* among several ``k`` after the
fact does, and the audits correct for that (Bonferroni over the candidate ``k``).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np

from .._types import ArrayLike, FloatArray, IntArray
from .._validation import check_count, check_real_array

__all__ = ["CanaryScores", "default_guess_counts", "guess_counts", "read_scores_csv"]


@dataclass(frozen=True)
class CanaryScores:
    """Scores of the canaries that were in (``in_scores``) and out (``out_scores``); higher = "in".

    Both are non-empty 1-D arrays of finite numbers. For a one-run audit they are the scores of the
    ``m = len(in_scores) + len(out_scores)`` canaries of one run; for a multi-run audit each entry is
    one run's score of the canary, from runs with it in or out.

    Parameters
    ----------
    in_scores : array_like
        Scores of the canaries that were in (trained on): a non-empty 1-D array of finite numbers.
    out_scores : array_like
        Scores of the canaries that were out: a non-empty 1-D array of finite numbers.

    Raises
    ------
    ValueError
        If either array is empty, not 1-D real, or holds NaN or an infinity (the message names it).

    References
    ----------
    Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run", Sec. 3.
    """

    in_scores: FloatArray
    out_scores: FloatArray

    def __init__(self, *, in_scores: ArrayLike, out_scores: ArrayLike) -> None:
        a = _scores("in_scores", in_scores)
        b = _scores("out_scores", out_scores)
        object.__setattr__(self, "in_scores", a)
        object.__setattr__(self, "out_scores", b)

    @property
    def canaries(self) -> int:
        """``m``: how many canaries (in and out)."""
        return int(self.in_scores.size + self.out_scores.size)

    def counts_at(self, thresholds: ArrayLike) -> tuple[IntArray, IntArray]:
        """``(tp, fp)`` at each threshold: how many in / out scores are ``>= threshold``.

        Parameters
        ----------
        thresholds : array_like
            Real thresholds (any shape; infinities allowed).

        Returns
        -------
        tuple of ndarray
            ``(tp, fp)``, int arrays of the shape of ``thresholds``: the in and the out scores at or above each.

        Raises
        ------
        ValueError
            If ``thresholds`` is not convertible to a float array.
        """
        t = np.asarray(thresholds, float)
        tp = self.in_scores.size - np.searchsorted(np.sort(self.in_scores), t, side="left")
        fp = self.out_scores.size - np.searchsorted(np.sort(self.out_scores), t, side="left")
        return tp, fp


def _scores(name: str, values: ArrayLike) -> FloatArray:
    arr = check_real_array(name, values)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite numbers, got {arr[~np.isfinite(arr)][0]!r}")
    return arr.copy()


def default_guess_counts(m: int) -> IntArray:
    """The candidate numbers of "in" guesses tried by default: about 12 values from 1 to ``m/2``.

    Parameters
    ----------
    m : int
        The number of canaries, >= 1.

    Returns
    -------
    ndarray of int
        Distinct guess counts spaced geometrically in ``[1, max(1, m // 2)]`` (the audits divide beta among them).

    Raises
    ------
    ValueError
        If ``m`` is not a whole number >= 1.
    """
    hi = max(1, check_count("m", m) // 2)
    return np.unique(np.round(np.geomspace(1, hi, 12)).astype(int)) if hi > 1 else np.array([1])


def guess_counts(scores: CanaryScores, ks: ArrayLike) -> tuple[IntArray, IntArray, FloatArray]:
    """For each candidate ``k``: ``(r, v, threshold)`` of the rule "guess in when the score is at least the
    ``k``-th largest pooled score".

    Parameters
    ----------
    scores : CanaryScores
        The canaries' scores.
    ks : int or sequence of int
        Candidate numbers of "in" guesses, each in ``[1, m]``.

    Returns
    -------
    tuple of ndarray
        ``(r, v, threshold)``: ``r`` guesses (more than ``k`` when scores tie at the threshold), ``v`` of them
        correct (in canaries), and the threshold, one entry per ``k``.

    Raises
    ------
    ValueError
        A ``k`` that is not a whole number >= 1 or exceeds the number of canaries.

    References
    ----------
    Steinke, Nasr, Jagielski 2023, Sec. 3 (the guessing rule).
    """
    m = scores.canaries
    ks = np.asarray([check_count("guess_counts", k) for k in np.atleast_1d(ks)], dtype=int)
    if np.any(ks > m):
        raise ValueError(f"guess_counts must be at most the number of canaries {m}, got {int(ks.max())}")
    pooled = np.sort(np.concatenate([scores.in_scores, scores.out_scores]))[::-1]
    thresholds = pooled[ks - 1]
    tp, fp = scores.counts_at(thresholds)
    return (tp + fp).astype(int), tp.astype(int), thresholds


def read_scores_csv(path: str | os.PathLike[str]) -> CanaryScores:
    """Read ``score,in`` rows into ``CanaryScores``.

    A header line and ``#`` comments are allowed; ``in`` is 1/0, true/false or in/out.

    Parameters
    ----------
    path : str or path-like
        The CSV file.

    Returns
    -------
    CanaryScores
        The in and out canaries' scores, in file order.

    Raises
    ------
    ValueError
        Naming the line: a row without two columns, a score that is not a number, a membership that is not
        1/0, true/false or in/out; or a file without at least one in and one out canary.
    OSError
        If the file cannot be read.
    """
    ins: list[float] = []
    outs: list[float] = []
    first = True
    with open(path, newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh), start=1):
            if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 2:
                raise ValueError(f"scores file line {lineno}: expected 'score,in', got {','.join(row)!r}")
            s, flag = row[0].strip(), row[1].strip().lower()
            header, first = first, False
            try:
                x = float(s)
            except ValueError:
                if header:
                    continue  # a header
                raise ValueError(f"scores file line {lineno}: score {s!r} is not a number") from None
            if flag in ("1", "true", "in", "yes"):
                ins.append(x)
            elif flag in ("0", "false", "out", "no"):
                outs.append(x)
            else:
                raise ValueError(f"scores file line {lineno}: membership {row[1]!r} must be 1/0, true/false or in/out")
    if not ins or not outs:
        raise ValueError(
            f"scores file {path}: needs at least one 'in' and one 'out' canary (got {len(ins)} in, {len(outs)} out)"
        )
    return CanaryScores(in_scores=ins, out_scores=outs)
