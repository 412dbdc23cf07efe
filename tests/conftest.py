import json
import os
from pathlib import Path

import mpmath
import pytest
from hypothesis import settings
from scipy import optimize

# Property tests draw the same examples on every run ("ci", the default), so a CI failure reproduces and a submission
# is not refused by the luck of a draw; HYPOTHESIS_PROFILE=explore draws fresh examples, ten times as many, to hunt
# for new counterexamples before a change is submitted; HYPOTHESIS_PROFILE=fast (make test-fast) draws 8 examples per
# property for the edit-test loop. Tests that still pin max_examples themselves override the profile.
# No per-example deadline: timing goals are checked by benchmarks, and a loaded CI machine must not fail a property.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("fast", derandomize=True, max_examples=8, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, max_examples=1000, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


#: reference values (papers and peers; each entry names its source), see tests/data/README.md
REFERENCE = json.loads((Path(__file__).parent / "data" / "public_reference.json").read_text())


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


@pytest.fixture
def gdp():
    return gdp_delta_mp, gdp_epsilon_mp
