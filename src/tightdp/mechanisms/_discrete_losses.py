"""Exact privacy-loss distributions of discrete noise, enumerated atom by atom on a window of integer outputs.

``DiscreteGaussianLoss``, ``DistributedDiscreteGaussianLoss`` and ``SkellamLoss`` share ``_LatticeLoss``
(``_lattice_loss``: CDFs from prefix sums, cells for the dominance engine); the window bounds, the discrete Gaussian's
normaliser and the errors carried are stated at each function. The mechanisms that use them, and the
dominance argument that makes the shift ``Delta`` the worst neighbour, are in ``tightdp.mechanisms.discrete``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._types import FloatArray
from ..errors import GridTooLargeError, PrecisionError
from ._ddg_blocks import sum_law_bound
from ._lattice_loss import _U, _Arrays, _finish, _LatticeLoss

#: each noise law's mass outside the enumerated window is below this (``_window``)
_WINDOW_TAIL = 1e-75
#: most outputs a discrete Gaussian's PLD enumerates (about 37 sigma + Delta)
_MAX_ATOMS = 8_000_000
#: the loss lattice (spacing Delta / sigma^2) is declared to the engine (``lattice_atoms``) when sigma is at most
#: ``_LATTICE_SIGMA_ANY`` (at Delta >= 1 the spacing is then at least ``_LATTICE_SPACING``), or at most
#: ``_LATTICE_SIGMA`` with a spacing of at least ``_LATTICE_SPACING``: the composition is then exact on the lattice
#: (every atom on a grid point), with about ``sigma sqrt(k)`` grid points per standard deviation of ``k`` composed
#: steps whatever Delta; a denser lattice, or a larger sigma, would force a needlessly fine mesh, and there the
#: atoms are near-continuous and a mesh of the variance model's meets the accuracy asked for
_LATTICE_SIGMA_ANY = 50.0
_LATTICE_SIGMA = 200.0
_LATTICE_SPACING = 1.0 / 2500.0
#: most outputs a Skellam PLD enumerates (each a 30-digit Bessel function)
_MAX_SKELLAM = 200_000
#: the distributed discrete Gaussian's sum is taken as the discrete Gaussian of the summed variance (no convolution)
#: where the two laws agree to within this log-factor at every output (``_sum_law_log_error``): below the atoms'
#: own rounding error (about 8e-14 at the window's edge)
_SUM_LAW_LOG_ERROR = 1e-13


def discrete_gaussian_log_normaliser(sigma: float) -> tuple[float, float]:
    """``(log Z, err)``: ``Z(sigma) = sum_(x in Z) exp(-x^2 / (2 sigma^2))`` and a bound on the absolute error
    of its computed logarithm.

    ``sigma >= 1``: Jacobi's identity (Poisson summation) ``Z = sigma sqrt(2 pi) theta`` with
    ``theta = 1 + 2 sum_(k >= 1) exp(-2 pi^2 sigma^2 k^2)``; the terms ``k = 1, 2`` are summed and the rest,
    at most ``4 exp(-18 pi^2 sigma^2) <= 1e-76``, bounded. ``sigma < 1``: the direct sum over ``|x| <= 40``
    (``exp(-40^2 / 2) < 1e-347``: nothing is left out that a double holds), by ``math.fsum``.

    Parameters
    ----------
    sigma : float
        Scale of the discrete Gaussian, positive.

    Returns
    -------
    tuple of float
        ``(log_z, error)``.

    Raises
    ------
    ValueError
        Not raised here: ``sigma`` is the caller's to validate (``DiscreteGaussian`` accepts ``[1e-3, 1e5]``).

    References
    ----------
    Canonne, Kamath, Steinke 2020, Sec. 2 (the normaliser and Poisson summation).
    """
    if sigma >= 1.0:
        c = 2.0 * math.pi * math.pi * sigma * sigma
        theta = 1.0 + 2.0 * (math.exp(-c) + math.exp(-4.0 * c))
        log_z = math.log(sigma) + 0.5 * math.log(2.0 * math.pi) + math.log1p(theta - 1.0)
        err = 8.0 * _U * (abs(log_z) + 1.0) + 4.0 * math.exp(-9.0 * c)
        return log_z, err
    x = np.arange(1, 41, dtype=float)
    z = 1.0 + 2.0 * math.fsum(np.exp(-x * x / (2.0 * sigma * sigma)).tolist())
    log_z = math.log(z)
    # each term: its exponent rounded by 3u relative (up to 800 in size), then exp by u; fsum is exact
    return log_z, (3.0 * 800.0 + 4.0) * _U + 4.0 * _U * abs(log_z)


def _window(sigma: float, delta: int) -> tuple[int, int, float]:
    """``(lo, hi, tail)``: the outputs ``lo..hi`` enumerated and a bound on the mass that ``N_Z(0)`` and
    ``N_Z(Delta)`` each put outside them. With ``m`` such that ``(m + 1)^2 / (2 sigma^2) >= 173``,
    ``sum_(x > m) exp(-x^2 / (2 sigma^2)) <= exp(-(m + 1)^2 / (2 sigma^2)) / (1 - exp(-(2m + 3) / (2 sigma^2)))``
    (consecutive terms fall by at least that ratio), twice for both sides, over ``Z >= 1``."""
    m = int(math.ceil(sigma * math.sqrt(2.0 * 173.0))) + 1
    lo, hi = -m, delta + m
    r = (2 * m + 3) / (2.0 * sigma * sigma)
    tail = 2.0 * math.exp(-((m + 1) ** 2) / (2.0 * sigma * sigma)) / -math.expm1(-r) * (1.0 + 1e-9)
    return lo, hi, max(tail, 1e-300)


@dataclass(frozen=True)
class DiscreteGaussianLoss(_LatticeLoss):
    """Exact PLD of the discrete Gaussian with integer shift ``delta``, optionally Poisson-subsampled.

    Outputs ``x`` in the window ``[-m, delta + m]`` (``_window``); with ``A = N_Z(delta, sigma^2)`` and
    ``B = N_Z(0, sigma^2)``, ``l(x) = log(A(x) / B(x)) = (2 delta x - delta^2) / (2 sigma^2)`` and
    ``direction`` ``"remove"``: ``P = q A + (1 - q) B``, ``Q = B``, ``L = log(1 - q + q e^l)`` (increasing
    in ``x``); ``"add"``: ``P = B``, ``Q = q A + (1 - q) B``, ``L = -log(1 - q + q e^l)`` (decreasing).
    ``q = 1`` is the unsampled mechanism (``L = l``).

    The P- and Q-masses of every atom are computed from their closed forms (``exp`` of a rounded exponent
    minus the certified ``log Z``), within a relative error ``atom_rel`` (``_arrays``); cells sum atoms
    (at most ``n u`` more for ``n`` atoms). Each atom's loss is the rounded value of its closed form,
    within ``loss_err``: charged as an edge error (a loss shift) by the engine.

    Parameters
    ----------
    sigma : float
        Scale of the discrete Gaussian, positive.
    delta : int
        The integer shift ``Delta``, positive.
    q : float, default 1.0
        Sampling rate in ``(0, 1]``; ``1`` is the unsampled mechanism.
    direction : str, default "remove"
        ``"remove"`` or ``"add"``.

    Raises
    ------
    GridTooLargeError
        When its atoms are first used, if the window holds more than 8,000,000 outputs.

    References
    ----------
    Canonne, Kamath, Steinke 2020, Def. 1 (the law); Koskela et al. 2020, Sec. 6.1 (subsampling).
    """

    sigma: float
    delta: int
    q: float = 1.0
    direction: str = "remove"

    def _enumerate(self) -> _Arrays:
        lo, hi, tail = _window(self.sigma, self.delta)
        if hi - lo + 1 > _MAX_ATOMS:
            raise GridTooLargeError(
                f"the discrete Gaussian with sigma={self.sigma:g} and sensitivity={self.delta} would enumerate "
                f"{hi - lo + 1:,} outputs (cap {_MAX_ATOMS:,}): "
                + ("sigma" if self.sigma >= self.delta else "the sensitivity")
                + " is too large for the exact PLD"
            )
        log_z, z_err = discrete_gaussian_log_normaliser(self.sigma)
        # 2 sigma sigma: one rounding (the doubling is exact)
        return _gaussian_atoms(
            2.0 * self.sigma * self.sigma, 1, log_z, z_err, lo, hi, tail, self.delta, self.q, self.direction
        )

    def lattice_atoms(self) -> tuple[float, ...]:
        """Two neighbouring atoms of the loss lattice (spacing ``Delta / sigma^2``).

        Unsampled only, and for ``sigma <= 50``, or ``sigma <= 200`` with a spacing of at least ``1 / 2500``: a
        denser lattice would force a needlessly fine mesh (``_LATTICE_SIGMA``).

        Returns
        -------
        tuple of float
            Two atoms, or none.
        """
        if self.q < 1.0 or self.sigma > _LATTICE_SIGMA:
            return ()
        s2 = 2.0 * self.sigma * self.sigma
        d = float(self.delta)
        if self.sigma > _LATTICE_SIGMA_ANY and 2.0 * d / s2 < _LATTICE_SPACING:
            return ()
        return ((d * d - 2.0 * d) / s2, (d * d) / s2)

    def without_lattice(self) -> DiscreteGaussianLoss | None:
        """The same loss without its lattice declared, where composing on the lattice is optional: for
        ``sigma > 50`` (``_LATTICE_SIGMA_ANY``), whose lattice is finer than a mesh of the variance model's. The
        connect-the-dots accountant takes it when the composition's window at the lattice's spacing would be
        large (``_connect_dots_core._LATTICE_POINTS``).

        Returns
        -------
        DiscreteGaussianLoss or None
            The loss with the same atoms and no lattice, or ``None`` (no lattice, or one that is always used).
        """
        if not self.lattice_atoms() or self.sigma <= _LATTICE_SIGMA_ANY:
            return None
        out = _NoLatticeDiscreteGaussianLoss(self.sigma, self.delta, self.q, self.direction)
        out.__dict__["_arrays"] = self._arrays  # the same atoms: not enumerated again
        return out


def _gaussian_atoms(
    s2: float,
    s2_roundings: int,
    log_z: float,
    z_err: float,
    lo: int,
    hi: int,
    tail: float,
    delta: int,
    q: float,
    direction: str,
    law_log_err: float = 0.0,
) -> _Arrays:
    """The atoms of the (subsampled) shift pair of a discrete Gaussian law ``exp(-x^2 / s2 - log_z)`` on the outputs
    ``lo..hi`` (``DiscreteGaussianLoss`` has the pairs): ``s2`` is ``2 sigma^2`` within ``s2_roundings`` roundings,
    ``log_z`` the log normaliser within ``z_err``, ``tail`` the mass outside the window, and the noise's true law
    within a factor ``e^(+-law_log_err)`` of this one at every output (0: it is this law; the distributed discrete
    Gaussian's sum, ``_sum_law_log_error``).

    Errors: each exponent ``-(x - d)^2 / s2 - log_z`` is within ``(s2_roundings + 3) u`` of its size (the
    quotient's roundings and the subtraction's; ``(x - d)^2`` is an exact integer below 2^53) plus ``z_err``, and
    ``exp`` adds ``u``; the mixture ``3u``; the true law's factor ``e^law_log_err - 1``. Each loss is a difference
    of two logs of masses, so the true law moves it by at most ``2 law_log_err`` on top of its rounding."""
    x = np.arange(lo, hi + 1, dtype=float)
    d = float(delta)
    ya = -((x - d) * (x - d)) / s2 - log_z
    yb = -(x * x) / s2 - log_z
    a, b = np.exp(ya), np.exp(yb)
    ell = (2.0 * d * x - d * d) / s2  # exact integer numerator, one rounded division
    if q >= 1.0:
        pm, qm, v = a, b, ell
        # an exact numerator over ``s2`` (within ``s2_roundings`` roundings), one division
        l_err = (s2_roundings + 1.0) * _U * float(np.max(np.abs(ell)))
    else:
        mix = q * a + (1.0 - q) * b
        lv = np.logaddexp(math.log1p(-q), math.log(q) + ell)
        pm, qm, v = (mix, b, lv) if direction == "remove" else (b, mix, -lv)
        l_err = (
            8.0
            * _U
            * (1.0 + float(np.max(np.abs(ell))) + float(np.max(np.abs(lv))) + abs(math.log(q)) + abs(math.log1p(-q)))
        )
    if direction == "add" and q < 1.0:  # the loss decreases in x: reverse to increasing order
        v, pm, qm = v[::-1], pm[::-1], qm[::-1]
    y_max = float(max(np.max(np.abs(ya)), np.max(np.abs(yb))))
    atom_rel = 1.02 * (((s2_roundings + 3) * y_max + 8.0) * _U + z_err) + (3.0 * _U if q < 1.0 else 0.0)
    if law_log_err > 0.0:
        atom_rel += 1.01 * math.expm1(law_log_err)
        l_err += 2.01 * law_log_err
        tail *= 1.01 * math.exp(law_log_err)
    return _finish(v, pm, qm, atom_rel, l_err, tail)


@dataclass(frozen=True)
class _NoLatticeDiscreteGaussianLoss(DiscreteGaussianLoss):
    """``DiscreteGaussianLoss`` with no lattice declared (``DiscreteGaussianLoss.without_lattice``): its atoms are
    placed in the cells of a mesh of the variance model's, as near-continuous."""

    def lattice_atoms(self) -> tuple[float, ...]:
        return ()

    def without_lattice(self) -> DiscreteGaussianLoss | None:
        return None


def _ddg_pmf(sigma: float, clients: int) -> tuple[int, FloatArray, float, float]:
    """``(lo, pmf, rel, missing)``: the law of a sum of ``clients`` independent ``N_Z(0, sigma^2)`` on
    ``lo, lo + 1, ...``, each entry within a factor ``1 +- rel`` of the law of the sum of the *windowed*
    variables (each cut to ``_window``), and ``missing`` bounding the total mass the windows and the trimming
    leave out (so ``sum |computed - exact| <= rel + missing``).

    Binary powering with direct convolutions (``np.convolve`` of non-negative arrays: each entry a sum of
    non-negative products, relative error at most ``(len + 1) u`` per convolution); after each product the
    ends lighter than ``1e-90`` in all are trimmed and counted in ``missing``."""
    lo1, hi1, tail = _window(sigma, 0)
    log_z, z_err = discrete_gaussian_log_normaliser(sigma)
    x = np.arange(lo1, hi1 + 1, dtype=float)
    y = -(x * x) / (2.0 * sigma * sigma) - log_z
    base = np.exp(y)
    eta = 1.02 * ((4.0 * float(np.max(np.abs(y))) + 8.0) * _U + z_err)

    def trim(lo: int, a: FloatArray, rel: float) -> tuple[int, FloatArray, float]:
        c = np.cumsum(a)
        i = int(np.searchsorted(c, 1e-90, side="right"))
        r = np.cumsum(a[::-1])
        j = int(np.searchsorted(r, 1e-90, side="right"))
        cut = (float(c[i - 1]) if i else 0.0) + (float(r[j - 1]) if j else 0.0)
        return lo + i, a[i : a.size - j], cut * (1.0 + rel) * 1.01

    # each array is (lo, masses, rel, deficit): deficit bounds the mass it lacks against the exact law; a
    # convolution lacks at most the sum of its factors' deficits, a trimmed array its trimmed mass more
    result: tuple[int, FloatArray, float, float] | None = None
    power: tuple[int, FloatArray, float, float] = (lo1, base, eta, tail)
    n = clients
    while n:
        if n & 1:
            if result is None:
                result = power
            else:
                rel = result[2] + power[2] + result[2] * power[2] + (min(result[1].size, power[1].size) + 1) * _U * 1.01
                lo, arr, cut = trim(result[0] + power[0], np.convolve(result[1], power[1]), rel)
                result = (lo, arr, rel, result[3] + power[3] + cut)
        n >>= 1
        if n:
            rel = 2 * power[2] + power[2] ** 2 + (power[1].size + 1) * _U * 1.01
            lo, arr, cut = trim(2 * power[0], np.convolve(power[1], power[1]), rel)
            power = (lo, arr, rel, 2 * power[3] + cut)
    assert result is not None  # clients >= 1 sets it
    r_lo, law, r_rel, missing = result
    return r_lo, law, r_rel, missing


def _sum_law_log_error(sigma: float, clients: int) -> float:
    """A bound ``t`` with ``e^-t <= P(X_1 + ... + X_n = z) / N_Z(0, n sigma^2)(z) <= e^t`` at every integer ``z``, for
    ``n = clients`` independent ``X_i ~ N_Z(0, sigma^2)``: 0 for one client, else ``_ddg_blocks.sum_law_bound``
    (Lemma A there: its induction bounds this ratio by ``t_n``, and its ``T = t_n + e`` bounds it too; the extra
    ``e`` is below 1e-13 wherever this bound is used, and it is never lost to an underflow)."""
    return 0.0 if clients <= 1 else sum_law_bound(sigma, clients)


@dataclass(frozen=True)
class DistributedDiscreteGaussianLoss(_LatticeLoss):
    """Exact PLD (up to a certified l1 error below 1e-70) of the distributed discrete Gaussian: the sum of
    ``clients`` independent ``N_Z(0, sigma^2)`` noises (Kairouz, Liu, Steinke 2021), integer shift ``delta``,
    optionally Poisson-subsampled (pairs as ``DiscreteGaussianLoss``).

    Where sigma is large enough that the sum's law is the discrete Gaussian of the summed variance ``clients
    sigma^2`` to within a factor ``e^(+-1e-13)`` at every output (``_sum_law_log_error``: sigma above about 2.3 for
    any number of clients), the atoms are that law's (``DiscreteGaussianLoss``'s closed forms), the factor charged
    to their masses and losses. Otherwise the sum's law is computed by ``_ddg_pmf`` (relative error ``rel``, deficit
    ``missing``); outputs where
    either shifted copy was trimmed are left out and their mass added to ``missing``, which goes to ``+inf``
    for upper bounds and, twice, to the engine's l1 (total-variation) error. The sum of log-concave laws is
    log-concave (Hoggar 1974) and symmetric, so ``tightdp.mechanisms.discrete``'s dominance argument applies.
    Losses are differences of logs of computed masses: within ``2.1 rel + 4u (1 + |L|)``.

    Parameters
    ----------
    sigma : float
        Scale of each client's discrete Gaussian, positive.
    clients : int
        Number of clients, a positive integer.
    delta : int
        The integer shift ``Delta``, positive.
    q : float, default 1.0
        Sampling rate in ``(0, 1]``; ``1`` is the unsampled mechanism.
    direction : str, default "remove"
        ``"remove"`` or ``"add"``.

    Raises
    ------
    GridTooLargeError
        When its atoms are first used, if the sum's law is narrower than the shift, or its window would hold more
        than 8,000,000 outputs (``sigma * sqrt(clients)`` or the sensitivity too large).

    References
    ----------
    Kairouz, Liu, Steinke 2021 (the mechanism); Hoggar 1974 (log-concavity of the sum).
    """

    sigma: float
    clients: int
    delta: int
    q: float = 1.0
    direction: str = "remove"

    def _enumerate(self) -> _Arrays:
        law_err = _sum_law_log_error(self.sigma, self.clients)
        if law_err <= _SUM_LAW_LOG_ERROR:
            return self._from_summed_variance(law_err)
        _lo, pmf, rel, missing = _ddg_pmf(self.sigma, self.clients)
        d = self.delta
        if pmf.size <= 2 * d:
            raise GridTooLargeError("the distributed discrete Gaussian's law is narrower than the shift")
        missing += (float(np.sum(pmf[:d])) + float(np.sum(pmf[-d:]))) * (1.0 + rel) * 1.01
        b, a = pmf[d:], pmf[:-d]  # B(x) = pmf(x), A(x) = pmf(x - d), for x = lo + d, ..., lo + size - 1
        with np.errstate(divide="ignore"):
            ell = np.log(a) - np.log(b)
        q = self.q
        if q >= 1.0:
            pm, qm, v = a, b, ell
        else:
            mix = q * a + (1.0 - q) * b
            lv = np.logaddexp(math.log1p(-q), math.log(q) + ell)
            pm, qm, v = (mix, b, lv) if self.direction == "remove" else (b, mix, -lv)
        keep = (pm > 0) & (qm > 0) & np.isfinite(v)
        missing += float(np.sum(pm[~keep])) * 1.01
        v, pm, qm = v[keep], pm[keep], qm[keep]
        order = np.argsort(v, kind="stable")
        v, pm, qm = v[order], pm[order], qm[order]
        l_err = 2.1 * rel + 8.0 * _U * (1.0 + float(np.max(np.abs(v))) + float(np.max(np.abs(ell[keep]))))
        return _finish(v, pm, qm, rel + 4.0 * _U, l_err, max(missing, 1e-300))

    def _from_summed_variance(self, law_err: float) -> _Arrays:
        """The atoms from the discrete Gaussian of the summed variance ``clients sigma^2``, whose law is the sum's
        within ``e^+-law_err`` at every output (``_sum_law_log_error``): no convolution (three clients of sigma 1e5
        convolved 3.7 million outputs with themselves, for hours)."""
        v = self.clients * (self.sigma * self.sigma)  # two roundings (2 v adds none: doubling is exact)
        sigma_n = math.sqrt(v)
        lo, hi, tail = _window(sigma_n, self.delta)
        if hi - lo + 1 > _MAX_ATOMS:
            raise GridTooLargeError(
                f"the distributed discrete Gaussian with sigma={self.sigma:g}, clients={self.clients} and "
                f"sensitivity={self.delta} would enumerate {hi - lo + 1:,} outputs (cap {_MAX_ATOMS:,}): "
                + ("sigma * sqrt(clients)" if sigma_n >= self.delta else "the sensitivity")
                + " is too large for the exact PLD"
            )
        log_z, z_err = discrete_gaussian_log_normaliser(sigma_n)
        # sqrt(v) is within 2u of the true scale: log Z's log(sigma) term moves by at most that much more
        return _gaussian_atoms(
            2.0 * v, 2, log_z, z_err + 3.0 * _U, lo, hi, tail, self.delta, self.q, self.direction, law_err
        )

    @property
    def _l1(self) -> float:  # type: ignore[override]
        return 2.0 * self._arrays[-1]


def _skellam_window(mu: float, delta: int) -> tuple[int, int, float]:
    """``(lo, hi, tail)`` for ``Sk(mu)`` (difference of two Poisson(mu)): Chernoff,
    ``P(X >= m) <= exp(-m t + 2 mu (cosh t - 1))`` at ``t = asinh(m / (2 mu))``, below ``1e-75`` outside
    ``[-m, Delta + m]`` for both ``Sk(mu)`` and ``Sk(mu) + Delta``."""

    def bound(m: int) -> float:
        t = math.asinh(m / (2.0 * mu))
        return math.exp(-m * t + 2.0 * mu * (math.cosh(t) - 1.0))

    m = max(2, int(math.ceil(20.0 * math.sqrt(2.0 * mu))))
    while 2.0 * bound(m + 1) > _WINDOW_TAIL:
        m = int(m * 1.25) + 1
    return -m, delta + m, max(2.0 * bound(m + 1) * (1.0 + 1e-9), 1e-300)


_MILLER_REL = 1e-26  # the bound on each of Miller's two truncation terms that the start must reach


def _bessel_ratio_upper(k: FloatArray, x: float) -> FloatArray:
    """``U_k = x / (k + sqrt((k + 2)^2 + x^2)) >= I_(k+1)(x) / I_k(x)`` for integers ``k >= 0`` (``U_k <= 1``).

    Proof, from two facts. (1) ``P(Sk = k) = e^(-x) I_k(x)`` is log-concave in ``k`` (Skellam is a convolution of
    log-concave Poisson laws), so ``r_k = I_(k+1) / I_k`` is non-increasing. (2) The recurrence
    ``I_(k-1) - I_(k+1) = (2k / x) I_k`` reads ``r_(k-1) = 1 / (2k / x + r_k)``. With (1), ``r_k >= r_(k+1)`` in
    ``r_k = 1 / (2(k+1) / x + r_(k+1))`` gives ``r_k^2 + (2(k+1) / x) r_k >= 1``, i.e.
    ``r_k >= L_k = x / (k + 1 + sqrt((k+1)^2 + x^2))``; then ``r_k <= 1 / (2(k+1) / x + L_(k+1))``, which
    simplifies (``x L_(k+1) = sqrt((k+2)^2 + x^2) - (k+2)``) to ``U_k``."""
    return np.asarray(x / (k + np.sqrt((k + 2.0) ** 2 + x * x)), dtype=float)


def _miller_start(x: float, top: int) -> tuple[int, float]:
    """The start ``N > top`` of Miller's recurrence and its truncation bound (``_skellam_masses``' docstring):
    the least ``N`` (searched in chunks) with ``theta = prod_(j=top..N) U_j`` and
    ``eta = (2 / (1 - U_(N+1)) + 2N + 1) prod_(j=0..N) U_j`` both at most ``_MILLER_REL``; returns
    ``(N, theta + eta)``."""
    log_head = float(np.sum(np.log(_bessel_ratio_upper(np.arange(top, dtype=float), x))))  # j < top
    log_tail = 0.0  # sum of log U_j for j = top .. n
    n = top
    chunk = max(64, int(math.sqrt(x)))
    target = math.log(_MILLER_REL)
    while True:
        js = np.arange(n, n + chunk, dtype=float)
        cum = log_tail + np.cumsum(np.log(_bessel_ratio_upper(js, x)))
        u_next = _bessel_ratio_upper(js + 1.0, x)
        factor = np.log(2.0 / np.maximum(1.0 - u_next, 1e-300) + 2.0 * js + 1.0)
        ok = (cum <= target) & (log_head + cum + factor <= target)
        if ok.any():
            i = int(np.argmax(ok))
            theta = math.exp(float(cum[i]))
            eta = math.exp(float(log_head + cum[i] + factor[i]))
            return int(js[i]), theta + eta
        log_tail = float(cum[-1])
        n += chunk


def _skellam_masses(x2: Any, top: int) -> list[Any]:
    """``P(Sk = k) = e^(-x) I_k(x)`` (``x = 2 mu``, an mpmath number) for ``k = 0 .. top``, each within
    ``2 _MILLER_REL`` plus ``4 (N + 3)`` units of the working precision, relative, by Miller's algorithm: the backward
    recurrence ``J_(k-1) = J_(k+1) + (2k / x) J_k`` from ``(J_(N+1), J_N) = (0, 1)``, normalised by
    ``I_0 + 2 sum_(k>=1) I_k = e^x``.

    Truncation (Olver's analysis of Miller's algorithm, made explicit): the recurrence's solutions are
    ``I_k`` and ``(-1)^k K_k``; the one vanishing at ``N + 1`` is ``J_k = A (I_k + (-1)^(N-k) (I_(N+1) / K_(N+1))
    K_k)`` with ``A > 0``. As ``K_k <= K_(N+1)`` for ``k <= N + 1`` (``K_nu = int_0^inf e^(-x cosh t) cosh(nu t) dt``
    grows with ``nu``), ``J_k / A = I_k (1 + e_k)`` with ``|e_k| <= I_(N+1) / I_k <= theta = prod_(j=top..N) U_j``
    for ``k <= top`` (``_bessel_ratio_upper``, each ``U_j <= 1``), and the normaliser is ``A e^x (1 + eta)`` with
    ``|eta| <= e^(-x) (2 sum_(k>N) I_k + (2N + 1) I_(N+1)) <= (2 / (1 - U_(N+1)) + 2N + 1) prod_(j=0..N) U_j``
    (``r_k <= U_(N+1)`` past ``N``, ``e^(-x) I_0 <= 1``). So each mass is within ``(theta + eta) / (1 - eta)``
    relative; ``_miller_start`` picks ``N`` with both at most ``_MILLER_REL``. Rounding: every term is positive (no
    cancellation); each step's three roundings add at most ``3`` units to the larger relative error of its two
    inputs, and a sum of positive terms and the division at most ``N + 2`` more. The result is asserted below 1e-20, far below a
    double's rounding (``SkellamLoss`` charges ``4u`` on each float mass). mpmath's own Bessel function does
    not converge at ``x`` in the millions."""
    import mpmath

    n, trunc = _miller_start(float(x2), top)
    rounding = 4.0 * (n + 3) * 2.0 ** (1 - mpmath.mp.prec)
    if trunc + rounding > 1e-20:  # unreachable at 30 digits below the window cap; a guard, not a branch
        raise PrecisionError(
            f"the Skellam masses: Miller's algorithm's error bound {trunc + rounding:.3g} (start {n}, "
            f"{mpmath.mp.prec} bits) exceeds 1e-20"
        )
    j = [mpmath.mpf(0)] * (n + 2)
    j[n] = mpmath.mpf(1)
    for k in range(n, 0, -1):
        j[k - 1] = j[k + 1] + (2 * k / x2) * j[k]
    total = j[0] + 2 * mpmath.fsum(j[1:])
    return [j[k] / total for k in range(top + 1)]


@dataclass(frozen=True)
class SkellamLoss(_LatticeLoss):
    """Exact PLD of the Skellam mechanism (noise ``Sk(mu) = Pois(mu) - Pois(mu)``, Agarwal, Kairouz, Liu
    2021) with integer shift ``delta``, optionally Poisson-subsampled (pairs as ``DiscreteGaussianLoss``).

    ``P(X = k) = e^(-2 mu) I_k(2 mu)`` is evaluated in mpmath (30 digits; ``I_k`` the modified Bessel function, by
    Miller's backward recurrence normalised by ``sum_k I_k = e^(2 mu)``, its truncation and rounding bounded a
    priori: ``_skellam_masses``),
    so each float mass and each loss is within a few ulp (``atom_rel = 4u``; the loss error ``4u (1 + |L|)``).
    ``Sk(mu)`` is symmetric and log-concave (a convolution of log-concave laws), so ``tightdp.mechanisms.discrete``'s
    dominance argument applies: the shift ``Delta`` is the worst neighbour.

    Parameters
    ----------
    mu : float
        The Poisson parameter of each component, positive.
    delta : int
        The integer shift ``Delta``, positive.
    q : float, default 1.0
        Sampling rate in ``(0, 1]``; ``1`` is the unsampled mechanism.
    direction : str, default "remove"
        ``"remove"`` or ``"add"``.

    Raises
    ------
    GridTooLargeError
        When its atoms are first used, if the window holds more than 200,000 outputs.

    References
    ----------
    Agarwal, Kairouz, Liu 2021 (the mechanism).
    """

    mu: float
    delta: int
    q: float = 1.0
    direction: str = "remove"

    def _enumerate(self) -> _Arrays:
        import mpmath

        lo, hi, tail = _skellam_window(self.mu, self.delta)
        if hi - lo + 1 > _MAX_SKELLAM:
            raise GridTooLargeError(
                f"the Skellam mechanism with mu={self.mu:g} would enumerate {hi - lo + 1:,} "
                f"outputs (cap {_MAX_SKELLAM:,})"
            )
        with mpmath.workdps(30):
            x2 = mpmath.mpf(2) * mpmath.mpf(self.mu)
            top = max(abs(lo - self.delta), abs(hi))
            masses = _skellam_masses(x2, top)
            logp = {k: mpmath.log(masses[abs(k)]) for k in range(lo - self.delta, hi + 1)}
            q = mpmath.mpf(self.q)
            vl: list[float] = []
            pl: list[float] = []
            ql: list[float] = []
            for x in range(lo, hi + 1):
                la, lb = logp[x - self.delta], logp[x]  # A = Sk + Delta, B = Sk
                if self.q >= 1.0:
                    lp, lq = la, lb
                elif self.direction == "remove":
                    lp, lq = mpmath.log(q * mpmath.exp(la) + (1 - q) * mpmath.exp(lb)), lb
                else:
                    lp, lq = lb, mpmath.log(q * mpmath.exp(la) + (1 - q) * mpmath.exp(lb))
                vl.append(float(lp - lq))
                pl.append(float(mpmath.exp(lp)))
                ql.append(float(mpmath.exp(lq)))
        v, pm, qm = np.array(vl), np.array(pl), np.array(ql)
        order = np.argsort(v, kind="stable")  # the loss is monotone in x (log-concavity); sort to be sure
        v, pm, qm = v[order], pm[order], qm[order]
        l_err = 4.0 * _U * (1.0 + float(np.max(np.abs(v))))
        return _finish(v, pm, qm, 4.0 * _U, l_err, tail)
