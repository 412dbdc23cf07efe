"""The state and the internal queries the parts of ``IndividualAccountant`` share, declared once.

``IndividualAccountant`` (``accountant``) is assembled from mixins by subject (``_pld_queries``, ``_rdp_gdp``,
``_filters``, ``_persistence``); each reads the ledger the constructor sets up and calls queries another
mixin defines. This base declares those attributes and methods (with their types) so that every mixin is
type-checked against the same description; it defines nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._types import AnyArray, FloatArray

if TYPE_CHECKING:
    from ..bounds import Bounds, Kind

__all__: list[str] = []


class _LedgerState:
    """Attributes set by ``IndividualAccountant.__init__`` and the queries the mixins call on each other."""

    _n: int  # number of examples
    _B: int  # number of buckets
    _q: float  # Poisson sampling rate
    _sigma: float  # noise multiplier
    _clip: float  # clip norm
    _steps: int
    _counts: AnyArray  # (N, B + 1) int32 bucket counts
    _sumsq: FloatArray | None  # per-example sums of squared ratios (sampling rate 1)
    _edges: FloatArray | None  # the paper grid's nominal bucket ratios
    _cache: dict[Any, Any]
    _mesh: float | None
    _resolution: float
    _missing: str
    _frac_min: float
    _code_dtype: type[np.unsignedinteger[Any]]
    _approx: AnyArray | None  # per-example count of approximated steps ("last-seen")
    _last: AnyArray | None  # per-example last bucket ("last-seen")
    _last_r: FloatArray | None  # per-example last ratio ("last-seen", sampling rate 1)
    _ybuf: FloatArray  # scratch buffers of ``_codes``
    _cbuf: FloatArray

    if TYPE_CHECKING:

        def options(self) -> dict[str, Any]: ...

        def _ledger(self) -> AnyArray: ...

        def _codes(self, arr: FloatArray, out: AnyArray) -> float: ...

        def mus(self) -> FloatArray: ...

        def rdp_curves(self, orders: Any = None) -> tuple[FloatArray, FloatArray]: ...

        def gdp_mus(self, *, epsilon_max: float | None = None, points: int = ..., delta_min: float = ...) -> Bounds: ...

        def worst_case_epsilon(self, delta: float) -> Bounds: ...

        def _kind(self) -> Kind: ...

        def _ratio_of(self, b: int) -> float: ...

        def _rdp_epsilons(self, delta: float) -> Bounds: ...

        def _gdp_fit_epsilons(self, delta: float) -> Bounds: ...

        def _gdp_fit_counts(
            self, counts: AnyArray, grid: FloatArray, delta_min: float
        ) -> tuple[FloatArray, FloatArray]: ...

        def _delta_curves(self, counts: AnyArray, grid: FloatArray) -> FloatArray: ...

        def _eps_counts(
            self, counts: AnyArray, delta: float, h: float | None = None, *, fallback: bool = True
        ) -> tuple[FloatArray, dict[str, Any]]: ...
