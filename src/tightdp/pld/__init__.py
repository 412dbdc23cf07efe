"""The discretised privacy-loss core: mean-preserving discretisation, FFT composition, certified curves.

Data flow: ``PrivacyLoss`` -> ``discretise`` (Gopi et al. 2021, Alg. 2, upper variant) ->
``compose`` (FFT, tilted, Chernoff window; Koskela et al. 2020, Alg. 1 / Sec. 5.5) ->
``delta_bounds`` / ``epsilon_bounds`` (Gopi et al. 2021, Thm 5.5 with every error term explicit).
"""

from .composition import ComposedPLD, chernoff_epsilon, compose, saddle_epsilon, saddle_tilt
from .curve import CurveBounds, delta_bounds, epsilon_bounds
from .discretise import DiscretisedLoss, discretise
from .hierarchy import coarsen, rebin

__all__ = [
    "DiscretisedLoss",
    "discretise",
    "ComposedPLD",
    "compose",
    "chernoff_epsilon",
    "saddle_epsilon",
    "saddle_tilt",
    "CurveBounds",
    "delta_bounds",
    "epsilon_bounds",
    "coarsen",
    "rebin",
]
