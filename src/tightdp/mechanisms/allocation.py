"""Random allocation ("balls and bins"): each record is used in exactly ``k`` of ``t`` steps.

One epoch of ``t`` Gaussian steps (noise ``sigma`` per step, unit sensitivity) in
which every record contributes to ``num_selected = k`` steps chosen uniformly at
random (Chua et al. 2024, "Balls-and-bins sampling for DP-SGD", arXiv 2412.16802;
Feldman & Shenfeld 2025, "Privacy amplification by random allocation",
arXiv 2502.08202). Output of the epoch: ``x in R^t``.

**k = 1, remove direction** (the differing record is present in ``P``, absent in ``Q``):
``P = (1/t) sum_i N(e_i, sigma^2 I)`` and ``Q = N(0, sigma^2 I)``, so the likelihood ratio is

    S(x) = dP/dQ (x) = (1/t) sum_i W_i,    W_i = exp((2 x_i - 1) / (2 sigma^2)),

and the epoch's privacy loss is ``log S`` (Feldman & Shenfeld 2026, "Efficient
privacy loss accounting for subsampling and random allocation", arXiv
2602.17284: the PLD of random allocation as a log-sum-exp of ``t`` one-step
losses, realised by a ``t``-wise convolution in the exponentiated domain). The
add direction is the same pair with ``P`` and ``Q`` exchanged. Under ``Q`` the
``W_i`` are i.i.d. and ``E_Q[W_i] = 1``; under ``P`` (by symmetry) one of them
has the law of ``W`` under ``N(1, sigma^2)``.

**How this module certifies both ends (no coupling term).** Write
``(P_1, Q_1) = (N(1, sigma^2), N(0, sigma^2))`` for one coordinate. If a discrete
pair ``(P_1', Q_1')`` Blackwell-dominates ``(P_1, Q_1)`` (``P_1 = K P_1'``,
``Q_1 = K Q_1'`` for a Markov kernel ``K``), applying ``K`` to every coordinate
turns the random-allocation pair built from ``(P_1', Q_1')`` into the true one,
so the former dominates the latter; and a garbling of ``(P_1, Q_1)`` yields a
dominated random-allocation pair (Blackwell; Koskela et al. 2023, App. C.6). Hence:

1. *per coordinate*, on the lattice ``W in {0, eta, 2 eta, ...}``: the
   **dominating** pair splits each cell ``(j eta, (j+1) eta]`` of the likelihood
   ratio onto its two end points (a mean-preserving spread, the connect-the-dots
   construction of Doroshenko et al. 2022 applied to the ratio instead of its
   logarithm; the cell above the last lattice point is split onto that point and
   ``+inf``, or, where the lattice is capped, accounted on geometric cells past it, and the add
   direction's bottom cell likewise: ``tightdp.mechanisms._allocation_tail``, with its proof); the
   **dominated** pair merges neighbouring cells so that each
   merged likelihood ratio is exactly a lattice point (a garbling; the
   merge-to-the-grid sweep of ``tightdp.pld.dominance``);
2. *per epoch*: for a pair built from lattice-valued ratios, ``t S`` is a sum of
   ``t`` independent lattice variables (``t - 1`` drawn from ``Q_1'`` and one from
   ``P_1'`` for the ``P``-law of the remove direction; ``t`` from ``Q_1'`` for the
   add direction), computed exactly up to the certified FFT round-off and
   aliasing of ``tightdp.pld.compose``; the FFT's round-off is an absolute floor (about 1e-16 of the
   largest mass), so the tail that decides a tiny delta is computed a second time with an exponential
   tilt (``compose(tilt=theta)``, whose floor is in tilted units) and every atom keeps the estimate with
   the smaller certified error (``_sum_law``);
3. *onto the privacy-loss grid* ``h Z``: the same spread (upper) and merge
   (lower) once more, now between the points ``e^{ih}`` of ``S``, which gives
   ``DiscretisedLoss`` objects the composition engine composes over epochs.

Every operation is either a Blackwell step (spread or garbling of a valid
pair) or, at the very end, a first-order move of the ``P``-law of the loss in
the safe direction (rounding of float edges, a final merged carry that is not
on the grid); ``delta(eps) = E_P[(1 - e^{eps - L})_+]`` of a composition is
non-decreasing in each epoch's loss, so those keep the bounds. Floating-point
error of the cell masses, of the spreads and of the FFT is carried as an
``l1`` error (``tv_error``), which the engine pays on both sides.

**k > 1.** For ``num_selected = k`` with ``1 < k < t`` the upper bound uses the
k-to-1 reduction of Feldman & Shenfeld (2502.08202; the decomposition that their
pld-accounting 2.0 implements for 2602.17284 — its value for t = 10, k = 3, sigma 1,
delta 1e-5, [5.4773, 5.4801], contains tightdp's upper end 5.4786):
``k``-out-of-``t`` allocation is dominated by the composition of ``k - r``
allocations of one out of ``floor(t/k)`` steps and ``r = t mod k`` allocations of
one out of ``ceil(t/k)``. Feldman & Shenfeld prove this for the non-adaptive pair;
it covers adaptive steps through the domination of the adaptive pair by the
non-adaptive one ("Adaptive steps" below). The lower bound is the larger of two post-processings:
``sum_i x_i ~ N(k, t sigma^2)`` against ``N(0, t sigma^2)``, a Gaussian with
``mu = k / (sigma sqrt(t))``, and ``max_i x_i`` (``max_statistic_pld(shifted=k)``); both loose,
reported as such. ``k = t`` is the
Gaussian mechanism composed ``t`` times, exactly ``sqrt(t)/sigma``-GDP, and
``t = 1`` is one Gaussian step.

**Adaptive steps (DP-SGD).** Everything above is about the *non-adaptive* pair,
in which the target's clipped gradient is the same unit vector at every step.
DP-SGD is adaptive: step ``s`` releases ``x_s = f_s(x_<s) + 1[s in U] g_s(x_<s) + Z_s``
with ``||g_s|| <= 1``, ``Z_s ~ N(0, sigma^2 I_d)`` and ``U`` the random set of steps
the target joins, drawn independently of the data (any law: ``k`` of ``t`` per
epoch, fresh each epoch, or one slot repeated every cycle as in
``tightdp.schemes.cyclic_allocation_epsilon``). Claim: for every ``a >= 0`` both
``H_a(P||Q)`` and ``H_a(Q||P)`` are at most those of the non-adaptive pair (so the
upper bounds here hold for adaptive DP-SGD). Proof. Subtracting ``f_s`` is the
same invertible map under both laws, so take ``f_s = 0``. Let ``u_s`` be a unit
vector fixed by ``x_<s`` (``g_s / ||g_s||``, or any one if ``g_s = 0``),
``y_s = <u_s, x_s>`` and ``n_s = ||g_s||``. By the chain rule of conditional
densities ``L = dP/dQ = E_U[prod_{s in U} M_s]`` with
``M_s = exp((n_s y_s - n_s^2 / 2) / sigma^2)``; under ``Q`` each ``y_s`` is
``N(0, sigma^2)`` independently of ``x_<s``. ``L`` is affine in each ``M_s`` with
non-negative coefficients fixed by the other factors, and both divergences are
``E_Q[phi(L)]`` with ``phi`` convex (``(L - a)_+``, and ``(1 - a L)_+`` for
``H_a(Q||P)``). For ``n <= 1``, ``M_1`` has the law of ``M_n M'`` with ``M'`` an
independent log-normal of mean 1, so ``M_1`` dominates ``M_n`` in convex order.
Backward induction on ``s``: let ``W_s`` be the expected ``phi(L)`` given
``x_<=s`` when every later step has ``n = 1``; it is ``E[phi(affine in the
later M's)]``, a convex function of each of the current factors. Given
``x_<s``, step ``s`` chooses ``n_s`` and draws a fresh ``y_s``; replacing
``M_{n_s}`` by ``M_1`` can only raise ``E[W_s]`` (convex order). So no adaptive
choice of ``(n_s)`` beats ``n_s = 1`` for every ``s``, which is the non-adaptive
pair with all ``y_s`` i.i.d. ``N(0, sigma^2)`` under ``Q``. The k-to-1 reduction
of 2502.08202 is a statement about that non-adaptive pair, so it covers adaptive
steps through this claim. Lower bounds need no argument: the non-adaptive pair is
attained by a pair of data sets (one coordinate, the target's gradient ``+1``
at every step, every other record's 0).

**Range.** The ratio's tail under ``N(1, sigma^2)`` reaches ``exp(z / sigma + 1 / (2 sigma^2))``,
past the longest lattice (2e6 points) once ``sigma`` falls below about 0.6; the remove direction then
accounts the ratios past the lattice on geometric cells, and the add direction the event that every
coordinate lies in the bottom cell (``_allocation_tail``), so noise down to 0.2 is realised where the
epoch has at most 4096 steps (``realisable``: one epoch in 3 to 26 s and 0.6 to 3.7 GB, as at noise 0.5;
within 0.2 % up to 512 steps, 2.2 % at 4096 steps and noise 0.45). Tiny deltas: the lattice sum's FFT
round-off (about 1e-16 of its largest mass) is recomputed under an exponential tilt so that it is relative in
the far tail (``_allocation_epoch._sum_law``; noise 1, 196 steps, 10 epochs answer within accuracy at delta
1e-12), and at small noise the lattice's per-point errors are charged as a relative error where their l1
would exceed the tail budget (``_coordinate``; cyclic allocation at per-slot noise 0.355 and delta 1.1e-9
answers within accuracy); what remains absolute (the add direction's infinite loss, the aliasing) must stay
below delta. Outside that range ``tightdp.schemes.allocation_epsilon`` answers a wide certified
interval with a ``note``: the upper bound without amplification (for every
allocation the epoch is one Gaussian step of sensitivity 1, so by joint
convexity it is ``1/sigma``-GDP) and the lower bound of ``max_i x_i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._validation import check_count
from ..errors import UnsupportedMechanismError
from ..losses import GaussianLoss, SelfDiscretisingLoss
from ._allocation_epoch import _epoch_pld, clear_allocation_caches
from ._max_statistic import lower_bound_epsilon as lower_bound_epsilon
from ._max_statistic import max_statistic_cells as max_statistic_cells
from ._max_statistic import max_statistic_pld as max_statistic_pld
from .base import LossPair, Mechanism
from .basic import Gaussian

if TYPE_CHECKING:
    from ..pld import DiscretisedLoss

__all__ = ["RandomAllocation", "AllocationLoss", "clear_allocation_caches"]


# --------------------------------------------------------------------------- the privacy loss and mechanism
@dataclass(frozen=True)
class AllocationLoss(SelfDiscretisingLoss):
    """The privacy loss of one epoch of 1-out-of-``t`` random allocation of a Gaussian (``sigma`` per unit
    sensitivity), in ``direction`` ``"remove"`` or ``"add"``.

    Its distribution has no closed form; the engine uses ``dominating_pld`` and
    ``dominated_pld`` (certified discrete pairs on the loss grid, see the module
    docstring) instead of ``cdf``/``sf``, which refuse: a coupling-based
    accountant (PRV, Fourier) needs an exact CDF and cannot be handed one.

    Parameters
    ----------
    sigma : float
        Noise standard deviation per unit sensitivity, positive.
    steps_per_epoch : int
        Steps per epoch ``t``, a positive integer.
    direction : str
        ``"remove"`` or ``"add"``.

    Raises
    ------
    TypeError
        If a parameter is missing (``RandomAllocation`` validates the values).

    References
    ----------
    Feldman & Shenfeld 2026, arXiv 2602.17284 (the PLD of random allocation); Koskela et al. 2023, App. C.6
    (Blackwell dominance of the lattice pairs).
    """

    how_to = "the dominance accountant, connect-dots (allocation_epsilon, dpsgd_epsilon(sampling='random-allocation'))"

    sigma: float
    steps_per_epoch: int
    direction: str

    def dominating_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A discretised loss on ``h Z`` whose composition bounds delta from above (any mesh).

        Parameters
        ----------
        h : float
            Mesh of the loss grid, positive.
        tail : float
            Mass budget for the left-out tails, in ``(0, 1)``.

        Returns
        -------
        DiscretisedLoss
            The pair on ``h Z`` (module docstring, steps 1-3).

        Raises
        ------
        PrecisionError
            If no privacy-loss mass is left on the grid.
        """
        return _epoch_pld(self.sigma, self.steps_per_epoch, float(h), float(tail), self.direction, True)

    def dominated_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A discretised loss on ``h Z`` whose composition bounds delta from below (any mesh).

        Parameters
        ----------
        h : float
            Mesh of the loss grid, positive.
        tail : float
            Mass budget for the left-out tails, in ``(0, 1)``.

        Returns
        -------
        DiscretisedLoss
            The pair on ``h Z`` (module docstring, steps 1-3).

        Raises
        ------
        PrecisionError
            If no privacy-loss mass is left on the grid.
        """
        return _epoch_pld(self.sigma, self.steps_per_epoch, float(h), float(tail), self.direction, False)

    def spread(self) -> float:
        """Rough standard deviation of the loss under P (sets the first mesh only, never a bound).

        ``log S`` with ``Var_Q(W) = e^{1/sigma^2} - 1``, so about ``sqrt(Var(W) / t)`` when that is small.

        Returns
        -------
        float
            A positive scale.
        """
        v = math.expm1(min(1.0 / self.sigma**2, 700.0)) / self.steps_per_epoch
        return math.sqrt(math.log1p(v))


@dataclass(frozen=True, kw_only=True)
class RandomAllocation(Mechanism):
    """One epoch of ``steps_per_epoch`` steps in which each record is used in exactly ``num_selected`` of them,
    chosen uniformly at random (balls-and-bins for ``num_selected = 1``; Chua et al. 2412.16802,
    Feldman & Shenfeld 2502.08202 / 2602.17284). Add/remove neighbouring.

    Compose it once per epoch. ``privacy_losses()`` returns exact Gaussian losses
    for ``steps_per_epoch = 1`` and ``num_selected = steps_per_epoch`` and ``AllocationLoss``
    pairs otherwise.

    Attained pair: the differing record's clipped gradient is a fixed unit vector at every step and every
    other record's is 0. For ``num_selected = 1`` the epoch's outputs are then ``(1/t) sum_i N(e_i)`` against
    ``N(0)`` (``AllocationLoss``, certified from both sides); for ``num_selected = steps_per_epoch`` the record is
    in every step: the Gaussian of ``mu = sqrt(t) / sigma``. For ``1 < num_selected < steps_per_epoch`` no pair is
    returned (the epoch is bounded above through its dominating blocks, which are *not* attained by it);
    ``attained_mechanism()`` gives the post-processing ``sum_i x_i`` of the same data sets,
    ``N(k, t sigma^2)`` against ``N(0, t sigma^2)``: a Gaussian of noise ``sigma sqrt(t) / k``.

    Parameters
    ----------
    mechanism : Mechanism
        The step mechanism: ``Gaussian`` (its ``noise_multiplier / sensitivity`` is ``sigma``).
    steps_per_epoch : int
        Steps per epoch ``t``, a positive integer at most 1,000,000.
    num_selected : int, default 1
        Steps ``k`` each record joins per epoch, a positive integer at most ``steps_per_epoch``.

    Raises
    ------
    UnsupportedMechanismError
        If ``mechanism`` is not ``Gaussian``.
    ValueError
        If ``steps_per_epoch`` or ``num_selected`` is not a positive integer, ``num_selected > steps_per_epoch`` or
        ``steps_per_epoch > 1,000,000``.

    References
    ----------
    Chua et al. 2024, arXiv 2412.16802 (balls-and-bins sampling); Feldman & Shenfeld 2025, arXiv 2502.08202
    (the k-to-1 reduction); Feldman & Shenfeld 2026, arXiv 2602.17284 (the PLD of random allocation).
    """

    type_name = "random_allocation"
    pair_attained = True
    mechanism: Mechanism
    steps_per_epoch: int
    num_selected: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, Gaussian):
            raise UnsupportedMechanismError(
                f"random allocation of {type(self.mechanism).__name__} is not supported; only Gaussian"
            )
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))
        object.__setattr__(self, "num_selected", check_count("num_selected", self.num_selected))
        if self.num_selected > self.steps_per_epoch:
            raise ValueError(f"num_selected ({self.num_selected}) must be <= steps_per_epoch ({self.steps_per_epoch})")
        if self.steps_per_epoch > 1_000_000:
            raise ValueError(f"steps_per_epoch must be at most 1,000,000 per epoch, got {self.steps_per_epoch}")

    @property
    def sigma(self) -> float:
        """The noise standard deviation per unit sensitivity, ``noise_multiplier / sensitivity``."""
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        return g.noise_multiplier / g.sensitivity

    def blocks(self) -> list[tuple[int, int]]:
        """The 1-out-of-``steps`` allocations whose composition dominates the epoch.

        Feldman & Shenfeld 2025 (arXiv 2502.08202)'s reduction for ``k > 1``: ``k - r`` allocations of
        ``floor(t/k)`` steps and ``r = t mod k`` of ``ceil(t/k)``.

        Returns
        -------
        list of (int, int)
            ``[(steps, count)]``.
        """
        t, k = self.steps_per_epoch, self.num_selected
        lo, r = divmod(t, k)
        return [(s, c) for s, c in ((lo, k - r), (lo + 1, r)) if c > 0]

    def attained_mechanism(self) -> Mechanism:
        """The mechanism whose pair gives this one's certified lower ends.

        Returns
        -------
        Mechanism
            ``self`` for ``num_selected`` 1 or ``steps_per_epoch``; else the post-processing ``sum_i x_i``, a
            ``Gaussian`` of noise ``sigma sqrt(t) / k`` (class docstring).
        """
        t, k = self.steps_per_epoch, self.num_selected
        if k == 1 or k == t:
            return self
        return Gaussian(noise_multiplier=self.sigma * math.sqrt(t) / k)

    def privacy_losses(self) -> LossPair:
        t, k, sigma = self.steps_per_epoch, self.num_selected, self.sigma
        if k == t:
            loss = GaussianLoss(mu=math.sqrt(t) / sigma)
            return LossPair(loss, loss)
        if k == 1:
            return LossPair(AllocationLoss(sigma, t, "remove"), AllocationLoss(sigma, t, "add"))
        raise UnsupportedMechanismError(
            "random allocation with 1 < num_selected < steps_per_epoch is composed as its dominating blocks: use "
            "allocation_epsilon(), which also reports the Gaussian lower bound"
        )


#: below this noise multiplier (per unit sensitivity) 1-of-t allocation gets the wide interval at once
_WIDE_SIGMA = 0.5
#: ... unless it is at least this one and the epoch has at most ``_SMALL_NOISE_STEPS`` steps: the ratio's tail
#: past a capped lattice is then on geometric cells (``_allocation_tail``). One epoch, delta 1e-5, one process,
#: the default accuracy: 196 steps at 0.348 (noise 1.1 over 10 cycles of one bin) 8 s, 1.1 GB, [10.4946,
#: 10.4973] (the wide interval's upper end: 15.78); 512 at 0.35 6 s, 1.0 GB, 0.03 % wide; 1000 at 0.3 4.5 s,
#: 4096 at 0.3 3.4 s (0.2 %); 2048 at 0.45 20 s, 2.5 GB (1 %); 4096 at 0.45 26 s, 3.7 GB (2.2 %), beside 4096
#: at 0.5 (realised above the gate) 21 s, 3.0 GB (0.6 %). Longer epochs grow the lattice sum's windows: 10000
#: at 0.45 took 27 s and 4.5 GB (2.3 %). Below 0.3: 10 steps at 0.2 and 200 at 0.25 answer within 0.14 % in 8 s,
#: 100 at 0.2 and 1000 at 0.25 within 1.2 % in 16 to 19 s and 2.3 GB; 512 at 0.2 and longer epochs fall back to
#: the wide interval after 1 to 3 s (the dominance pairs cannot resolve them). Fuzzed against the exact two- and
#: three-step deltas from noise 0.2 (36 points, all inside)
_SMALL_SIGMA = 0.2
_SMALL_NOISE_STEPS = 4096


def realisable(sigma: float, steps_per_epoch: int) -> bool:
    """Whether 1-of-t allocation at this noise is worth the lattice realisation (else: the wide interval).

    Parameters
    ----------
    sigma : float
        Noise multiplier per unit sensitivity.
    steps_per_epoch : int
        Steps per epoch ``t``.

    Returns
    -------
    bool
        ``sigma >= 0.5``, or ``sigma >= 0.2`` with at most 4096 steps per epoch.
    """
    return sigma >= _WIDE_SIGMA or (sigma >= _SMALL_SIGMA and steps_per_epoch <= _SMALL_NOISE_STEPS)
