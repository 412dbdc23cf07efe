"""Privacy loss random variables: the layer below the PLD engine (``tightdp.pld``) and the mechanisms.

* ``GaussianLoss``: the Gaussian mechanism.
* ``DiscreteLoss``: finitely many atoms (pure DP, approximate DP, randomized response) and an optional atom at
  ``+inf``.
* ``LaplaceLoss``, ``PoissonLaplaceLoss``: the Laplace mechanism, alone and Poisson-subsampled.
* ``LaplaceDifferenceLoss``: the difference of two Laplace variables under a shift (report-noisy-max over two
  candidates).
* ``GaussianMixtureLoss``: mixtures of Gaussians (subsampled Gaussians, group privacy).
"""

from ._cells import gaussian_cell_masses_and_errors, gaussian_mixture_cell_masses
from .base import REL_CAP, PrivacyLoss, SelfDiscretisingLoss, difference_masses, split_errors
from .discrete import DiscreteLoss
from .gaussian import GaussianLoss
from .laplace import LaplaceLoss, PoissonLaplaceLoss
from .laplace_difference import LaplaceDifferenceLoss
from .mixture import GaussianMixtureLoss, poisson_gaussian_loss, without_replacement_gaussian_loss

__all__ = [
    "PrivacyLoss",
    "SelfDiscretisingLoss",
    "REL_CAP",
    "split_errors",
    "difference_masses",
    "GaussianLoss",
    "DiscreteLoss",
    "LaplaceLoss",
    "PoissonLaplaceLoss",
    "LaplaceDifferenceLoss",
    "GaussianMixtureLoss",
    "poisson_gaussian_loss",
    "without_replacement_gaussian_loss",
    "gaussian_mixture_cell_masses",
    "gaussian_cell_masses_and_errors",
]
