"""FFT composition of discretised privacy losses, with every error term accounted for.

Composition adds independent PRVs, so the PLD of a composition is the
convolution of the PLDs (Koskela et al. 2020, Sec. 4-5; Gopi et al. 2021, Alg. 1). We compute it on a window
of ``N`` grid points with a circular FFT: self-composition by powering the
spectrum and heterogeneous composition by products (Koskela et al. 2020, Sec. 5.5).

Two numerical devices keep the answer certified:

* **Exponential tilting.** Every discretised PLD ``w`` is replaced by
  ``w_lam(y) = w(y) exp(lam y) / M(lam)``; tilting commutes with
  convolution, so the composition is ``w(y) = w_lam(y) exp(log_norm - lam y)``.
  With ``lam`` at the saddle point of the epsilon of interest, the part of the
  distribution that decides ``delta(eps)`` carries O(1) tilted mass, so FFT
  round-off (absolute, about 1e-16 of the total mass) stays negligible relative
  to ``delta`` even for ``delta = 1e-30``.
* **Chernoff windows.** The circular FFT computes the distribution of the sum
  modulo the period. The window ``[lo, hi]`` is chosen from the exact cumulant
  generating functions of the discretised PLDs (Koskela et al. 2020, Sec. 7, Chernoff bound) so
  that the tilted mass outside it is at most ``tau`` on each side; that mass is
  both what wraps around (aliasing) and what the window misses, and the bounds
  add or subtract it.

The FFT round-off itself is bounded a priori: each spectrum coefficient of a
probability vector is computed with absolute error at most
``gamma = 5 u log2 N`` and ``|a^c - b^c| <= (|a| + gamma)^c - |a|^c`` for
``|a - b| <= gamma``; by Parseval the l1 error of the result is at most the l2
norm of the spectrum error (plus the inverse transform's own rounding).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import cast

import numpy as np
from scipy import fft as sfft

from .._types import ComplexArray, FloatArray
from ..errors import GridTooLargeError
from ._chernoff import _cgf, _tail_masses, _tilted_weights, _window
from ._chernoff import chernoff_epsilon as chernoff_epsilon
from ._chernoff import chernoff_window as chernoff_window
from ._chernoff import saddle_epsilon as saddle_epsilon
from ._chernoff import saddle_tilt as saddle_tilt
from ._composed import ComposedPLD as ComposedPLD
from ._composed import _tail_coupling_shift as _tail_coupling_shift
from ._composed import hockey_stick_points as hockey_stick_points
from ._composed import merge_tails as merge_tails
from .discretise import Terms

__all__ = [
    "ComposedPLD",
    "compose",
    "convolution_power",
    "saddle_tilt",
    "chernoff_epsilon",
    "chernoff_window",
    "saddle_epsilon",
    "merge_tails",
]

_U = cast(float, np.finfo(float).eps / 2)  # unit round-off (a numpy float64)
#: the largest composition window (points); a pass near it holds about 200 bytes per point (13 GB, README)
_MAX_POINTS = 1 << 26


#: self-compositions up to this count power the spectrum by repeated squaring, beyond it by exp(c log phi)
_SQUARING_MAX = 1 << 12


def _powers(phi: ComplexArray, mag: FloatArray, gamma: float, c: int) -> tuple[ComplexArray, FloatArray, FloatArray]:
    """``phi^c``, ``(|phi| + gamma)^c`` and ``|phi|^c`` (the last two for the round-off bound of ``compose``).

    ``phi^c`` is computed only where ``c log|phi| > -700``; elsewhere it is set to 0 and so is
    ``|phi|^c``, which keeps ``(|phi| + gamma)^c - |phi|^c >= |exact^c - 0|`` a valid error bound
    there (``|exact| <= |phi| + gamma``). Exactly zero coefficients never reach a logarithm.
    For ``c <= _SQUARING_MAX`` the power is formed by repeated squaring: every computed product is
    ``xy (1 + e)`` with ``|e| <= sqrt(5) u`` (Brent, Percival, Zimmermann 2007), and by induction the
    computed ``phi^c`` is ``phi^c prod (1 + e_j)^(n_j)`` with ``sum n_j = c - 1``, a relative error
    below ``(1 + sqrt(5) u)^(c - 1) - 1 < 4 c u``; no intermediate underflows, because every
    ``|phi|^m`` with ``m <= c`` is at least ``min(1, |phi|^c) > e^-700`` (``|phi| <= 1 + gamma``).
    Beyond it ``exp(c log phi)`` errs by about ``c u (pi + |log|phi||)`` relative. ``compose`` charges
    ``(4 c + 800) u (|phi| + gamma)^c`` per powered term, which covers both.
    """
    if c == 1:
        return phi, mag + gamma, mag
    with np.errstate(divide="ignore", under="ignore"):
        lb = c * np.log(mag + gamma)  # mag + gamma > 0
        lm = c * np.log(mag)  # -inf where mag == 0 (c > 0: no inf * 0)
        b_ = np.exp(np.where(lb > -745.0, lb, -np.inf))
    live = lm > -700.0
    e_ = np.zeros_like(mag)
    pw = np.zeros_like(phi)
    if not np.any(live):
        return pw, b_, e_
    e_[live] = np.exp(lm[live])
    all_live = bool(live.all())
    ph = phi if all_live else phi[live]
    out: ComplexArray | None = None
    if c <= _SQUARING_MAX:
        base, e = ph, c
        while True:
            if e & 1:
                out = base.copy() if out is None else out * base
            e >>= 1
            if not e:
                break
            base = base * base
    else:
        out = np.exp(c * np.log(ph))
    assert out is not None  # c >= 1
    if all_live:
        return out, b_, e_
    pw[live] = out
    return pw, b_, e_


#: compositions of at most this many steps, with at most this many multiply-adds, are convolved directly;
#: longer ones too while their repeated squaring stays below ``_DIRECT_MANY_OPS`` (small lattices: pure DP,
#: randomized response, whose deep tails the FFT's absolute round-off would hide)
_DIRECT_MAX_STEPS = 8
_DIRECT_MAX_OPS = 5e8  # about 0.1 s of np.convolve
_DIRECT_MANY_OPS = 3e7  # a few milliseconds: beyond it the FFT is faster


def _power_plan(size: int, c: int) -> float:
    """Multiply-adds of ``c``-fold self-convolution of a ``size``-vector by repeated squaring."""
    ops, base, acc, e = 0.0, size, 0, c
    while e:
        if e & 1:
            if acc:
                ops += float(acc) * base
                acc += base - 1
            else:
                acc = base
        e >>= 1
        if e:
            ops += float(base) * base
            base = 2 * base - 1
    return ops


def convolution_power(
    base: FloatArray, c: int, g_base: float = 0.0, *, floor: float = 0.0
) -> tuple[FloatArray, float, int]:
    """``base`` (non-negative) convolved with itself ``c`` times by repeated squaring: ``(out, g, lead)``.

    Every entry of a convolution of non-negative vectors is a sum of non-negative products,
    computed with a relative error of at most ``(m + 2) u`` for ``m`` terms per sum (Higham,
    Accuracy and Stability, Sec. 3.1); a product of vectors with relative error counts ``g_x, g_y``
    has ``g_x + g_y`` plus its own rounding, so the counts add through the squarings (Lemma 3.3):
    every computed entry is within a factor ``1 +- g / (1 - g)`` of the exact power of the vector
    ``base`` stands for, if ``base`` itself is within ``g_base``. Underflow aside: an entry below the
    smallest normal float has an absolute error of up to a few ``2^-1074`` per product.

    ``floor > 0`` trims, after every product, the entries at both ends below ``floor`` times the
    largest entry (their mass, at most ``floor`` times the vector's size per trim, is the caller's to
    charge); ``lead`` is the number of leading entries trimmed (``out[i]`` is entry ``i + lead``).

    Parameters
    ----------
    base : FloatArray
        A non-negative vector.
    c : int
        The power, >= 1.
    g_base : float, default 0.0
        The relative error count of ``base`` itself.
    floor : float, default 0.0
        Trim level relative to the largest entry (0: no trimming).

    Returns
    -------
    tuple
        ``(out, g, lead)``: the power (``FloatArray``), its relative error count (float) and the number of
        leading entries trimmed (int).

    Raises
    ------
    ValueError
        If ``c < 1``.
    """
    if int(c) < 1:
        raise ValueError(f"c must be a positive integer, got {c!r}")
    out: FloatArray | None = None
    g_out, lead_out = 0.0, 0
    lead = 0
    e = int(c)
    while e:
        if e & 1:
            if out is None:
                out, g_out, lead_out = base, g_base, lead
            else:
                g_out += g_base + (min(out.size, base.size) + 2) * _U
                out = np.convolve(out, base)
                lead_out += lead
                if floor > 0.0:
                    out, cut = _trim(out, floor)
                    lead_out += cut
        e >>= 1
        if e:
            g_base = 2.0 * g_base + (base.size + 2) * _U
            base = np.convolve(base, base)
            lead *= 2
            if floor > 0.0:
                base, cut = _trim(base, floor)
                lead += cut
    assert out is not None  # c >= 1: the lowest set bit of c assigned it
    return out, g_out, lead_out


def _trim(v: FloatArray, floor: float) -> tuple[FloatArray, int]:
    """``v`` without the entries at both ends below ``floor * max(v)``, and how many leading ones went."""
    keep = np.flatnonzero(v >= floor * float(v.max()))
    if keep.size == 0:  # an all-zero vector (everything underflowed): nothing to trim against
        return v, 0
    return v[keep[0] : keep[-1] + 1], int(keep[0])


def _compose_direct(
    live: Terms,
    h: float,
    shift: float,
    inf_mass: float,
    truncated: float,
    hoeff: float,
    mean_err: float,
    total_count: int,
    tv: float,
    up_rel: float,
    low_factor: float,
) -> ComposedPLD | None:
    """The composition by direct convolution, or ``None`` when too many steps or too long.

    Every entry of a convolution of non-negative vectors is a sum of non-negative products,
    computed with a *relative* error of at most ``(m + 2) u / (1 - (m + 2) u)`` for ``m`` terms
    per sum (Higham, Accuracy and Stability, Sec. 3.1), so a few steps need neither the FFT's
    absolute round-off nor tilting nor a window: one step (``k = 1``) is its own pmf exactly,
    and delta far below the FFT's round-off (1e-12 at k = 1, say) keeps full relative precision.
    A step repeated ``c`` times is powered by repeated squaring; a product of vectors with relative
    errors ``g_x, g_y`` has ``g_x + g_y`` plus its own rounding, so the counts add up as in Higham's
    Lemma 3.3 (``g / (1 - g)`` at the end). The rounding is charged as a relative mass error
    (``up_rel``, ``low_factor``); there is no aliasing and no window truncation.
    """
    ops, n = 0.0, 0
    for d, c in live:
        ops += _power_plan(d.pmf.size, c)
        if n:
            ops += float(n) * (c * (d.pmf.size - 1) + 1)
        n = n + c * (d.pmf.size - 1) + (0 if n else 1)
    if ops > (_DIRECT_MAX_OPS if total_count <= _DIRECT_MAX_STEPS else _DIRECT_MANY_OPS):
        return None
    out: FloatArray | None = None
    g_out = 0.0
    log_norm = 0.0
    for d, c in live:
        mass = float(d.pmf.sum())
        log_norm += c * math.log(mass)
        # the sum behind ``mass`` and the division
        power, g_power, _ = convolution_power(d.pmf / mass, c, (d.pmf.size + 1) * _U)
        if out is None:
            out, g_out = power, g_power
        else:
            g_out += g_power + (min(out.size, power.size) + 2) * _U
            out = np.convolve(out, power)
    g = g_out / (1.0 - g_out)
    up = (1.0 + up_rel) * (1.0 + g) - 1.0
    low = low_factor * (1.0 - g)
    start = sum(c * d.start for d, c in live)
    assert out is not None  # ``live`` is not empty (``compose`` checks)
    out = np.maximum(out, 0.0)
    return ComposedPLD(
        h=h,
        offset=start * h + shift,
        tilted=out,
        tilt=0.0,
        log_norm=log_norm,
        infinity_mass=inf_mass,
        truncated_mass=truncated,
        hoeffding_sq=hoeff,
        mean_error=mean_err,
        alias_mass=0.0,
        float_error=0.0,
        compositions=total_count,
        tv_error=tv,
        up_rel=up,
        low_factor=low,
    )


def compose(
    terms: Terms,
    *,
    tilt: float = 0.0,
    tau: float = 1e-13,
    window: tuple[float, float] | None = None,
    size: int | None = None,
) -> ComposedPLD:
    """Compose ``count`` copies of each discretised loss (all on the same mesh ``h``).

    ``window`` fixes the loss range (the Fourier accountant's ``[-L, L]``);
    otherwise it comes from Chernoff bounds at level ``tau``. The tilted mass
    outside the window is bounded either way and reported as ``alias_mass``. A few short steps are
    convolved directly instead (relative round-off only, no window: ``_compose_direct``).

    Parameters
    ----------
    terms : sequence of (DiscretisedLoss, int)
        The discretised losses and how many times each is composed (counts <= 0 are skipped).
    tilt : float, default 0.0
        The exponential tilt (``saddle_tilt``): FFT round-off stays relative to the mass near the epsilon of
        interest.
    tau : float, default 1e-13
        The tilted mass allowed outside a Chernoff window on each side.
    window : tuple of float or None, default None
        A fixed loss range ``(lo, hi)`` (the Fourier accountant's ``[-L, L]``) instead of a Chernoff window.
    size : int or None, default None
        The number of FFT points for a fixed ``window`` (default: enough for the mesh).

    Returns
    -------
    ComposedPLD
        The composition with every error term (``alias_mass``, ``float_error``, ``pointwise_error``, ...).

    Raises
    ------
    ValueError
        If no term has a positive count ("nothing to compose") or the losses do not share one mesh.
    GridTooLargeError
        If the window would need more than ``2^26`` grid points (epsilon too large for the mesh).

    References
    ----------
    Koskela et al. 2020 (Fourier accountant), Alg. 1, Sec. 5.5 (heterogeneous composition) and Sec. 7
    (Chernoff window); Gopi et al. 2021 (PRV accountant), Alg. 1.
    """
    terms = [(d, int(c)) for d, c in terms if c > 0]
    if not terms:
        raise ValueError("nothing to compose")
    h = terms[0][0].h
    if any(abs(d.h - h) > 1e-15 * h for d, _ in terms):
        raise ValueError("all discretised losses must share one mesh")
    total_count = sum(c for _, c in terms)
    shift = sum(c * d.shift for d, c in terms)
    # 1 - prod (1 - p)^c without cancellation (a mass of 1e-18 at +inf must not round to 0)
    inf_mass = (
        -math.expm1(sum(c * math.log1p(-min(d.infinity_mass, 1.0 - 1e-16)) for d, c in terms))
        if all(d.infinity_mass < 1.0 for d, _ in terms)
        else 1.0
    )
    truncated = min(1.0, sum(c * d.truncated_mass for d, c in terms))
    hoeff = sum(c * d.coupling_range**2 for d, c in terms)
    tails = merge_tails([(d.coupling_tails, c) for d, c in terms])
    mean_err = sum(c * d.mean_error for d, c in terms)
    tv = sum(c * d.tv_error for d, c in terms)
    # computed = exact (1 + e), |e| <= r per term: exact <= computed / (1 - r)^c and >= computed / (1 + r)^c
    up_rel = math.expm1(-sum(c * math.log1p(-d.rel_error) for d, c in terms))
    low_factor = math.exp(-sum(c * math.log1p(d.rel_error) for d, c in terms))
    live = [(d, c) for d, c in terms if d.mass > 0]
    if not live:
        return ComposedPLD(
            h,
            0.0,
            np.zeros(1),
            0.0,
            -math.inf,
            inf_mass,
            truncated,
            hoeff,
            mean_err,
            0.0,
            0.0,
            total_count,
            tv,
            up_rel,
            low_factor,
            tails,
        )

    if window is None:
        direct = _compose_direct(
            live, h, shift, inf_mass, truncated, hoeff, mean_err, total_count, tv, up_rel, low_factor
        )
        if direct is not None:
            return replace(direct, coupling_tails=tails) if tails else direct
        lo, hi, K0 = _window(live, tilt, tau)
        j0 = math.floor(lo / h) - 1
        n = sfft.next_fast_len(max(16, math.ceil(hi / h) + 2 - j0), real=True)
        alias = 2.0 * tau
    else:
        K0 = _cgf(live, tilt)
        lo, hi = window[0] - shift, window[1] - shift  # window is given in loss values
        j0 = math.floor(lo / h + 0.5)
        n = int(size) if size is not None else sfft.next_fast_len(math.ceil((hi - lo) / h) + 1, real=True)
        # bound the tilted mass outside [j0 h, (j0 + n - 1) h] by Chernoff
        t_lo, t_hi = _tail_masses(live, tilt, K0, j0 * h, (j0 + n - 1) * h)
        alias = min(2.0, t_hi + t_lo)
    if n > _MAX_POINTS:
        raise GridTooLargeError(
            f"the composition window would need {n:.3g} grid points (mesh {h:.3g}, "
            f"{(n * h):.3g} loss units wide): epsilon is too large for this eps_error; "
            "loosen eps_error"
        )

    gamma = 5.0 * _U * math.log2(n)
    spec = None
    abs_bound = None  # product of (|phi| + gamma)^c
    abs_exact = None  # product of |phi|^c
    for d, c in live:
        w = _tilted_weights(d, tilt)
        # index j holds grid value (start + j) h; the composed index m then holds
        # (sum_i c_i start_i + m) h, re-aligned to the window below
        if w.size <= n:
            vec = np.zeros(n)
            vec[: w.size] = w
        else:  # wrap around the period
            vec = cast(FloatArray, np.bincount(np.arange(w.size) % n, weights=w, minlength=n))  # float64: weighted
        phi = sfft.rfft(vec)
        mag = np.abs(phi)
        pw, b_, e_ = _powers(phi, mag, gamma, c)
        spec = pw if spec is None else spec * pw
        abs_bound = b_ if abs_bound is None else abs_bound * b_
        abs_exact = e_ if abs_exact is None else abs_exact * e_
    assert spec is not None and abs_bound is not None and abs_exact is not None  # ``live`` is not empty
    out = sfft.irfft(spec, n)
    base = sum(c * d.start for d, c in live)
    out = np.roll(out, -((j0 - base) % n))
    # computing phi^c as exp(c log phi) errs by about c u (pi + |log|phi||) relative; live entries have
    # |c log|phi|| <= 745, so (4 c + 800) u per powered term covers it (c = 1 is not powered)
    powered = sum(1 for _, c in live if c > 1)
    diff = (abs_bound - abs_exact) + (4.0 * total_count + 800.0 * powered) * _U * abs_bound
    weights = np.full(diff.size, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    float_err = math.sqrt(float(np.sum(weights * diff * diff))) + gamma * float(np.sum(weights * np.abs(spec)))
    # one entry: irfft's i-th output is (1/n) sum_j w_j Re(X_j e^(...)), so the spectrum's errors move it by at
    # most (1/n) sum w diff; the inverse transform's own rounding is at most its l2 error, gamma ||x||_2
    # = gamma ||X||_2 / sqrt(n) (Parseval)
    point_err = (
        float(np.sum(weights * diff)) / n + gamma * math.sqrt(float(np.sum(weights * np.abs(spec) ** 2)) / n)
    ) * (1.0 + 1e-6)
    # true masses are >= 0, so clipping can only reduce the (already bounded) error
    out = np.maximum(out, 0.0)
    offset = j0 * h + shift
    log_norm = K0 + tilt * shift
    return ComposedPLD(
        h=h,
        offset=offset,
        tilted=out,
        tilt=tilt,
        log_norm=log_norm,
        infinity_mass=inf_mass,
        truncated_mass=truncated,
        hoeffding_sq=hoeff,
        mean_error=mean_err,
        alias_mass=alias,
        float_error=float_err,
        compositions=total_count,
        tv_error=tv,
        up_rel=up_rel,
        low_factor=low_factor,
        coupling_tails=tails,
        pointwise_error=min(point_err, float_err),
    )
