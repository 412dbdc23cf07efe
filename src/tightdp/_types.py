"""Array type aliases shared by the type annotations of the package.

``FloatArray`` is a float64 array of any shape (grids, masses, losses); ``ComplexArray`` a complex128 one
(spectra); ``IntArray`` an int64 array
(bucket codes, counts); ``ArrayLike`` whatever numpy accepts as an array argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
ComplexArray = npt.NDArray[np.complex128]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
AnyArray = npt.NDArray[Any]
ArrayLike = npt.ArrayLike

__all__ = ["AnyArray", "ArrayLike", "BoolArray", "ComplexArray", "FloatArray", "IntArray"]
