"""Helpers shared by the test modules: paths, the reference values, exact GDP curves and the example budget.

Test modules import them as ``from _support import ...`` (``tests/`` is on ``sys.path`` through the
``pythonpath`` setting of ``[tool.pytest.ini_options]``, whatever the import mode).
"""

import json
from pathlib import Path

import mpmath
from hypothesis import settings
from scipy import optimize

#: the ``tests/`` folder, the repository root and the reference data (see tests/data/README.md)
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"

#: reference values (papers and peers; each entry names its source), see tests/data/README.md
REFERENCE = json.loads((DATA / "public_reference.json").read_text())

#: the number of examples a property test draws under the default "ci" profile
CI_EXAMPLES = 100


def scaled(n: int) -> int:
    """The example budget of a property test that draws ``n`` examples under the "ci" profile, scaled by the
    active hypothesis profile: ``n`` under "ci", ``n * 5 / 100`` (at least 1) under "fast", ``10 n`` under
    "explore". For tests whose examples are expensive: ``@settings(max_examples=scaled(6), deadline=None)``."""
    return max(1, round(n * settings().max_examples / CI_EXAMPLES))


def gdp_delta_mp(eps: float, mu: float) -> float:
    """Exact delta(eps) of mu-GDP (Dong, Roth, Su 2019, Cor. 2.13) with 60 digits."""
    mpmath.mp.dps = 60
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    ncdf = lambda x: mpmath.ncdf(x)
    return float(ncdf(-e / m + m / 2) - mpmath.exp(e) * ncdf(-e / m - m / 2))


def power_by_squaring(base, k: int, convolve):
    """The ``k``-fold convolution of the vector ``base`` with itself by repeated squaring, ``convolve`` doing
    each product (``np.convolve``: direct sums of non-negative products; ``scipy.signal.fftconvolve``)."""
    out = None
    while k:
        if k & 1:
            out = base if out is None else convolve(out, base)
        k >>= 1
        if k:
            base = convolve(base, base)
    return out


def gdp_epsilon_mp(delta: float, mu: float) -> float:
    """Exact epsilon(delta) of mu-GDP by bracketing on the 60-digit delta."""
    mpmath.mp.dps = 60
    f = lambda e: mpmath.log(max(mpmath.mpf(gdp_delta_mp(e, mu)), mpmath.mpf(10) ** -300)) - mpmath.log(delta)
    hi = 1.0
    while f(hi) > 0:
        hi *= 2
    return optimize.brentq(lambda e: float(f(e)), 0.0, hi, xtol=1e-12)


def mixture_delta_mp(p_comps, q_comps, sigma: float, eps: float, bracket: float = 2000.0):
    """delta(eps) of ``P = sum w N(a, sigma^2)`` against ``Q = sum v N(b, sigma^2)`` (``p_comps``, ``q_comps``: lists
    of ``(mean, weight)``; ``min a >= max b``, so the loss rises in the output and the supremum is over the sets
    ``{X > x}``, at the ``x`` where the loss is ``eps``: found by bisection in ``[-bracket, bracket]``), in mpmath
    at the working precision."""
    s = mpmath.mpf(sigma)

    def dens(comps, x):
        return mpmath.fsum(w * mpmath.exp(-((x - a) ** 2) / (2 * s * s)) for a, w in comps)

    def above(comps, x):
        return mpmath.fsum(w * mpmath.ncdf((a - x) / s) for a, w in comps)

    e = mpmath.mpf(eps)
    lo, hi = -mpmath.mpf(bracket), mpmath.mpf(bracket)
    for _ in range(400):
        x = (lo + hi) / 2
        if mpmath.log(dens(p_comps, x) / dens(q_comps, x)) > e:
            hi = x
        else:
            lo = x
    return above(p_comps, x) - mpmath.exp(e) * above(q_comps, x)


def two_step_banded_delta(a: float, q: float, sigma: float, eps: float) -> float:
    """Both directions' hockey-stick divergence at ``eps`` of the fixed-unit-gradient pair of two Poisson steps
    (rate ``q``, noise ``sigma``) with ``C = [[1, 0], [a, 1]]``: ``P = sum_B w_B N(C B, sigma^2 I)`` against
    ``Q = N(0, sigma^2 I)``, by a 2-D Riemann sum on a fine grid (error far below 1e-6)."""
    import math

    import numpy as np
    from scipy.stats import norm

    lo, hi, m = -9 * sigma, 2 + a + 9 * sigma, 1601
    x = np.linspace(lo, hi, m)
    h = x[1] - x[0]
    px = [norm.pdf(x, loc=mu, scale=sigma) for mu in (0.0, 1.0)]
    py = {mu: norm.pdf(x, loc=mu, scale=sigma) for mu in (0.0, 1.0, a, 1.0 + a)}
    p = np.zeros((m, m))
    for b0 in (0, 1):  # B = (B0, B1): mean (B0, a B0 + B1)
        for b1 in (0, 1):
            wt = (q if b0 else 1 - q) * (q if b1 else 1 - q)
            p += wt * np.outer(px[b0], py[a * b0 + b1])
    qd = np.outer(px[0], py[0.0])
    e = math.exp(eps)
    return max(float(np.maximum(p - e * qd, 0).sum() * h * h), float(np.maximum(qd - e * p, 0).sum() * h * h))


def mp_convolve_power(step: dict, n: int) -> dict:
    """The law of the sum of ``n`` independent draws from ``step`` (integer keys -> mpmath masses), exactly:
    ``n``-fold convolution by enumeration (``{0: 1}`` for ``n = 0``)."""
    law = {0: mpmath.mpf(1)}
    for _ in range(n):
        nxt: dict = {}
        for a, pa in law.items():
            for x, px in step.items():
                nxt[a + x] = nxt.get(a + x, 0) + pa * px
        law = nxt
    return law
