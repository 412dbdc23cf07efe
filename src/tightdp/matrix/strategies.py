"""Strategy matrices ``C`` of the matrix mechanism (DP-FTRL, banded MF, BLT) as frozen, validated objects.

The matrix mechanism trains on ``A x`` from the noisy release ``C x + z`` (``z ~ N(0, sigma^2 I)``; the
decoder ``B = A C^-1`` is post-processing), so privacy depends on ``C`` only, through the Gram matrix
``M = C^T C`` and, for amplification, the row structure of ``C`` (Choquette-Choo et al. 2023,
"(Amplified) Banded Matrix Factorization", arXiv 2306.08153, Sec. 2). Each strategy here is the user's
vocabulary for what ran; ``matrix(n)`` materialises its ``m x n`` matrix (row ``t`` released at step
``t`` for the square causal strategies) and the Toeplitz ones also give their first column
``toeplitz_coefs(n)`` for the closed forms of ``tightdp.matrix.sensitivity``.

* ``Identity``: DP-SGD (independent noise);
* ``BinaryTree``: tree aggregation (DP-FTRL, Kairouz et al. 2021): one row per dyadic node;
* ``BandedToeplitz``: BandMF's Toeplitz strategy from its column ``c_col`` and band count ``num_bands``;
* ``BLT``: buffered linear Toeplitz (McMahan et al. 2024, arXiv 2408.08868), jax_privacy's
  ``BufferedToeplitz(buf_decay, output_scale)``: ``c_0 = 1``, ``c_t = sum_j output_scale_j buf_decay_j^(t-1)``;
* ``DenseStrategy``: any lower-triangular ``n x n`` array (or any ``m x n`` array with
  ``causal=False``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, NoReturn, cast

import numpy as np

from .._caches import register as _register_cache
from .._types import FloatArray
from .._validation import check_count
from ._pattern_norms import PatternNormLaw, tree_norm_law

__all__ = [
    "BLT",
    "BandedInverseToeplitz",
    "BandedToeplitz",
    "BinaryTree",
    "DenseStrategy",
    "Identity",
    "Strategy",
    "as_strategy",
    "strategy_from_dict",
]

#: largest number of steps a strategy is materialised for (an n x n float matrix: 8 n^2 bytes)
MAX_STEPS = 20_000


def reject(message: str) -> NoReturn:
    """Raise the ``ValueError`` every bad input gets in tightdp (wrong types included: one exception to catch)."""
    raise ValueError(message)


def _float_vector(name: str, values: Any, *, min_len: int = 1) -> FloatArray:
    if isinstance(values, (str, bytes)):
        reject(f"{name} must be a sequence of numbers, got {values!r}")
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if a.ndim != 1 or a.size < min_len:
        raise ValueError(
            f"{name} must be a one-dimensional sequence of at least {min_len} numbers, got shape {a.shape}"
        )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf), got {values!r}")
    return a


def _check_steps(n: Any) -> int:
    steps = check_count("steps", n)
    if steps > MAX_STEPS:
        raise ValueError(f"steps must be at most {MAX_STEPS} to materialise a strategy matrix, got {steps}")
    return steps


class Strategy(ABC):
    """A strategy matrix ``C`` (abstract). Subclasses are frozen keyword-only dataclasses; their overriding
    methods share the base methods' docstrings (``__init_subclass__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and not getattr(member, "__doc__", None):
                base = getattr(Strategy, name, None)
                if base is not None and base.__doc__:
                    member.__doc__ = base.__doc__

    #: name in ``to_dict`` / the statement
    type_name: ClassVar[str] = ""
    #: whether ``C`` is square lower-triangular (row ``t`` released at step ``t``)
    causal: ClassVar[bool] = True

    @abstractmethod
    def matrix(self, n: int) -> FloatArray:
        """The ``m x n`` matrix for ``n`` steps (``m = n`` for causal strategies).

        Parameters
        ----------
        n : int
            The number of steps (``1 <= n <= MAX_STEPS``; a ``DenseStrategy`` only its own column count).

        Returns
        -------
        FloatArray
            The matrix ``C`` (read-only for a ``DenseStrategy``).

        Raises
        ------
        ValueError
            ``n`` out of range.
        """

    def toeplitz_coefs(self, n: int) -> FloatArray | None:
        """The first column ``c_0 .. c_(n-1)`` of a lower-triangular Toeplitz ``C``; ``None`` if not Toeplitz.

        Parameters
        ----------
        n : int
            The number of steps (``1 <= n <= MAX_STEPS``; a ``DenseStrategy`` only its own column count).

        Returns
        -------
        FloatArray or None
            The coefficients, or ``None``.

        Raises
        ------
        ValueError
            ``n`` out of range.
        """
        return None

    def bands(self, n: int) -> int | None:
        """The number of bands ``b`` (``C[t, s] = 0`` unless ``0 <= t - s < b``) of a causal ``C``, else ``None``.

        Parameters
        ----------
        n : int
            The number of steps (``1 <= n <= MAX_STEPS``; a ``DenseStrategy`` only its own column count).

        Returns
        -------
        int or None
            ``b``, or ``None`` for a non-causal ``C``.

        Raises
        ------
        ValueError
            ``n`` out of range.
        """
        if not self.causal:
            return None
        c = self.matrix(n)
        t, s = np.nonzero(c)
        return int(np.max(t - s)) + 1 if t.size else 1

    def pattern_norm_law(self, n: int, q: float) -> PatternNormLaw | None:
        """The law of ``||C x||^2`` for a 0/1 pattern ``x`` of ``n`` independent ``Bernoulli(q)`` bits, with masses
        at most the true ones (``tightdp.matrix._pattern_norms``), where this strategy can compute it within a
        second; ``None`` otherwise (the default). ``PoissonSampling`` builds its pattern-norm mixture from it.

        Parameters
        ----------
        n : int
            The number of steps.
        q : float
            The Poisson rate, in ``(0, 1]``.

        Returns
        -------
        PatternNormLaw or None
            The law, or ``None``.

        Raises
        ------
        ValueError
            ``n`` out of range or ``q`` outside ``(0, 1]``.
        """
        return None

    def describe(self) -> str:
        """One phrase for the privacy statement.

        Returns
        -------
        str
            The phrase.
        """
        return self.type_name

    def to_dict(self) -> dict[str, Any]:
        """The strategy as a JSON-ready dict (``strategy_from_dict`` rebuilds it).

        Returns
        -------
        dict
            ``{"type": type_name, **fields}``.
        """
        out: dict[str, Any] = {"type": self.type_name}
        for k, v in self.__dict__.items():
            out[k] = v.tolist() if isinstance(v, np.ndarray) else (list(v) if isinstance(v, tuple) else v)
        return out


def _toeplitz_matrix(coefs: FloatArray) -> FloatArray:
    n = coefs.size
    idx = np.subtract.outer(np.arange(n), np.arange(n))
    return np.where(idx >= 0, coefs[np.clip(idx, 0, n - 1)], 0.0)


@dataclass(frozen=True, kw_only=True)
class Identity(Strategy):
    """``C = I``: DP-SGD, independent noise at every step."""

    type_name: ClassVar[str] = "identity"

    def matrix(self, n: int) -> FloatArray:
        return np.eye(_check_steps(n))

    def toeplitz_coefs(self, n: int) -> FloatArray:
        c = np.zeros(_check_steps(n))
        c[0] = 1.0
        return c

    def bands(self, n: int) -> int:
        return 1


@dataclass(frozen=True, kw_only=True)
class BinaryTree(Strategy):
    """Tree aggregation (Kairouz et al. 2021, DP-FTRL): one row per node of the complete binary tree over
    ``2^h >= n`` leaves (``h`` levels above the leaves), a row being the indicator of the node's leaves;
    every column has ``h + 1`` ones. Not square: no band structure (``bands`` is ``None``)."""

    type_name: ClassVar[str] = "binary_tree"
    causal: ClassVar[bool] = False

    def pattern_norm_law(self, n: int, q: float) -> PatternNormLaw | None:
        # ||C x||^2 = sum over nodes of (participations below the node)^2: a dynamic program over the tree
        return tree_norm_law(_check_steps(n), q)

    def matrix(self, n: int) -> FloatArray:
        n = _check_steps(n)
        h = (n - 1).bit_length()  # ceil(log2 n) in integers: the levels above the leaves
        rows = []
        for level in range(h + 1):
            width = 2**level
            for start in range(0, n, width):
                r = np.zeros(n)
                r[start : start + width] = 1.0
                rows.append(r)
        return np.array(rows)


@dataclass(frozen=True, kw_only=True)
class BandedToeplitz(Strategy):
    """BandMF's banded Toeplitz strategy: ``C[t, s] = c_col[t - s]`` for ``0 <= t - s < bands``, else 0.

    Parameters
    ----------
    c_col : sequence of float
        The first column's leading entries (jax_privacy's ``strategy_coef``); entries beyond ``bands`` must be
        zero or absent; ``c_col[0]`` must be non-zero (``C`` invertible).
    num_bands : int, optional
        The band count ``b``; defaults to ``len(c_col)``.

    Raises
    ------
    ValueError
        A non-finite or empty ``c_col``, ``c_col[0] == 0``, ``num_bands < 1`` or non-zero entries beyond it.
    """

    type_name: ClassVar[str] = "banded_toeplitz"
    c_col: tuple[float, ...]
    num_bands: int | None = field(default=None)

    def __post_init__(self) -> None:
        c = _float_vector("c_col", self.c_col)
        b = c.size if self.num_bands is None else check_count("num_bands", self.num_bands)
        if c[0] == 0.0:
            raise ValueError("c_col[0] must be non-zero (the strategy matrix must be invertible)")
        if np.any(c[b:] != 0.0):
            raise ValueError(f"c_col has non-zero entries beyond num_bands={b}: {c[b:].tolist()!r}")
        object.__setattr__(self, "c_col", tuple(float(v) for v in c[:b]))
        object.__setattr__(self, "num_bands", b)

    def toeplitz_coefs(self, n: int) -> FloatArray:
        n = _check_steps(n)
        out = np.zeros(n)
        m = min(n, len(self.c_col))
        out[:m] = self.c_col[:m]
        return out

    def matrix(self, n: int) -> FloatArray:
        return _toeplitz_matrix(self.toeplitz_coefs(n))

    def bands(self, n: int) -> int:
        return min(cast(int, self.num_bands), _check_steps(n))

    def describe(self) -> str:
        return f"banded Toeplitz, {self.num_bands} bands"


@dataclass(frozen=True, kw_only=True)
class BLT(Strategy):
    """Buffered linear Toeplitz strategy (McMahan et al. 2024; jax_privacy ``BufferedToeplitz``):
    ``C`` lower-triangular Toeplitz with ``c_0 = 1`` and ``c_t = sum_j output_scale_j buf_decay_j^(t-1)``.

    Parameters
    ----------
    buf_decay : sequence of float
        The buffers' decays, each in ``[0, 1]``.
    output_scale : sequence of float
        The buffers' output scales (same length).

    Raises
    ------
    ValueError
        Lengths differ or are zero, a ``buf_decay`` outside ``[0, 1]`` or non-finite parameters.
    """

    type_name: ClassVar[str] = "blt"
    buf_decay: tuple[float, ...]
    output_scale: tuple[float, ...]

    def __post_init__(self) -> None:
        d = _float_vector("buf_decay", self.buf_decay)
        w = _float_vector("output_scale", self.output_scale)
        if d.size != w.size:
            raise ValueError(f"buf_decay and output_scale must have the same length, got {d.size} and {w.size}")
        if np.any(d < 0.0) or np.any(d > 1.0):
            raise ValueError(f"buf_decay must lie in [0, 1], got {d.tolist()!r}")
        object.__setattr__(self, "buf_decay", tuple(float(v) for v in d))
        object.__setattr__(self, "output_scale", tuple(float(v) for v in w))

    def toeplitz_coefs(self, n: int) -> FloatArray:
        n = _check_steps(n)
        d, w = np.array(self.buf_decay), np.array(self.output_scale)
        powers = np.arange(n - 1, dtype=float)
        with np.errstate(under="ignore"):
            tail = (d[None, :] ** powers[:, None] * w[None, :]).sum(axis=1)
        return np.concatenate([[1.0], tail])

    def matrix(self, n: int) -> FloatArray:
        return _toeplitz_matrix(self.toeplitz_coefs(n))

    def bands(self, n: int) -> int:
        c = self.toeplitz_coefs(n)
        nz = np.nonzero(c)[0]
        return int(nz[-1]) + 1

    def describe(self) -> str:
        return f"BLT with {len(self.buf_decay)} buffers"


@_register_cache
@lru_cache(maxsize=32)
def _inverse_series(noising_coef: tuple[float, ...], n: int) -> FloatArray:
    """The first ``n`` coefficients of ``1 / a(z)`` for the polynomial ``a = noising_coef`` (``a_0 != 0``), by the
    recurrence ``c_t = -(sum_(k >= 1) a_k c_(t-k)) / a_0`` (jax_privacy's ``inverse_coef``); memoised, as every
    sampler asks for them several times. Raises ``ValueError`` when the series overflows."""
    a = np.array(noising_coef[:n])
    c = np.zeros(n)
    c[0] = 1.0 / a[0]
    tail = a[1:]
    with np.errstate(over="raise", invalid="raise"):
        try:
            for t in range(1, n):
                k = min(t, tail.size)
                c[t] = -float(tail[:k] @ c[t - 1 :: -1][:k]) / a[0]
        except FloatingPointError:
            raise ValueError(
                f"noising_coef's inverse series overflows within {n} steps (C^(-1) is far from well conditioned)"
            ) from None
    c.flags.writeable = False
    return c


@dataclass(frozen=True, kw_only=True)
class BandedInverseToeplitz(Strategy):
    """A strategy whose *inverse* is banded lower-triangular Toeplitz: ``C^(-1)`` has first column
    ``noising_coef`` (jax_privacy's noising coefficients; the banded inverse square root, BISR, of arXiv
    2505.12128, ``toeplitz.banded_inverse_square_root_noising_coefs``; DP-lambda-CGD, arXiv 2601.22334, is
    ``(1, -lambda)``, the same ``C`` as ``BLT(buf_decay=[lambda], output_scale=[lambda])``). ``C`` is lower-triangular
    Toeplitz too, its coefficients the inverse series ``c_0 = 1 / a_0``, ``c_t = -(sum_(k >= 1) a_k c_(t-k)) /
    a_0``, computed in double precision by that recurrence (as jax_privacy's ``inverse_coef``); the strategy
    accounted is the computed matrix. Generally not banded (``bands`` counts up to its last non-zero coefficient).

    Parameters
    ----------
    noising_coef : sequence of float
        The first column's leading entries of ``C^(-1)``; ``noising_coef[0]`` must be non-zero.

    Raises
    ------
    ValueError
        An empty or non-finite ``noising_coef``, or ``noising_coef[0] == 0``.
    """

    type_name: ClassVar[str] = "banded_inverse_toeplitz"
    noising_coef: tuple[float, ...]

    def __post_init__(self) -> None:
        a = _float_vector("noising_coef", self.noising_coef)
        if a[0] == 0.0:
            raise ValueError("noising_coef[0] must be non-zero (C^(-1) invertible)")
        object.__setattr__(self, "noising_coef", tuple(float(v) for v in a))

    def toeplitz_coefs(self, n: int) -> FloatArray:
        return _inverse_series(self.noising_coef, _check_steps(n)).copy()

    def matrix(self, n: int) -> FloatArray:
        return _toeplitz_matrix(self.toeplitz_coefs(n))

    def bands(self, n: int) -> int:
        nz = np.nonzero(self.toeplitz_coefs(n))[0]
        return int(nz[-1]) + 1

    def describe(self) -> str:
        return f"banded-inverse Toeplitz ({len(self.noising_coef)} noising coefficients)"


@dataclass(frozen=True, kw_only=True, eq=False)
class DenseStrategy(Strategy):
    """Any strategy matrix given as an array: lower-triangular ``n x n`` (``causal=True``, the default), or
    any ``m x n`` matrix (``causal=False``: no band structure, so no amplification by cyclic sampling).

    Parameters
    ----------
    array : array_like
        The ``m x n`` matrix (at most ``MAX_STEPS`` columns).
    lower_triangular : bool, optional
        Whether it is square lower-triangular, row ``t`` released at step ``t`` (default ``True``).

    Raises
    ------
    ValueError
        Not a finite two-dimensional array, not square lower-triangular when causal, an all-zero column.
    """

    type_name: ClassVar[str] = "dense"
    array: Any
    lower_triangular: bool = True

    def __post_init__(self) -> None:
        try:
            a = np.array(self.array, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("array must be a two-dimensional array of numbers") from None
        if a.ndim != 2 or a.size == 0:
            raise ValueError(f"array must be a non-empty two-dimensional array, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("array must be finite (no NaN or inf)")
        if a.shape[1] > MAX_STEPS:
            raise ValueError(f"array must have at most {MAX_STEPS} columns, got {a.shape[1]}")
        if self.lower_triangular:
            if a.shape[0] != a.shape[1]:
                raise ValueError(f"array must be square when lower_triangular=True, got shape {a.shape}")
            if np.any(np.triu(a, 1) != 0.0):
                raise ValueError(
                    "array must be lower-triangular (a row may not use a later step's gradient); "
                    "pass lower_triangular=False for a non-causal strategy"
                )
        if np.any(np.all(a == 0.0, axis=0)):
            raise ValueError("array has an all-zero column (a step whose gradient is never released)")
        a.setflags(write=False)
        object.__setattr__(self, "array", a)

    @property
    def causal(self) -> bool:  # type: ignore[override]  # a field here, a class constant elsewhere
        """Whether the array is square lower-triangular (``lower_triangular``)."""
        return self.lower_triangular

    @property
    def steps(self) -> int:
        """The number of columns (steps) of the array."""
        return int(self.array.shape[1])

    def matrix(self, n: int) -> FloatArray:
        n = check_count("steps", n)
        if n != self.steps:
            raise ValueError(f"steps must equal the strategy's {self.steps} columns, got {n}")
        return cast(FloatArray, self.array)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DenseStrategy)
            and self.lower_triangular == other.lower_triangular
            and np.array_equal(self.array, other.array)
        )

    def __hash__(self) -> int:
        return hash((self.array.shape, self.array.tobytes(), self.lower_triangular))

    def describe(self) -> str:
        return f"dense {self.array.shape[0]}x{self.array.shape[1]} strategy"


_TYPES = {
    cls.type_name: cls for cls in (Identity, BinaryTree, BandedToeplitz, BLT, BandedInverseToeplitz, DenseStrategy)
}


def strategy_from_dict(data: dict[str, Any]) -> Strategy:
    """Rebuild a strategy from ``Strategy.to_dict()`` output (e.g. a JSON strategy file).

    Parameters
    ----------
    data : dict
        ``{"type": name, **fields}`` with ``name`` one of the strategies' ``type_name``.

    Returns
    -------
    Strategy
        The strategy.

    Raises
    ------
    ValueError
        An unknown ``type`` or bad fields.
    """
    if not isinstance(data, dict) or data.get("type") not in _TYPES:
        raise ValueError(f"strategy must be a dict with 'type' one of {sorted(_TYPES)}, got {data!r}")
    kw = {k: v for k, v in data.items() if k != "type"}
    try:
        return _TYPES[data["type"]](**kw)
    except TypeError as exc:
        raise ValueError(f"strategy {data['type']!r}: {exc}") from None


def as_strategy(obj: Any, *, bands: int | None = None) -> Strategy:
    """A ``Strategy`` from what a user holds: a ``Strategy``; jax_privacy's ``BufferedToeplitz`` (duck-typed on
    ``buf_decay`` / ``output_scale``; jax_privacy is not imported); a one-dimensional ``c_col`` array (banded
    Toeplitz with ``bands``, default its length); or a two-dimensional lower-triangular array.

    Parameters
    ----------
    obj : Strategy, BufferedToeplitz, dict, or array
        What the user holds.
    bands : int, optional
        The band count of a ``c_col`` vector (default its length).

    Returns
    -------
    Strategy
        The strategy.

    Raises
    ------
    ValueError
        Anything else.
    """
    if isinstance(obj, Strategy):
        return obj
    if hasattr(obj, "buf_decay") and hasattr(obj, "output_scale"):
        return BLT(
            buf_decay=tuple(np.asarray(obj.buf_decay, float).ravel().tolist()),
            output_scale=tuple(np.asarray(obj.output_scale, float).ravel().tolist()),
        )
    if isinstance(obj, dict):
        return strategy_from_dict(obj)
    try:
        a = np.asarray(obj, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"strategy must be a Strategy, a c_col vector or a matrix, got {obj!r}") from None
    if a.ndim == 1:
        return BandedToeplitz(c_col=tuple(a.tolist()), num_bands=bands)
    if a.ndim == 2:
        return DenseStrategy(array=a)
    raise ValueError(f"strategy must be a Strategy, a c_col vector or a matrix, got an array of shape {a.shape}")
