"""Operational views of a privacy curve, certified: the f-DP trade-off curve, the best
membership-inference attack's true-positive rate at a given false-positive rate, and the
tightest mu-GDP statement.

Notation (Dong, Roth, Su 2022, "Gaussian differential privacy", JRSS-B; DRS below). For a pair
of output distributions ``(P, Q)`` of neighbouring datasets, a test of ``H0: P`` against
``H1: Q`` has type-I error ``alpha`` and type-II error ``beta``; the trade-off function
``T(P, Q)(alpha)`` is the smallest ``beta`` at level ``alpha`` (DRS Def. 2.1). It is convex,
continuous, non-increasing, ``T(alpha) <= 1 - alpha`` and ``T(1) = 0`` (DRS Prop. 2.2). The
attacker's true-positive rate at false-positive rate ``alpha`` is ``1 - T(alpha)``.

**Which curve is certified (add/remove).** tightdp's accountants answer
``delta(eps) = max_d H_{e^eps}(P_d || Q_d)``, the worse of the two orders of the neighbouring
pair (remove and add; ``accountants._pld.PLDAccountant``). The curve certified here is
``f = conv(min(T(P, Q), T(Q, P)))``, DRS's symmetrisation (their Prop. 2.4 and Sec. 2.3): the
largest trade-off function ``f`` such that the run is ``f``-DP for both orders. It is symmetric
and its convex conjugate is exactly that delta: ``delta(eps) = 1 + f*(-e^eps)`` for ``eps >= 0``
(DRS Prop. 2.12; the conjugate of a convex hull of a minimum is the maximum of the conjugates).
For a ledger whose two directions coincide (Gaussian, Laplace, randomized response, pure DP)
``f = T(P, Q)`` itself.

**Lower curve** (``beta_lower``; DRS Prop. 2.5 and 2.12). For every ``eps``, ``f`` lies above
its supporting lines: ``f(a) >= 1 - delta(eps) - e^eps a`` and, by symmetry,
``f(a) >= e^-eps (1 - delta(eps) - a)``. Replacing ``delta`` by a certified *upper* bound keeps
both inequalities, so ``beta_lower = max(0, max_i lines_i)`` over the finite grid is a certified
lower bound on ``f``: no test does better.

**Upper curve** (``beta_upper``). A *lower* bound on delta does **not** give
``f(a) <= 1 - delta_lower(eps) - e^eps a`` for all ``a`` (that line lies above the supporting line,
and ``f`` lies above the supporting line, so nothing follows pointwise). What it gives is a
*witness*: ``f*(-e^eps) = delta(eps) - 1 >= delta_lower(eps) - 1`` means
``sup_a [1 - e^eps a - f(a)] >= delta_lower(eps)``, and the supremum of a continuous function on
``[0, 1]`` is attained, so **some** ``a_i`` has ``f(a_i) <= W_i(a_i)`` with
``W_i(a) = 1 - delta_lower(eps_i) - e^eps_i a``. Since also ``f >= beta_lower``, that ``a_i`` lies in
``A_i = {a in [0, 1]: beta_lower(a) <= W_i(a)}``, an interval (an intersection of half-lines,
computed exactly up to rounding and then widened). So each grid point yields a *witness
segment* ``S_i = {(a, W_i(a)): a in A_i}`` holding a point on or above the graph of ``f``, and by
the symmetry of ``f`` its mirror ``{(b, a)}`` does too (if ``b >= f(a)`` then
``f(b) <= f(f(a)) <= a``). The points ``(0, 1)`` and ``(1, 0)`` are witnesses too. ``f`` is
convex, so below every chord between two witnesses that bracket ``a``. At each ``a`` the upper
curve is the largest chord value over the unknown positions of the witnesses on their segments:
for a segment wholly left (right) of ``a`` the worst chord value is attained at a corner (the
chord's value at ``a`` is a linear-fractional, hence monotone, function of the position along a
straight segment); a segment straddling ``a`` is split into the case "its witness is left of
``a``" and "right of ``a``" and the bound is the worse of the two. Taking the best bound over
the nearest few segments on each side gives ``beta_upper``; with exact delta on a grid it is
within a chord across two grid cells of the truth, so the gap shrinks quadratically with
the grid spacing, and it is never below the truth.

The membership-inference view follows: the best attack at FPR ``alpha`` has TPR at most
``1 - beta_lower(alpha)``, and the symmetrised curve reaches at least ``1 - beta_upper(alpha)``
(for a ledger with one direction that is a single likelihood-ratio test on the run; for two
directions the symmetrised curve may mix the two orders of the pair, DRS Sec. 2.3).

**mu-GDP.** The tightest ``mu`` with ``G_mu <= f``, ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)``
(DRS Def. 2.7). ``mu_lower``: at any ``a``, ``G_mu(a) <= f(a) <= beta_upper(a)`` forces
``mu >= Phi^-1(1 - a) - Phi^-1(beta_upper(a))``; the maximum over the witness corners and the
alpha grid is certified. ``mu_upper``: ``G_mu <= beta_lower`` implies ``G_mu <= f``; ``beta_lower``
is piecewise linear and ``G_mu`` convex, so it suffices that ``G_mu`` lies below each line at the
two (widened) ends of the interval where that line is the maximum. A finite grid with
``delta_upper > 0`` everywhere leaves ``beta_lower(0) < 1 = G_mu(0)``, so then no finite ``mu`` is
certified (``mu_upper = inf``, with a note): certifying GDP needs the whole tail of delta. A
ledger of plain Gaussians (every step's privacy loss Gaussian, both directions equal) is
exactly mu-GDP with ``mu^2 = sum count * mu_step^2`` (DRS Cor. 3.3), and is answered in closed
form, curves included, with only rounding in the intervals.

Rounding: every computed value carries a margin (relative 1e-9 for the upper curve's chords,
16 ulp for the lower curve's lines, 1e-9 relative for the closed form), far above the float
error of the few operations involved and far below anything a user reads.

The package: ``_geometry`` (lines, witness segments, mu-GDP), ``_curve`` (``TradeoffCurve``,
``tradeoff_curve``) and ``_lower`` (``tradeoff_lower_curve``, ``tradeoff_from_accountant``).
"""

from ._curve import TradeoffCurve, tradeoff_curve
from ._geometry import DEFAULT_ALPHAS
from ._lower import tradeoff_from_accountant, tradeoff_lower_curve

__all__ = ["TradeoffCurve", "tradeoff_curve", "tradeoff_lower_curve", "tradeoff_from_accountant", "DEFAULT_ALPHAS"]
