"""Selection mechanisms: the exponential mechanism and every epsilon-bounded-range mechanism, permute-and-flip,
report-noisy-max (Gumbel, Laplace, exponential noise) and the sparse vector technique.

Each class hands the engine a dominating pair (``privacy_losses``) and, separately, the attained pairs
whose certified lower bounds give the interval's lower end (``attained_pairs``; ``tightdp.tuning.
selection_epsilon`` composes both). Scores have sensitivity ``Delta``; ``epsilon`` is each mechanism's usual
privacy parameter.

**The bounded-range pair** (``BoundedRangeLoss``). A mechanism is epsilon-BR (Durfee & Rogers 2019,
Def. 3.1) when for neighbours ``D, D'`` the log ratio ``L(y) = log(P(y) / Q(y))`` of its output laws ranges
over an interval of length ``epsilon``: ``L in [-t epsilon, (1 - t) epsilon]`` for some ``t in [0, 1]``
(the interval must contain 0, as ``E_Q[e^L] = 1``). Theorem: every such pair is dominated, at every
``alpha = e^eps' > 0``, by the pair ``(P*, Q*)`` whose loss has the P-density
``f(l) = sqrt(E) e^(l / 2) / (2 (E - 1))`` on ``[-epsilon, epsilon]`` (``E = e^epsilon``), whose curve is
``D(alpha) = (sqrt(E) - sqrt(alpha))^2 / (E - 1)`` on ``[1, E]``, ``1 - alpha + (sqrt(alpha E) - 1)^2 / (E - 1)``
on ``[1/E, 1]``, ``1 - alpha`` below and 0 above. Proof. (1) ``H_alpha(P || Q) = E_P[(1 - alpha Y)_+]`` with
``Y = e^(-L) in [e^(-(1-t) epsilon), e^(t epsilon)]`` and ``E_P[Y] = 1``; ``y -> (1 - alpha y)_+`` is convex,
so among laws of ``Y`` on that interval with mean 1 the two-point law on its ends maximises it: the pair
is dominated by the two-point pair ``T_t`` (losses ``(1 - t) epsilon``, ``-t epsilon``; P-mass
``p_t = (x - 1) E / (x (E - 1))`` on the first, ``x = e^(t epsilon)``). (2) For ``alpha in [1, E]``,
``H_alpha(T_t) = (x - 1)(E - alpha x) / (x (E - 1))``, maximised over ``x in [1, E]`` at ``x = sqrt(E / alpha)``,
with value ``D(alpha)``; swapping P and Q maps ``T_t`` to ``T_(1 - t)``, so for ``alpha < 1`` the identity
``H_alpha(P || Q) = 1 - alpha + alpha H_(1/alpha)(Q || P)`` gives the stated ``D``. (3) ``(P*, Q*)`` has exactly
this curve: ``D''(alpha) = sqrt(E) alpha^(-3/2) / (2 (E - 1))`` is the density of ``Q*``'s likelihood ratio
``r = e^l`` at ``alpha`` (both branches), which integrates to 1 on ``[1/E, E]`` (so no atoms), and
``D(E) = D'(E) = 0``. Hence ``H_alpha(P || Q) <= H_alpha(P* || Q*)`` for every ``alpha > 0``: a dominating
pair, composed by the engine (dominance survives adaptive composition). The constant-``alpha`` value
``D(1) = tanh(epsilon / 4)`` is Durfee & Rogers' total-variation bound.

**Permute-and-flip is bounded-range** (proved here; Ding et al. 2021 show it is report-noisy-max with
exponential noise). Theorem: permute-and-flip at ``epsilon`` is ``eta``-BR with
``eta = 2 log(2 e^(epsilon / 2) - 1)`` (``permute_and_flip_range``; ``eta < 2 epsilon``, ``eta ~ epsilon + 2 log 2``
for large ``epsilon``), and the two-candidate swap below attains it. Proof. Write ``w_s = e^(epsilon u_s / (2
Delta))``, ``M = max w``. Give each candidate an independent uniform arrival time (a uniform order): ``r`` is
output when it is accepted and every earlier candidate was rejected, so ``P(r) = (w_r / M) int_0^1 prod_(s != r)
(1 - tau w_s / M) dtau = w_r int_0^(1/M) prod_(s != r) (1 - sigma w_s) dsigma``. For two outputs ``r != r'`` let
``A(sigma) = prod_(s != r, r') (1 - sigma w_s)``, non-negative and non-increasing on ``[0, 1/M]``, and ``mu`` the
mean of ``sigma`` under the density ``A`` there; then ``P(r) / P(r') = w_r (1 - mu w_r') / (w_r' (1 - mu w_r))
= [a / (1 - a)] / [b / (1 - b)]`` with ``a = mu w_r``, ``b = mu w_r'``, both in ``(0, 1/2]`` (a non-increasing
density on ``[0, 1/M]`` has mean at most ``1 / (2M)``). A neighbour multiplies each ``w_s`` by ``c_s`` in
``[1/lam, lam]``, ``lam = e^(epsilon / 2)``. ``mu`` is homogeneous of degree -1 in ``w`` and non-increasing in
each ``w_s`` (raising ``w_s`` multiplies the density by a decreasing function or shortens its interval), so
``mu' = kappa mu`` with ``kappa`` in ``[1/lam, lam]``, and ``a' = kappa c_r a``, ``b' = kappa c_r' b``. The log of
the ratio of odds is ``[logit a - logit a'] + [logit b' - logit b]``. For ``t <= 1``, ``logit a - logit(t a) =
log(1/t) + log((1 - t a) / (1 - a))`` rises in ``a``, so at most ``log((2 - t) / t)`` (``a = 1/2``); for ``t >= 1``,
``logit(t b) - logit b`` rises in ``b`` up to ``t b = 1/2``: at most ``log(2 t - 1)``; both bounds are monotone in
``t``, so the worst ``c_r = 1/lam``, ``c_r' = lam`` give at most ``F(kappa) = log(2 lam / kappa - 1) +
log(2 lam kappa - 1)``. In ``s = log kappa`` each term is concave (``d^2/ds^2 log(y - 1) = -y / (y - 1)^2`` for
``y = 2 lam e^(+-s)``) and ``F`` is even, so ``F <= F(1) = 2 log(2 lam - 1) = eta``. Two tied candidates that
swap (``(0, -Delta)`` on ``D`` against ``(-Delta, 0)`` on ``D'``) output ``(1 - e^(-epsilon/2) / 2, e^(-epsilon/2)
/ 2)`` against the reverse: log ratios ``+-eta / 2``, range ``eta``.

**Bounded range and pure DP** (``CappedBoundedRangeLoss``). A pair that is ``eta``-BR and ``epsilon``-DP
(``eta / 2 <= epsilon <= eta``) has its loss in an interval ``[lo, hi]`` of length at most ``eta`` inside
``[-epsilon, epsilon]``, which lies in ``[h - eta, h]`` for some ``h`` in ``[eta - epsilon, epsilon]``; by step
(1) above it is dominated by ``T_t`` with ``(1 - t) eta = h``, i.e. ``t`` in ``[1 - epsilon / eta, epsilon /
eta]``. For ``alpha`` in ``[1, e^eta]`` the maximiser ``x* = sqrt(E / alpha)`` of step (2) (``E = e^eta``,
``x = e^(t eta)``) is clamped to ``x_lo = e^(eta - epsilon)`` once ``alpha > e^(2 epsilon - eta)`` (the curve
is concave in ``x``): there the supremum is ``H_alpha(T_(t_lo))``, linear in ``alpha`` and 0 from ``alpha = e^epsilon``; below, it is
``D(alpha)``; ``alpha < 1`` follows by the swap symmetry (the range of ``t`` is symmetric about 1/2). Reading
the curve's second derivative (the law of Q's likelihood ratio) gives the pair: ``BoundedRangeLoss(eta)``'s
densities on ``(-w, w)``, ``w = 2 epsilon - eta``, and atoms at ``+-epsilon`` (the slope's jump at
``alpha = e^epsilon``: Q-mass ``(x_lo - 1) / (E - 1)`` at ``+epsilon``). Its curve is the supremum, so it
dominates every such pair, and lies below both ``BoundedRangeLoss(eta)``'s and ``PureDP(epsilon)``'s.
Permute-and-flip (and report-noisy-max with exponential noise) is dominated by
``CappedBoundedRangeLoss(eta, epsilon)``.

**Pure DP.** Report-noisy-max with Laplace noise (Dwork & Roth 2014, Claim 3.9) and the sparse vector technique
(Lyu, Su, Li 2017, Alg. 1, epsilon split between threshold and queries; ``tightdp.mechanisms._sparse_vector``)
are epsilon-DP; ``PureDP(epsilon)``'s pair dominates every epsilon-DP mechanism (Kairouz, Oh, Viswanath 2015).
Laplace report-noisy-max is also ``(18/11) epsilon``-BR (``tightdp.mechanisms._laplace_range``):
``CappedBoundedRangeLoss`` at that range dominates it.

**Laplace report-noisy-max over ``d`` known candidates.** Its output is the index of the largest of the ``d``
noisy scores ``u_i + Z_i``, ``Z_i`` i.i.d. Laplace of scale ``b = 2 Delta / epsilon``: a post-processing of the
``d``-dimensional Laplace mechanism on the score vector. Between neighbours each score moves by at most
``Delta``, and a coordinate's Laplace pair with shift ``|s| <= Delta`` is a post-processing of the one with shift
``Delta`` (``Laplace(b)`` at ``Delta / b = epsilon / 2``: location families with monotone likelihood ratio), so
one use is dominated by ``d`` compositions of ``Laplace(scale=b)``, adaptively too (the scores may depend on
earlier outputs; the product pair is fixed). ``ReportNoisyMax.upper_ledger`` gives it for ``d >= 3`` and
``tightdp.tuning.selection_epsilon`` takes the smallest upper end (epsilon 0.1, 1000 uses, delta 1e-6, ``d = 3``:
16.0, against 15.08 from the range and 19.34 from pure DP). For ``d = 2`` the output is ``1[Z > 0]`` for ``Z = (u_2 - u_1) + (Z_2 - Z_1)``, a post-processing of
``Z``, whose law is the Laplace-difference density ``f`` shifted by the score gap; the gap moves by at most
``2 Delta``, and ``f`` is log-concave (a convolution of log-concave densities), so a location pair with a
smaller shift is a post-processing of the one with shift ``2 Delta`` (its trade-off curve ``F(F^-1(1 - a) -
m)`` falls as the shift ``m`` grows; Blackwell). So ``(f, f(. - 2 Delta))`` (``LaplaceDifferenceLoss``)
dominates one use: 9.20 in the run above, against the product's 12.45 and the lower end's 8.29.

**Laplace report-noisy-max over two candidates is epsilon-BR** (proved here), and epsilon-DP, so the adaptive
bounded-range program composes it (8.31 in the run above). Proof. The output is 1 w.p. ``F(g)``, ``F`` the CDF
of ``D = Z_2 - Z_1`` and ``g`` the score gap, and a neighbour moves ``g`` by ``s``, ``|s| <= 2 Delta``. The loss
takes two values, ``log(F(g') / F(g))`` and ``log(S(g') / S(g))`` (``S = 1 - F``), whose difference is
``logit F(g') - logit F(g) = int_g^g' f / (F S)``. For ``x >= 0``, ``S(x) = (1 + u / 2) e^(-u) / 2`` and ``f(x) =
(1 + u) e^(-u) / (4 b)`` with ``u = x / b``; then ``f / (F S) <= 1 / b`` reads ``f / S <= F / b``, i.e.
``(1 + u) / (2 + u) <= 1 - (1 + u / 2) e^(-u) / 2``, i.e. ``(2 + u)^2 e^(-u) <= 4``, i.e. ``1 + u / 2 <=
e^(u / 2)``: true. ``f`` is even and ``F(-x) = S(x)``, so the bound holds on the whole line. Hence the range is
at most ``2 Delta / b = epsilon`` (equality as ``g -> 0`` or ``+-inf``). Each loss lies in that range, which
contains 0, so the pair is also epsilon-DP: ``bounded_range_parameters`` gives ``(epsilon, epsilon)``.

**Attained pairs** (lower ends; each score moves by at most ``Delta``): exponential mechanism / Gumbel noise:
``m`` of ``n`` candidates raised to ``+Delta``, the rest lowered to ``-Delta`` from all-zero scores, a two-point
pair ``T_t`` with ``t`` set by ``m / n`` (any ``t`` in ``(0, 1)`` up to ``1/n``); permute-and-flip and Laplace
noise: two candidates with scores ``(0, a Delta)`` on ``D`` and ``(Delta, (a - 1) Delta)`` on ``D'`` for any gap
``a`` (``attained_pair_at``; ``attained_pairs`` holds seven in ``[0, 1.5]``, and ``selection_epsilon`` searches
the gap at the delta asked) (``a = 0``: ``(0, 0)`` against ``(Delta, -Delta)``, where permute-and-flip outputs 2 w.p.
``e^(-epsilon) / 2`` on ``D'`` and Laplace noise w.p. ``e^(-epsilon) (1 + epsilon / 2) / 2``, the difference of two
Laplace variables; ``a = 1``: the scores swap); Laplace noise over three or more candidates also: one candidate
against two tied ones, scores ``(a Delta, 0, 0)`` on ``D`` and ``((a - 1) Delta, Delta, Delta)`` on ``D'`` (its
lead falls from ``a Delta`` to ``(a - 2) Delta``), and the same neighbours exchanged. The tied two have equal
probabilities on both sides, so merging their outputs (a post-processing) keeps every likelihood ratio: the
binary pair of the lone candidate's win probability ``W`` (``_finite_pairs._laplace_lone``, in closed form) is
exact. It is the stronger attack: epsilon 0.1, 1000 uses, delta 1e-6, best lead: 9.18 against the two candidates'
8.29 (one use at epsilon 1, delta 1e-5, lead 0: 0.85 against 0.59; more tied rivals do worse, 9.17 for three);
sparse vector: one query near the threshold when the threshold's
share of epsilon is given (``SparseVector``), else none (lower end 0). Permute-and-flip's
upper end is the capped pair above, which its swap pair meets at total variation (``1 - e^(-epsilon/2)``); the
pairs ``T_t`` with ``t`` away from 1/2 are not known to be attained, so the interval keeps a gap for long runs at
large ``epsilon``.

The module holds the proofs its classes rely on; the pairs' arithmetic lives in
``tightdp.mechanisms._bounded_range`` and the attained finite pairs in ``tightdp.mechanisms._finite_pairs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .._validation import check_choice, check_count
from ..losses.laplace_difference import LaplaceDifferenceLoss
from ._bounded_range import (
    BoundedRangeLoss,
    CappedBoundedRangeLoss,
    bounded_range_delta,
    bounded_range_rdp,
    permute_and_flip_range,
    two_point_pair,
)
from ._finite_pairs import (
    CLOSED_FORM_REL_ERROR,
    FinitePair,
    _laplace_lone,
    _laplace_second,
    _permute_and_flip_second,
    _two_candidate_pairs,
    two_candidate_pair,
)
from ._finite_pairs import (
    check_selection_epsilon as _check_epsilon,
)
from ._laplace_range import laplace_report_noisy_max_range
from ._sparse_vector import SparseVector
from .base import EpsilonDP, LossPair, Mechanism
from .basic import Laplace, PureDP

__all__ = [
    "BoundedRange",
    "BoundedRangeLoss",
    "CappedBoundedRangeLoss",
    "ExponentialMechanism",
    "FinitePair",
    "PermuteAndFlip",
    "ReportNoisyMax",
    "SparseVector",
    "bounded_range_delta",
    "bounded_range_parameters",
    "bounded_range_rdp",
    "permute_and_flip_range",
    "two_point_pair",
]


@dataclass(frozen=True, kw_only=True)
class BoundedRange(EpsilonDP, Mechanism):
    """Any epsilon-bounded-range mechanism (Durfee & Rogers 2019): dominated by ``BoundedRangeLoss``.
    Attained pair: none in general (the lower end is 0 unless a concrete mechanism says more).

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``(0, 500]``.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``(0, 500]``.

    References
    ----------
    Durfee & Rogers 2019, "Practical differentially private top-k selection with pay-what-you-get
    composition", Def. 3.1; Dong, Durfee, Rogers 2020, "Optimal differential privacy composition for
    exponential mechanisms", Thm 3 (the dominating pair).
    """

    type_name = "bounded_range"
    pair_attained = False
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))

    def privacy_losses(self) -> LossPair:
        loss = BoundedRangeLoss(self.epsilon)
        return LossPair(loss, loss)

    def attained_pairs(self) -> tuple[Mechanism, ...]:
        """The two-point pairs this mechanism attains on concrete neighbouring data sets (class docstring).

        Returns
        -------
        tuple of Mechanism
            ``FinitePair`` objects, each a certified lower end on its own; empty when none is known.
        """
        return ()

    def attained_mechanism(self) -> Mechanism | None:
        """None: an arbitrary bounded-range mechanism has no known attained pair (lower ends are 0).

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        return None


@dataclass(frozen=True, kw_only=True)
class ExponentialMechanism(EpsilonDP, Mechanism):
    """The exponential mechanism, ``P(y) ∝ exp(epsilon u(y) / (2 Delta))`` (``monotonic=True``: scores that
    move in one direction between neighbours, ``exp(epsilon u(y) / Delta)``), over ``num_candidates``
    candidates; the same as report-noisy-max with Gumbel noise of scale ``2 Delta / epsilon``
    (``Delta / epsilon``). It is epsilon-BR (Durfee & Rogers 2019, Lemma 3.2): dominated by
    ``BoundedRangeLoss(epsilon)``. Attained pairs: ``T_(m/n)``-like two-point pairs (``attained_pairs``:
    ``m`` of ``n`` candidates moved up by ``Delta``, the others down; monotonic: the ``m`` up, the rest fixed)
    for ``n = num_candidates`` (``None``: any number of candidates, so any ``t``).

    Matches dp_accounting's ``ExponentialMechanismDpEvent`` (its ``epsilon``).

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``(0, 500]``.
    num_candidates : int or None, default None
        Number of candidates, an integer >= 2; ``None``: any number.
    monotonic : bool, default False
        Whether scores move in one direction between neighbours.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``(0, 500]``, ``num_candidates`` is not an integer >= 2 or ``monotonic`` is not
        a bool.

    References
    ----------
    McSherry & Talwar 2007 (the mechanism); Durfee & Rogers 2019, Lemma 3.2 (epsilon-BR); dp_accounting's
    ``ExponentialMechanismDpEvent``.
    """

    type_name = "exponential_mechanism"
    pair_attained = False
    epsilon: float
    num_candidates: int | None = None
    monotonic: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))
        if self.num_candidates is not None:
            object.__setattr__(self, "num_candidates", check_count("num_candidates", self.num_candidates, minimum=2))
        if not isinstance(self.monotonic, bool):
            raise ValueError(f"monotonic must be True or False, got {self.monotonic!r}")

    def privacy_losses(self) -> LossPair:
        loss = BoundedRangeLoss(self.epsilon)
        return LossPair(loss, loss)

    def attained_pairs(self) -> tuple[Mechanism, ...]:
        """Two-point pairs attained by the mechanism on concrete neighbours: from all-zero scores, ``m`` of
        ``n`` candidates move to ``+Delta`` and the rest to ``-Delta`` (monotonic: stay at 0). The output
        "one of the ``m``" against "one of the others" is a sufficient statistic (within each group the laws
        are uniform on both sides), and its log ratios differ by exactly ``epsilon``: the pair is ``T_t``
        with ``t`` fixed by ``m / n``. Seven ``t`` spread over ``(0, 1)`` (the nearest ``m / n`` for a
        given ``n``).

        Returns
        -------
        tuple of Mechanism
            Seven ``FinitePair`` objects, each a certified lower end on its own.
        """
        e = self.epsilon
        out = []
        for rho in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9):
            n = self.num_candidates
            m = rho if n is None else min(max(round(rho * n), 1), n - 1) / n
            # P: uniform, so group "up" has P-mass m; Q: up-weight e^(eps), down-weight 1 (exp(+-eps/2) scaled)
            # Q's masses, each computed directly (never as 1 - the other): m e^eps / z and (1 - m) / z
            z = m * math.exp(e) + (1.0 - m)
            values = (math.log(z) - e, math.log(z))
            out.append(FinitePair(values=values, probs=(m, 1.0 - m), mass_rel_error=CLOSED_FORM_REL_ERROR))
        return tuple(out)

    def attained_mechanism(self) -> Mechanism | None:
        """The accountants' lower end: the attained pair with half the candidates moved up (``m / n`` nearest
        1/2; ``tightdp.tuning.selection_epsilon`` takes the best of all seven).

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        return self.attained_pairs()[3]


@dataclass(frozen=True, kw_only=True)
class PermuteAndFlip(EpsilonDP, Mechanism):
    """Permute-and-flip (McKenna & Sheldon 2020), flip probability ``exp(epsilon (u - u*) / (2 Delta))``:
    epsilon-DP and ``eta``-BR with ``eta = 2 log(2 e^(epsilon / 2) - 1)`` (module docstring), dominated by
    ``CappedBoundedRangeLoss(eta, epsilon)``; equal to report-noisy-max with exponential noise (Ding et al.
    2021). Attained pairs: two candidates, scores ``(0, a Delta)`` / ``(Delta, (a - 1) Delta)`` for seven gaps
    ``a`` (module docstring; ``a = 0``: ``P(2 on D') = e^(-epsilon) / 2``). Matches dp_accounting's
    ``PermuteAndFlipDpEvent``.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``(0, 500]``.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``(0, 500]``.

    References
    ----------
    McKenna & Sheldon 2020, "Permute-and-flip: a new mechanism for differentially private selection";
    Ding et al. 2021 (report-noisy-max with exponential noise).
    """

    type_name = "permute_and_flip"
    pair_attained = False
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))

    def privacy_losses(self) -> LossPair:
        if self.epsilon == 0.0:
            return PureDP(epsilon=0.0).privacy_losses()
        loss = CappedBoundedRangeLoss(permute_and_flip_range(self.epsilon), self.epsilon)
        return LossPair(loss, loss)

    def attained_pairs(self) -> tuple[Mechanism, ...]:
        """The two-point pairs this mechanism attains on concrete neighbouring data sets (class docstring).

        Returns
        -------
        tuple of Mechanism
            ``FinitePair`` objects, each a certified lower end on its own; empty when none is known.
        """
        return _two_candidate_pairs(_permute_and_flip_second(self.epsilon)) if self.epsilon > 0 else ()

    def attained_pair_at(self, gap: float) -> Mechanism | None:
        """The two-candidate attained pair at any score gap (``attained_pairs`` holds seven of them), for a search
        of the best gap at a given delta and count (``tightdp.tuning.selection_epsilon``).

        Parameters
        ----------
        gap : float
            The gap ``a`` of the class docstring's scores ``(0, a Delta)`` / ``(Delta, (a - 1) Delta)``.

        Returns
        -------
        Mechanism or None
            A ``FinitePair``; ``None`` at epsilon 0 or where an output probability rounds to 0 or 1.

        Raises
        ------
        TypeError, ValueError
            If ``gap`` cannot be read as a float.
        """
        return two_candidate_pair(_permute_and_flip_second(self.epsilon), float(gap)) if self.epsilon > 0 else None

    def attained_mechanism(self) -> Mechanism | None:
        """The two-candidate attained pair of the class docstring (None at epsilon 0).

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        pairs = self.attained_pairs()
        return pairs[0] if pairs else None


@dataclass(frozen=True, kw_only=True)
class ReportNoisyMax(EpsilonDP, Mechanism):
    """Report-noisy-max: the index of the largest ``u(y) + Z_y``, ``Z`` of scale ``2 Delta / epsilon``.

    ``noise="gumbel"`` is the exponential mechanism (``ExponentialMechanism``'s pairs); ``"exponential"`` is
    permute-and-flip (``PermuteAndFlip``'s); ``"laplace"`` is epsilon-DP (Dwork & Roth 2014, Claim 3.9) and
    ``(18/11) epsilon``-BR, dominated by ``CappedBoundedRangeLoss`` (``_laplace_range``), with the attained
    two-candidate pairs of the module docstring (``a = 0``: ``P(2 on D') = e^(-epsilon) (1 + epsilon / 2) / 2``).
    With Laplace noise and ``num_candidates = d`` known, ``d`` compositions of ``Laplace(scale=2 Delta / epsilon)``
    dominate one use too (module docstring, ``upper_ledger``); with ``d = 2`` the mechanism is epsilon-bounded-range
    (module docstring), so ``selection_epsilon`` and the accountant compose it by the adaptive bounded-range
    program. With ``d >= 3`` (or any number) the lone candidate's pairs against two tied ones (module docstring) are
    attained too, and stronger. Pairs of fewer candidates stay attained for more: merge the other candidates'
    outputs into candidate 2's (a post-processing) and place their scores ``4000 b`` below. Each then wins with
    probability below ``e^(-3990)``, so every output probability moves by less than ``d e^(-3990)`` and ``delta(eps)
    = sum (p - e^eps q)_+`` (``eps <= 500``) by less than ``2 d e^(500 - 3990)``: below the smallest positive
    double, which every certified lower end already rounds away.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon, in ``(0, 500]``.
    noise : str, default "gumbel"
        ``"gumbel"``, ``"laplace"`` or ``"exponential"``.
    num_candidates : int or None, default None
        Number of candidates, an integer >= 2; ``None``: any number.

    Raises
    ------
    ValueError
        If ``epsilon`` lies outside ``(0, 500]``, ``noise`` is not one of the three or ``num_candidates`` is not
        an integer >= 2.

    References
    ----------
    Dwork & Roth 2014, Claim 3.9 (Laplace noise); Durfee & Rogers 2019 (Gumbel noise); Ding et al. 2021
    (exponential noise).
    """

    type_name = "report_noisy_max"
    pair_attained = False
    epsilon: float
    noise: str = "gumbel"
    num_candidates: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))
        check_choice("noise", self.noise, ("gumbel", "laplace", "exponential"))
        if self.num_candidates is not None:
            object.__setattr__(self, "num_candidates", check_count("num_candidates", self.num_candidates, minimum=2))

    def _equivalent(self) -> ExponentialMechanism | PermuteAndFlip:
        if self.noise == "gumbel":
            return ExponentialMechanism(epsilon=self.epsilon, num_candidates=self.num_candidates)
        return PermuteAndFlip(epsilon=self.epsilon)

    def upper_ledger(self) -> tuple[tuple[Mechanism, int], ...] | None:
        """A second dominating ledger for one use: Laplace noise over ``num_candidates = d`` candidates is a
        post-processing of ``d`` Laplace mechanisms of ``epsilon / 2`` each (module docstring).

        Returns
        -------
        tuple of (Mechanism, int) or None
            ``((Laplace(scale=2 / epsilon), d),)`` (``Delta = 1``) for ``d >= 3``, or ``None`` for Gumbel or
            exponential noise, two or an unknown number of candidates, or ``epsilon = 0``.
        """
        if self.noise != "laplace" or self.num_candidates is None or self.num_candidates < 3 or self.epsilon == 0.0:
            return None  # (two candidates: ``privacy_losses`` is the Laplace-difference pair, tighter still)
        return ((Laplace(scale=2.0 / self.epsilon), self.num_candidates),)

    def privacy_losses(self) -> LossPair:
        if self.noise == "laplace":
            if self.num_candidates == 2 and self.epsilon > 0:
                # a threshold of the noisy score gap: the Laplace-difference pair, shift 2 Delta (module docstring)
                loss = LaplaceDifferenceLoss(scale=2.0 / self.epsilon, shift=2.0)
                return LossPair(loss, loss)
            if self.epsilon == 0.0:
                return PureDP(epsilon=0.0).privacy_losses()
            # (18/11) epsilon-BR and epsilon-DP (``_laplace_range``): below ``PureDP(epsilon)``'s pair
            capped = CappedBoundedRangeLoss(laplace_report_noisy_max_range(self.epsilon), self.epsilon)
            return LossPair(capped, capped)
        return self._equivalent().privacy_losses()

    def attained_pairs(self) -> tuple[Mechanism, ...]:
        """The two-point pairs this mechanism attains on concrete neighbouring data sets (class docstring).

        Returns
        -------
        tuple of Mechanism
            ``FinitePair`` objects, each a certified lower end on its own; empty when none is known.
        """
        if self.noise == "laplace":
            e = self.epsilon
            if e == 0.0:
                return ()
            lone = () if self.num_candidates == 2 else _two_candidate_pairs(_laplace_lone(e))
            return lone + _two_candidate_pairs(_laplace_second(e))
        return self._equivalent().attained_pairs()

    def attained_pair_families(self) -> tuple[tuple[str, Callable[[float], Mechanism | None]], ...]:
        """The one-parameter families of attained pairs that ``selection_epsilon`` searches at the delta asked:
        ``(name, gap -> pair)``, each pair attained on concrete neighbours (class docstring).

        Returns
        -------
        tuple of (str, callable)
            Laplace or exponential noise: the two-candidate family (``attained_pair_at``); Laplace noise over
            three or more (or any number of) candidates also one candidate against two tied ones, in both
            directions. Gumbel noise or epsilon 0: none.
        """
        if self.noise == "gumbel" or self.epsilon == 0.0:
            return ()
        out: tuple[tuple[str, Callable[[float], Mechanism | None]], ...] = (
            ("two candidates at score gap a", self.attained_pair_at),
        )
        if self.noise == "laplace" and self.num_candidates != 2:
            lone = _laplace_lone(self.epsilon)
            out += (
                ("one candidate against two tied ones, its lead falling from a", lambda a: two_candidate_pair(lone, a)),
                (
                    "one candidate against two tied ones, its lead rising to a",
                    lambda a: two_candidate_pair(lone, a, swapped=True),
                ),
            )
        return out

    def attained_pair_at(self, gap: float) -> Mechanism | None:
        """Laplace or exponential noise: the two-candidate attained pair at score gap ``a``, as
        ``PermuteAndFlip.attained_pair_at`` (attained for ``d > 2`` candidates too, class docstring).

        Parameters
        ----------
        gap : float
            The gap ``a``: scores ``(0, a Delta)`` on ``D`` and ``(Delta, (a - 1) Delta)`` on ``D'``.

        Returns
        -------
        Mechanism or None
            A ``FinitePair``; ``None`` for Gumbel noise (the exponential mechanism's pairs serve it), at epsilon 0,
            or where an output probability rounds to 0 or 1.

        Raises
        ------
        TypeError, ValueError
            If ``gap`` cannot be read as a float.
        """
        if self.noise == "gumbel" or self.epsilon == 0.0:
            return None
        if self.noise == "exponential":
            return PermuteAndFlip(epsilon=self.epsilon).attained_pair_at(gap)
        return two_candidate_pair(_laplace_second(self.epsilon), float(gap))

    def attained_mechanism(self) -> Mechanism | None:
        """Laplace noise: the two-candidate attained pair; Gumbel / exponential noise: the equivalent
        mechanism's (exponential mechanism / permute-and-flip).

        Returns
        -------
        Mechanism or None
            The mechanism whose pair gives the certified lower ends, or ``None`` (lower ends 0).
        """
        if self.noise == "laplace":  # (three or more candidates: the lone candidate's pair at lead 0 goes first)
            pairs = self.attained_pairs()
            return pairs[0] if pairs else None
        return self._equivalent().attained_mechanism()


def bounded_range_parameters(mechanism: Mechanism) -> tuple[float, float] | None:
    """``(eta, cap)``: ``mechanism`` is proven ``eta``-bounded-range and ``cap``-DP (``cap = eta`` when no pure-DP
    bound below ``eta`` is used), else ``None``.

    ``BoundedRange``, ``ExponentialMechanism`` and Gumbel report-noisy-max: ``(epsilon, epsilon)``; permute-and-flip
    and exponential-noise report-noisy-max: ``(permute_and_flip_range(epsilon), epsilon)`` (module docstring; the
    adaptive program then restricts ``t``); Laplace report-noisy-max over two candidates: ``(epsilon, epsilon)``
    (module docstring); Laplace report-noisy-max over more or an unknown number of candidates:
    ``((18/11) epsilon, epsilon)`` (``tightdp.mechanisms._laplace_range``); anything else (sparse vector, other
    mechanisms): ``None``. Epsilon 0 gives ``(0, 0)``.

    Parameters
    ----------
    mechanism : Mechanism
        Any tightdp mechanism.

    Returns
    -------
    tuple of float or None
        ``(eta, cap)``, or ``None`` when no bounded-range proof applies.

    Raises
    ------
    TypeError
        Never for a ``Mechanism``; any object is answered (``None`` for what is not one of the above).
    """
    if isinstance(mechanism, ReportNoisyMax) and mechanism.noise != "laplace":
        return bounded_range_parameters(mechanism._equivalent())
    if isinstance(mechanism, ReportNoisyMax) and mechanism.num_candidates == 2:  # Laplace over two: epsilon-BR
        return float(mechanism.epsilon), float(mechanism.epsilon)
    if isinstance(mechanism, ReportNoisyMax):  # Laplace over three or any number: (18/11) epsilon-BR
        return laplace_report_noisy_max_range(float(mechanism.epsilon)), float(mechanism.epsilon)
    if isinstance(mechanism, (BoundedRange, ExponentialMechanism)):
        return float(mechanism.epsilon), float(mechanism.epsilon)
    if isinstance(mechanism, PermuteAndFlip):
        return permute_and_flip_range(float(mechanism.epsilon)), float(mechanism.epsilon)
    return None
