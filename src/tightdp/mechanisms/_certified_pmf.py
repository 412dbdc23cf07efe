"""Certified probabilities of the binomial and hypergeometric laws: integer interval arithmetic, rounded outwards.

The group mechanisms of ``tightdp.mechanisms.mixture`` (Ganesh 2024, Thm 3.1 and 3.3) and the
sampling-with-replacement loss of ``tightdp.mechanisms.subsampled`` take their mixture weights from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import FloatArray
from ..errors import PrecisionError

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
    def nearest(self) -> FloatArray:
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
