"""Mixture-of-Gaussians (MoG) mechanisms and the group-level DP-SGD mechanisms built on them.

002 Def. 2.8: a scalar MoG mechanism with sensitivities ``c_i >= 0``,
probabilities ``p_i`` and noise ``sigma`` outputs ``N(0, sigma^2)`` on one data
set and ``sum_i p_i N(c_i, sigma^2)`` on its neighbour. By the vector-to-scalar
reduction (002 Lemma 2.9) a scalar MoG whose sensitivity stochastically
dominates ``||c||_2`` dominates the vector one, so a scalar mechanism suffices.

Group privacy of DP-SGD (groups of up to ``k`` examples) is exactly that of a
MoG mechanism composed ``T`` times:

* Poisson sampling with rate ``q``: sensitivity ``Binom(k, q)`` (002 Thm 3.1);
* fixed batch size ``B`` from a data set of at least ``n`` examples:
  sensitivity ``2 * Hypergeom(B, n + k, k)``, the number of the ``k`` group
  members among ``B`` draws without replacement from ``n + k`` (002 Thm 3.3).

Both are tight (002 Sec. 3.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import special

from .._numerics import logsumexp
from .._validation import check_count, check_positive, check_probability, check_real
from ..errors import PrecisionError
from ..losses import DiscreteLoss, GaussianLoss, GaussianMixtureLoss, PrivacyLoss
from .base import LossPair, Mechanism

__all__ = [
    "MixtureOfGaussians",
    "GroupPoissonSampled",
    "GroupFixedBatchSampled",
    "binomial_sensitivity",
    "hypergeometric_sensitivity",
]

#: Largest tolerated ``|sum(probabilities) - 1|``; the residue is moved to the safe side.
PROBABILITY_SUM_TOLERANCE = 1e-9


def _as_float_tuple(name: str, values) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a sequence of numbers, got {values!r}")
    out = tuple(check_real(f"{name}[{i}]", v, low=0.0, low_open=False) for i, v in enumerate(values))
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def _safe_side_weights(sens: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Merge equal sensitivities and sort them; return ``(c, w, missing)``.

    The probabilities must sum to one up to a rounding residue (at most
    ``PROBABILITY_SUM_TOLERANCE``). An excess is taken from the smallest
    sensitivities, which makes the sensitivity distribution stochastically
    larger (safe by 002 Lemma 2.9). A deficit ``missing = 1 - sum(w) > 0`` is
    returned: the remove direction adds it to the largest sensitivity (whether
    the described mechanism is read as "these probabilities, the rest unknown"
    or as renormalised, the completed distribution is stochastically larger, so
    it dominates by 002 Lemma 2.9), the add direction leaves ``Q`` short of it,
    which only raises the loss pointwise. Either way the analysed pair
    dominates the described one. (Counting the deficit as mass at infinite
    loss would also be safe, but it is added to delta at every step, for the
    lower bound as well: with deficits of 1e-11 over thousands of steps the
    certified lower bound rose above the truth.)

    Only the upper bound is proven for a residue: the engine analyses one pair
    per direction, and no single pair is both above and below every completion.
    Mechanisms whose probabilities are computed (``GroupPoissonSampled``,
    ``GroupFixedBatchSampled``) therefore do not come through here: they use
    ``CertifiedPMF`` weights, whose error is proven and reported to the engine.
    """
    uniq, inv = np.unique(sens, return_inverse=True)
    w = np.zeros(uniq.shape, float)
    np.add.at(w, inv, probs)
    residue = 1.0 - math.fsum(w.tolist())
    missing = 0.0
    if residue > 0:
        missing = residue
    elif residue < 0:
        excess = -residue
        for i in range(len(w)):
            take = min(w[i], excess)
            w[i] -= take
            excess -= take
            if excess <= 0:
                break
    keep = w > 0
    return uniq[keep], w[keep], missing


class _ConvexLSE:
    """``f(x) = logsumexp_i(a_i + b_i x)`` with ``b_i >= 0``: convex and non-decreasing.

    For a scalar MoG with sensitivities ``c_i`` and weights ``w_i`` (002 Def. 2.8),
    ``a_i = log w_i - c_i^2 / (2 s^2)`` and ``b_i = c_i / s^2``; the remove loss is
    ``f(x)`` and the (reflected) add loss is ``-f(-x)``.

    The inverse splits off the flat component (``b = 0``, weight ``w_0``):
    ``f(x) = s`` iff ``F(x) = s + log(1 - w_0 e^{-s})`` where ``F`` is the
    log-sum-exp over the components with ``b_i > 0`` (the same step that gives
    the closed-form Poisson inverse of 001 Sec. 6.1). ``F`` is convex with
    slopes between ``min b`` and ``max b``, so Newton's method started at the
    inverse of the max-affine envelope ``g(x) = max_i(a_i + b_i x) <= F(x)``
    stays to the right of the root and decreases to it monotonically.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray):
        flat = b == 0.0
        self.log_w0 = float(logsumexp(a[flat])) if np.any(flat) else -math.inf
        self.a, self.b = a[~flat], b[~flat]
        self.a_all, self.b_all = a, b

    def value(self, x: np.ndarray) -> np.ndarray:
        """``f(x)``; ``f(-inf) = log w_0`` (or ``-inf``) and ``f(+inf) = +inf``."""
        with np.errstate(invalid="ignore"):
            t = self.a_all + self.b_all * x[..., None]
        t = np.where(self.b_all == 0.0, self.a_all, t)  # 0 * inf is 0 here, not NaN
        m = np.max(t, axis=-1)
        fin = np.isfinite(m)
        mf = np.where(fin, m, 0.0)
        with np.errstate(divide="ignore"):
            out = mf + np.log(np.sum(np.exp(t - mf[..., None]), axis=-1))
        return np.where(fin, out, m)

    def value_and_slope(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = self.a_all + self.b_all * x[..., None]
        m = np.max(t, axis=-1)
        e = np.exp(t - m[..., None])
        tot = np.sum(e, axis=-1)
        return m + np.log(tot), (e @ self.b_all) / tot

    def inverse(self, s: np.ndarray, *, max_iter: int = 60) -> np.ndarray:
        """``x`` with ``f(x) = s`` for ``s > log w_0`` (the lower limit of ``f``).

        Long sorted inputs (the engine's grids) are solved on every 32nd point
        first; ``F^{-1}`` is concave, so linear interpolation between those
        starts each remaining point just left of its root, and Newton then
        needs two or three steps instead of five from the envelope.
        Returns a non-finite entry where the envelope cannot be formed (slopes
        ``b`` that underflow); callers fall back to the generic inverse there.
        """
        s = np.asarray(s, float)
        if math.isfinite(self.log_w0):
            with np.errstate(divide="ignore", invalid="ignore"):
                target = s + np.log(-np.expm1(self.log_w0 - s))
        else:
            target = s.copy()
        n = target.size
        if target.ndim == 1 and n > 4096 and np.all(np.diff(target) > 0):
            idx = np.unique(np.r_[np.arange(0, n, 32), n - 1])
            xc = self._newton(target[idx], self._envelope(target[idx]), max_iter)
            if np.all(np.isfinite(xc)) and np.all(np.diff(xc) > 0):
                return self._newton(target, np.interp(target, target[idx], xc), max_iter)
        return self._newton(target, self._envelope(target), max_iter)

    def _envelope(self, target: np.ndarray) -> np.ndarray:
        """Inverse of the max-affine minorant ``max_i(a_i + b_i x)`` of ``F``: a start right of the root."""
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            return np.min((target[..., None] - self.a) / self.b, axis=-1)

    def _newton(self, target: np.ndarray, x: np.ndarray, max_iter: int) -> np.ndarray:
        """Newton on the convex ``F``: from the left one step crosses the root, from the right it is monotone."""
        a, b = self.a, self.b
        x = np.array(x, float)
        active = np.flatnonzero(np.isfinite(x))
        for _ in range(max_iter):
            if active.size == 0:
                break
            xa, ta = x[active], target[active]
            t = a + b * xa[:, None]
            m = np.max(t, axis=-1)
            e = np.exp(t - m[:, None])
            tot = np.sum(e, axis=-1)
            gap = m + np.log(tot) - ta
            slope = (e @ b) / tot
            x[active] = xa - gap / slope
            done = np.abs(gap) <= 4e-16 * np.maximum(1.0, np.abs(ta))
            active = active[~done]
        return x


class _AccurateTails:
    """Tail quantiles of ``Y = L(X)``, ``X ~ P = sum_i w_i N(a_i, s^2)``, accurate down to 1e-300.

    Each component of ``P`` gets ``mass / K`` of the tail: ``x = max_i(a_i + s z_i)``
    with ``z_i = Phi^{-1}(1 - mass / (K w_i))`` computed as ``-ndtri(mass / (K w_i))``
    (``1 - mass`` would round to 1 below 1e-16). Then ``P(X > x) <= mass`` and,
    ``L`` being increasing, ``P(Y > L(x)) <= mass``; symmetrically below.
    """

    def _tail_x(self, mass: float, upper: bool) -> float:
        a = np.asarray(self.p_means, float)
        w = np.asarray(self.p_weights, float)
        r = mass * (1.0 - 1e-9) / (len(w) * w)  # margin for rounding in ndtri and the loss
        live = r < 1.0  # lighter components need no room at all
        z = special.ndtri(r[live])
        return float(np.max(a[live] - self.sigma * z)) if upper else float(np.min(a[live] + self.sigma * z))

    def upper_quantile(self, mass: float) -> float:
        _lo, hi = self.support()
        if math.isfinite(hi):
            return hi
        return float(self.loss(np.array([self._tail_x(mass, True)]))[0])

    def lower_quantile(self, mass: float) -> float:
        lo, _hi = self.support()
        if math.isfinite(lo):
            return lo
        return float(self.loss(np.array([self._tail_x(mass, False)]))[0])


class _WeightError:
    """Carries ``weight_error``: the varying side's mixture weights are known only up to a factor.

    The weights given are the true ones rounded *up*, ``p_i <= w_i <=
    (1 + r) p_i`` with ``r = weight_error`` (``CertifiedPMF``). Then every cell
    mass of the varying distribution is within a factor ``1 + r`` of the true
    one, and the true privacy loss at any output differs from the computed one
    by at most ``log(1 + r)``. Both are reported through the engine's existing
    error channels: ``outputs_at`` adds ``log1p(r)`` to the realised loss error
    (the distance between the requested loss and the *true* loss at the
    returned output), ``cell_masses`` adds ``r`` to the relative mass error
    and ``partial_mean`` the corresponding error of the first moment.

    What is covered where: upper bounds are safe in both directions (remove:
    ``P`` pointwise above the true one; add: ``Q <= (1 + r) Q_true`` is a loss
    shift of ``log1p(r)``, which the dominance cells charge on the
    connect-the-dots pair and the PRV discretisation on its coupling range).
    The PRV accountant's lower bound is covered by the relative mass error.
    The dominance (connect-dots) *lower* pairs use the realised cell masses
    only, so in the remove direction a factor ``(1 + r)^T`` on the lower delta
    (``r`` about 7e-16: 7e-10 relative at ``T = 1e6``) is not yet charged;
    that needs ``tightdp.pld.dominance._cells`` to add ``weight_error`` to its
    relative mass error ``rel`` (outside this module).
    """

    def outputs_at(self, s):
        x, err = super().outputs_at(s)
        if self.weight_error:
            err = err + math.log1p(self.weight_error) * (1.0 + 1e-6)
        return x, err

    def cell_masses(self, edges):
        below, above, masses, (rel, l1), err = super().cell_masses(edges)
        if self.weight_error:
            rel = rel + self.weight_error * (1.0 + 1e-6)
        return below, above, masses, (rel, l1), err

    def partial_mean(self, a_s, b_s):
        val, err = super().partial_mean(a_s, b_s)
        if self.weight_error:
            lo, hi = self.support()
            a, b = max(a_s, lo), min(b_s, hi)
            span = max(abs(a), abs(b)) if math.isfinite(a) and math.isfinite(b) else math.inf
            # E[Y 1{a < Y <= b}]: the masses move by a factor 1 + r, the losses by log(1 + r)
            err = err + (self.weight_error * (span + 1.0) + math.log1p(self.weight_error)) * (1.0 + 1e-6)
        return val, err


@dataclass(frozen=True)
class MixtureRemoveLoss(_WeightError, _AccurateTails, GaussianMixtureLoss):
    """Remove direction of a scalar MoG: ``P = sum p_i N(c_i, s^2)``, ``Q = N(0, s^2)`` (002 Def. 2.8).

    ``L(x) = f(x)`` with ``f`` the convex log-sum-exp of ``_ConvexLSE``; the
    inverse is Newton's method from the envelope (monotone, no table).
    ``weight_error``: see ``_WeightError`` (0 for weights taken as exact).
    """

    weight_error: float = 0.0

    @cached_property
    def _lse(self) -> _ConvexLSE:
        c, lw = np.asarray(self.p_means, float), np.log(np.asarray(self.p_weights, float))
        s2 = self.sigma**2
        return _ConvexLSE(lw - c * c / (2 * s2), c / s2)

    def loss(self, x):
        return self._lse.value(np.asarray(x, float))

    def _loss_and_slope(self, x):
        return self._lse.value_and_slope(np.asarray(x, float))

    def inverse(self, s):
        s = np.asarray(s, float)
        x = self._lse.inverse(s)
        bad = ~np.isfinite(x)  # only for sensitivities so tiny that c / s^2 underflows
        if np.any(bad):
            x[bad] = super().inverse(s[bad])
        return x


@dataclass(frozen=True)
class MixtureAddLoss(_WeightError, _AccurateTails, GaussianMixtureLoss):
    """Add direction of a scalar MoG, reflected ``x -> -x`` so the loss increases:
    ``P = N(0, s^2)``, ``Q = sum p_i N(-c_i, s^2)`` (002 Def. 2.8); ``L(x) = -f(-x)``.
    ``weight_error``: see ``_WeightError``."""

    weight_error: float = 0.0

    @cached_property
    def _lse(self) -> _ConvexLSE:
        c, lw = -np.asarray(self.q_means, float), np.log(np.asarray(self.q_weights, float))
        s2 = self.sigma**2
        return _ConvexLSE(lw - c * c / (2 * s2), c / s2)

    def loss(self, x):
        return -self._lse.value(-np.asarray(x, float))

    def _loss_and_slope(self, x):
        v, d = self._lse.value_and_slope(-np.asarray(x, float))
        return -v, d

    def inverse(self, s):
        s = np.asarray(s, float)
        x = -self._lse.inverse(-s)
        bad = ~np.isfinite(x)  # only for sensitivities so tiny that c / s^2 underflows
        if np.any(bad):
            x[bad] = super().inverse(s[bad])
        return x


@dataclass(frozen=True, kw_only=True)
class MixtureOfGaussians(Mechanism):
    """Scalar mixture-of-Gaussians mechanism (002 Def. 2.8; dp_accounting's ``MixtureOfGaussiansDpEvent``).

    ``noise_multiplier``: the noise standard deviation ``sigma`` (in units of
    the sensitivity scale). ``sensitivities``: non-negative scalars ``c_i``.
    ``probabilities``: ``p_i >= 0`` summing to one (up to 1e-9; a rounding
    residue is moved to the safe side, see ``_safe_side_weights``).

    ``privacy_losses()`` gives ``remove``: ``P = sum p_i N(c_i, s^2)`` vs
    ``Q = N(0, s^2)``, and ``add``: ``N(0, s^2)`` vs ``sum p_i N(c_i, s^2)``,
    stored reflected so that the loss is non-decreasing. All evaluations are in
    log space (``logsumexp`` over components), so sensitivities of ``k = 64``
    with ``sigma = 0.5`` (``c^2 / (2 s^2) = 8192``) do not overflow.

    Attained pair: the scalar MoG mechanism (002 Def. 2.8) on a data set whose sensitive bit is 1 against
    one where it is 0 has exactly these output laws: lower ends are certified.
    """

    type_name = "mixture_of_gaussians"
    pair_attained = True
    noise_multiplier: float
    sensitivities: tuple[float, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        sens = _as_float_tuple("sensitivities", self.sensitivities)
        probs = _as_float_tuple("probabilities", self.probabilities)
        if len(sens) != len(probs):
            raise ValueError(
                f"sensitivities and probabilities must have the same length, got {len(sens)} and {len(probs)}"
            )
        if any(p > 1.0 for p in probs):
            raise ValueError(f"probabilities must be <= 1, got {max(probs)!r}")
        total = math.fsum(probs)
        if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
            raise ValueError(f"probabilities must sum to 1, got sum {total!r}")
        object.__setattr__(self, "sensitivities", sens)
        object.__setattr__(self, "probabilities", probs)

    @cached_property
    def _components(self) -> tuple[np.ndarray, np.ndarray, float]:
        return _safe_side_weights(np.asarray(self.sensitivities, float), np.asarray(self.probabilities, float))

    @property
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """The merged, sorted sensitivities with positive probability and their probabilities."""
        c, w, _ = self._components
        return c.copy(), w.copy()

    def privacy_losses(self) -> LossPair:
        c, w, missing = self._components
        w_remove = w.copy()
        if missing > 0.0:  # the deficit goes to the largest sensitivity in the remove direction
            top = float(w_remove[-1]) + missing
            if top - float(w_remove[-1]) < missing:
                top = math.nextafter(top, math.inf)
            w_remove[-1] = top
        return _mixture_pair(c, w_remove, w, self.noise_multiplier)


def _mixture_pair(
    c: np.ndarray, w_remove: np.ndarray, w_add: np.ndarray, sigma: float, weight_error: float = 0.0
) -> LossPair:
    """The MoG's two directions: ``remove`` with P weights ``w_remove``, ``add`` with Q weights ``w_add``
    (sorted distinct sensitivities ``c``, positive weights)."""
    if c[-1] == 0.0:  # every sensitivity is zero: P == Q, but for a deficit in the add direction's Q
        zero: PrivacyLoss = DiscreteLoss(values=(0.0,), probs=(1.0,))
        q = math.fsum(w_add.tolist())
        if q >= 1.0:
            return LossPair(zero, zero)
        return LossPair(zero, DiscreteLoss(values=(-math.log(q),), probs=(1.0,)))
    cs = tuple(map(float, c))
    if len(c) == 1 and w_remove[0] == 1.0 and w_add[0] == 1.0:  # a Gaussian mechanism with sensitivity c
        loss = GaussianLoss(mu=cs[0] / sigma)
        return LossPair(loss, loss)
    if len(c) == 1 and w_remove[0] == 1.0:
        remove: PrivacyLoss = GaussianLoss(mu=cs[0] / sigma)
    else:
        remove = MixtureRemoveLoss(cs, tuple(map(float, w_remove)), (0.0,), (1.0,), sigma, weight_error=weight_error)
    add = MixtureAddLoss(
        (0.0,), (1.0,), tuple(-x for x in cs), tuple(map(float, w_add)), sigma, weight_error=weight_error
    )
    return LossPair(remove, add)


# --------------------------------------------------------------------------- certified probabilities
#: components whose probability is below this are outside double precision's relative range
_TINY_PROB = 2.0**-1021
_BITS = 128  # working precision of the interval recursion (the answer needs 53)


_SMALLEST = math.nextafter(0.0, 1.0)


def _quotient(num: int, den: int, *, up: bool) -> float:
    """A double ``>= num / den`` (``up``) or ``<= num / den`` (positive integers), within 3 units
    in the last place: a 64-bit integer quotient rounded the right way, converted (round to
    nearest, at most half a unit off) and then moved one unit further out (two units where the
    result is subnormal, whose conversion may round twice)."""
    s = 64 - (num.bit_length() - den.bit_length())
    if s >= 0:
        q, r = divmod(num << s, den)
    else:
        q, r = divmod(num, den << -s)
    if up and r:
        q += 1
    f = math.ldexp(float(q), -s)
    toward = math.inf if up else 0.0
    f = math.nextafter(f, toward)
    if f < _TINY_PROB:
        f = math.nextafter(f, toward)
    return max(f, _SMALLEST) if up else max(f, 0.0)


@dataclass(frozen=True)
class CertifiedPMF:
    """Probabilities ``p_0..p_M`` known only through a computation, with a certified error term.

    ``upper[m] >= p_m`` (rounded up) and ``lower[m] <= p_m`` (rounded down);
    ``rel_error`` bounds ``upper[m] / p_m - 1`` over the components with
    ``p_m >= 2^-1021`` (the lighter ones lie outside double precision's
    relative range: each is off by at most one subnormal unit, ``5e-324``).
    ``nearest`` is ``upper`` or ``lower``, whichever is closer (for display).
    """

    upper: tuple[float, ...]
    lower: tuple[float, ...]
    rel_error: float

    @property
    def nearest(self) -> np.ndarray:
        return np.array(self.upper)  # within 2^-52 relative of the exact value


def _certified_pmf(ratios: list[tuple[int, int]]) -> CertifiedPMF:
    """Certified probabilities ``p_m = t_m / sum(t)`` with ``t_0 = 1``, ``t_{m+1} = t_m a_m / b_m``.

    Integer interval arithmetic: every ``t_m`` is kept as ``[L_m, U_m] 2^{e_m}``
    with ``L_m, U_m`` integers of about 128 bits, the floor / ceiling taken at
    every division and shift, so ``L_m 2^{e_m} <= t_m <= U_m 2^{e_m}`` exactly
    (no floating point, no underflow: ``e_m`` is an unbounded integer). Then
    ``p_m`` lies in ``[L_m 2^{e_m} / S_U, U_m 2^{e_m} / S_L]`` with ``S_L <= sum t
    <= S_U`` the sums of the ends, evaluated exactly in integers (terms more
    than 2^1200 below the largest are bounded, not summed), and the ends are
    rounded outwards to doubles (``_quotient``). The interval is about
    ``M 2^-120`` wide relative, so ``upper`` is within 3 units in the last
    place of ``p_m`` (``rel_error`` about ``7e-16``, computed and rounded up).
    Cost: ``O(M)`` operations on integers of ``O(M)`` bits at most.
    """
    one = 1 << _BITS
    lo, hi, e = one, one, -_BITS
    ends = [(lo, hi, e)]
    for a, b in ratios:
        if a == 0:
            break
        lo, hi = (lo * a) // b, -((-hi * a) // b)
        n = hi.bit_length()
        if n > _BITS + 64:
            sh = n - _BITS
            lo, hi, e = lo >> sh, -((-hi) >> sh), e + sh
        elif n < _BITS:
            sh = _BITS - n
            lo, hi, e = lo << sh, hi << sh, e - sh
        if lo <= 0:  # cannot happen with 128 bits and a_m, b_m < 2^64; be safe all the same
            raise PrecisionError("certified probability recursion lost all precision")
        ends.append((lo, hi, e))
    e_max = max(x[2] for x in ends)
    f0 = e_max - 1200  # terms below 2^f0 are bounded, not summed
    s_lo = sum(lo << (e - f0) for lo, hi, e in ends if e >= f0)
    s_hi = sum(hi << (e - f0) for lo, hi, e in ends if e >= f0) + sum(1 for _, _, e in ends if e < f0)
    upper, lower, rel = [], [], 0.0
    for lo, hi, e in ends:
        if e < f0:  # p_m < 2^(e + 192 - f0) / s_lo < 2^-2000: nothing a double can hold
            upper.append(_SMALLEST)
            lower.append(0.0)
            continue
        u = _quotient(hi << (e - f0), s_lo, up=True)
        d = _quotient(lo << (e - f0), s_hi, up=False)
        upper.append(u)
        lower.append(d)
        if d >= _TINY_PROB:  # u - d is exact (Sterbenz); the quotient is rounded up twice over
            rel = max(rel, math.nextafter((u - d) / d * (1.0 + 2.0**-51), math.inf))
    return CertifiedPMF(tuple(upper), tuple(lower), rel)


def certified_binomial(k: int, q: float) -> CertifiedPMF:
    """``Binom(k, q)`` for the double ``q`` taken exactly (``q = a / 2^j``): ``t_{m+1} / t_m = (k - m) a / ((m + 1)(2^j - a))``."""
    a, d = float(q).as_integer_ratio()
    if a == d:  # q = 1: everything on m = k
        z = (0.0,) * k
        return CertifiedPMF(z + (1.0,), z + (1.0,), 0.0)
    return _certified_pmf([((k - m) * a, (m + 1) * (d - a)) for m in range(k)])


def certified_hypergeometric(k: int, b: int, n: int) -> CertifiedPMF:
    """``Hypergeom(B, n + k, k)``: ``p_m = C(k, m) C(n, B - m) / C(n + k, B)`` for ``m = 0..min(k, B)``;
    ``p_{m+1} / p_m = (k - m)(B - m) / ((m + 1)(n - B + m + 1))`` (``B <= n``, so every term is positive)."""
    return _certified_pmf([((k - m) * (b - m), (m + 1) * (n - b + m + 1)) for m in range(min(k, b))])


# --------------------------------------------------------------------------- group sensitivities
def binomial_sensitivity(group_size: int, sampling_rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivities ``0..k`` and probabilities ``Binom(k, q)`` (002 Thm 3.1).

    The probabilities are ``certified_binomial``'s upper ends: each within
    3 units in the last place above the exact value (``q`` taken exactly).
    """
    k = check_count("group_size", group_size)
    q = check_probability("sampling_rate", sampling_rate)
    return np.arange(k + 1, dtype=float), np.array(certified_binomial(k, q).upper)


def hypergeometric_sensitivity(group_size: int, batch_size: int, dataset_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivities ``2 m`` with ``m ~ Hypergeom(B, n + k, k)`` (002 Thm 3.3).

    ``m`` counts the group members among ``B`` draws without replacement from
    ``n + k`` examples of which ``k`` belong to the group (scipy:
    ``hypergeom(M=n + k, n=k, N=B)``). Each member drawn displaces one other
    example, so the batch gradient moves by at most ``2`` per member. The
    probabilities are ``certified_hypergeometric``'s upper ends (within 3 units
    in the last place; scipy's ``logpmf`` is off by up to 1e-11 relative here).
    """
    k, b, n = _check_fixed_batch(group_size, batch_size, dataset_size)
    return 2.0 * np.arange(min(k, b) + 1), np.array(certified_hypergeometric(k, b, n).upper)


def _group_pair(sens: np.ndarray, pmf: CertifiedPMF, sigma: float) -> LossPair:
    """The dominating pair of a MoG whose probabilities are computed, not given (002 Thm 3.1 / 3.3).

    Safe sides. The weights are the certified upper ends ``w_i`` with
    ``p_i <= w_i <= (1 + r) p_i`` (``r = pmf.rel_error``, about 7e-16), used in
    both directions:

    * remove (``P = sum w_i N(c_i)`` vs ``N(0)``): ``P`` is pointwise at least
      the true one, so delta(eps) = int (P - e^eps Q)_+ is at least the true one
      for every eps: the upper bound is safe as it stands; for the lower bound
      ``P`` is at most ``1 + r`` times the true one;
    * add (``N(0)`` vs ``Q = sum w_i N(-c_i)``): ``Q`` too large lowers delta,
      and ``Q <= (1 + r) Q_true`` moves every loss by at most ``log(1 + r)``.

    Both deviations are a relative error ``r`` on every cell mass and a loss
    error ``log(1 + r)`` at every output, which the losses report to the
    engine through ``weight_error`` (``_WeightError`` says which bound of
    which accountant charges them). What would *not* be safe: renormalising computed
    probabilities (a deficit in the true top component, renormalised away,
    lowers the upper bound), counting a deficit as mass at infinite loss for
    the lower bound (it adds ``T`` times the deficit to the lower delta: the
    cause of certified lower bounds above the truth, issue 15), or dropping
    mass in the add direction (a lighter ``Q`` raises delta, so not a lower
    bound). Components below ``2^-1021`` (outside relative precision) carry
    ``5e-324`` at most, above their exact value: safe for the upper bound.
    """
    w = np.array(pmf.upper)
    keep = w > 0.0
    c, w = sens[keep], w[keep]
    return _mixture_pair(c, w, w, sigma, weight_error=pmf.rel_error)


def _check_fixed_batch(group_size, batch_size, dataset_size) -> tuple[int, int, int]:
    k = check_count("group_size", group_size)
    b = check_count("batch_size", batch_size)
    n = check_count("dataset_size", dataset_size)
    if b > n:
        raise ValueError(f"batch_size ({b}) must be <= dataset_size ({n})")
    if k > n:
        raise ValueError(f"group_size ({k}) must be <= dataset_size ({n})")
    return k, b, n


@dataclass(frozen=True, kw_only=True)
class GroupPoissonSampled(Mechanism):
    """One DP-SGD step with Poisson sampling, seen by a group of up to ``group_size`` examples.

    Dominated (tightly) by ``MixtureOfGaussians`` with sensitivity
    ``Binom(group_size, sampling_rate)`` and the same noise (002 Thm 3.1);
    ``group_size = 1`` is the Poisson-subsampled Gaussian.

    Attained pair (002 Sec. 3.3, tightness): one-dimensional gradients, ``+1`` for each of the
    ``group_size`` records of the group and 0 for every other record; adding the group moves the sum by
    ``Binom(group_size, q)``, which is the returned mixture. Lower ends are certified.
    """

    type_name = "group_poisson_sampled"
    pair_attained = True
    noise_multiplier: float
    sampling_rate: float
    group_size: int

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "group_size", check_count("group_size", self.group_size))

    def as_mixture(self) -> MixtureOfGaussians:
        """The dominating MoG with the probabilities rounded (up) to doubles; ``privacy_losses`` does not
        go through it but uses the certified probabilities directly (see ``_group_pair``)."""
        c, p = binomial_sensitivity(self.group_size, self.sampling_rate)
        return MixtureOfGaussians(
            noise_multiplier=self.noise_multiplier, sensitivities=tuple(c.tolist()), probabilities=tuple(p.tolist())
        )

    def privacy_losses(self) -> LossPair:
        return _group_pair(
            np.arange(self.group_size + 1, dtype=float),
            certified_binomial(self.group_size, self.sampling_rate),
            self.noise_multiplier,
        )


@dataclass(frozen=True, kw_only=True)
class GroupFixedBatchSampled(Mechanism):
    """One DP-SGD step with a fixed batch of ``batch_size`` drawn without replacement from a data
    set of at least ``dataset_size`` examples, for groups of up to ``group_size`` examples
    under add-or-remove-up-to-k adjacency.

    Dominated (tightly) by ``MixtureOfGaussians`` with sensitivity
    ``2 * Hypergeom(B, n + k, k)`` and the same noise (002 Thm 3.3).

    Attained pair (002 Sec. 3.3, tightness): a data set ``D`` of exactly ``dataset_size`` records, each with
    one-dimensional gradient ``+1``, and ``D'`` = ``D`` plus ``group_size`` records with gradient ``-1``
    (add-up-to-k). A batch of ``B`` from ``D`` sums to ``B``; from ``D'`` it holds
    ``m ~ Hypergeom(B, n + k, k)`` group records and sums to ``B - 2 m``. After the public shift by ``B``
    the outputs are ``N(0)`` and the mixture of ``N(-2 m)``: the returned pair (the remove direction is the
    same pair of data sets read the other way). So the pair is attained under add/remove-up-to-k and lower
    ends are certified.
    """

    type_name = "group_fixed_batch_sampled"
    pair_attained = True
    noise_multiplier: float
    batch_size: int
    dataset_size: int
    group_size: int

    def __post_init__(self):
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        k, b, n = _check_fixed_batch(self.group_size, self.batch_size, self.dataset_size)
        object.__setattr__(self, "group_size", k)
        object.__setattr__(self, "batch_size", b)
        object.__setattr__(self, "dataset_size", n)

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.dataset_size

    def as_mixture(self) -> MixtureOfGaussians:
        """The dominating MoG with the probabilities rounded (up) to doubles; ``privacy_losses`` does not
        go through it but uses the certified probabilities directly (see ``_group_pair``)."""
        c, p = hypergeometric_sensitivity(self.group_size, self.batch_size, self.dataset_size)
        return MixtureOfGaussians(
            noise_multiplier=self.noise_multiplier, sensitivities=tuple(c.tolist()), probabilities=tuple(p.tolist())
        )

    def privacy_losses(self) -> LossPair:
        k, b, n = self.group_size, self.batch_size, self.dataset_size
        return _group_pair(2.0 * np.arange(min(k, b) + 1), certified_hypergeometric(k, b, n), self.noise_multiplier)
