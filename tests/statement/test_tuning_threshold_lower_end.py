"""The lower end of a tuning procedure from a concrete tuned instance: the best of ``K`` runs under the score
``1{L > c}`` (``tightdp._tuning_lower``).

Checked against the exact epsilon of that instance for a Gaussian run (the released run's output, computed here
with mpmath from the loss's closed form ``L ~ N(+-mu^2/2, mu^2)``, sharing no code with the library), against
the procedure's certified upper end, and against one run when ``K = 1``.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp._tuning_lower import tuned_lower_epsilon
from tightdp._tuning_profile import StoppingLaw
from tightdp.mechanisms import Gaussian, PoissonSampled
from tightdp.tuning import tuning_epsilon


def _pgf(dist: str, mean: float, runs: int):
    """``f(z) = E z^K`` of the law, in mpmath."""
    if dist == "fixed":
        return lambda z: z**runs
    if dist == "poisson":
        return lambda z: mp.e ** (mean * (z - 1))
    gamma = mp.mpf(1) / mean  # geometric on {1, 2, ...}: mean 1 / gamma
    return lambda z: gamma * z / (1 - (1 - gamma) * z)


def _instance_delta(mu, c, eps, f):
    """Exact ``delta(eps)`` of the tuned Gaussian run that releases the best run's output under ``1{L > c}``
    (ties: the first run). Given some run above ``c``, the released output has the law of one run given
    ``L > c``; given none (and ``K >= 1``), given ``L <= c``; ``K = 0`` is the same atom on both sides."""
    sp = mp.ncdf(-(c - mu**2 / 2) / mu)  # P(L > c)
    sq = mp.ncdf(-(c + mu**2 / 2) / mu)  # Q(L > c)
    above = ((1 - f(1 - sp)) / sp, (1 - f(1 - sq)) / sq)  # density factors on {L > c}
    below = ((f(1 - sp) - f(0)) / (1 - sp), (f(1 - sq) - f(0)) / (1 - sq))  # on {L <= c}

    def part(wp, wq, lo, hi):  # integral over lo < L <= hi of [wp p - e^eps wq q]_+, q = p e^-L
        t = max(lo, eps + mp.log(wq / wp))
        if t >= hi:
            return mp.mpf(0)
        p_mass = mp.ncdf((hi - mu**2 / 2) / mu) - mp.ncdf((t - mu**2 / 2) / mu)
        q_mass = mp.ncdf((hi + mu**2 / 2) / mu) - mp.ncdf((t + mu**2 / 2) / mu)
        return wp * p_mass - mp.e**eps * wq * q_mass

    return part(*above, c, mp.inf) + part(*below, -mp.inf, c)


def _instance_epsilon(mu, c, delta, f):
    lo, hi = mp.mpf(0), mp.mpf(60)
    for _ in range(80):
        mid = (lo + hi) / 2
        if _instance_delta(mu, c, mid, f) > delta:
            lo = mid
        else:
            hi = mid
    return float(hi)


@pytest.mark.parametrize(
    "sigma, dist, mean, delta",
    [
        (1.0, "geometric", 10.0, 1e-6),
        (2.0, "poisson", 10.0, 1e-6),
        (0.7, "fixed", 10.0, 1e-6),
        (1.5, "geometric", 10.0, 1e-3),
        (2.33, "geometric", 60.0, 6e-3),  # E K S_Q not small: the best threshold lies above the answer
    ],
)
def test_lower_end_lies_below_the_exact_instance_and_above_one_run(sigma, dist, mean, delta):
    mp.mp.dps = 40
    runs = 10
    kw = {"runs": runs} if dist == "fixed" else {"mean": mean}
    b = tuning_epsilon(run=Gaussian(noise_multiplier=sigma), delta=delta, distribution=dist, **kw)
    c = b.details["lower_threshold"]
    assert b.details["lower_method"].startswith("threshold score")
    exact = _instance_epsilon(mp.mpf(1) / sigma, mp.mpf(c), delta, _pgf(dist, mean, runs))
    assert b.lower <= exact, (b, exact)
    assert b.lower >= exact - 1e-3, (b, exact)  # the tail bounds lose little here (measured: 1e-4 at most)
    target = delta / -math.expm1(-mean) if dist == "poisson" else delta
    one = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=sigma)).epsilon(target)
    assert b.lower > float(one.lower)
    assert b.lower <= b.upper


_RUN = st.tuples(st.floats(0.01, 0.5), st.floats(0.7, 3.0), st.integers(1, 20))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    run=_RUN,
    dist=st.sampled_from(["fixed", "geometric", "poisson", "negative-binomial"]),
    mean=st.floats(1.0, 30.0),
    runs=st.integers(1, 30),
    shape=st.floats(0.2, 3.0),
    delta=st.sampled_from([1e-3, 1e-6, 1e-9]),
)
def test_lower_end_never_exceeds_the_upper_end(run, dist, mean, runs, shape, delta):
    q, sigma, steps = run
    ledger = [(PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q), steps)]
    if dist == "fixed":
        kw = {"runs": runs}
    else:
        kw = {"mean": mean, **({"shape": shape} if dist == "negative-binomial" else {})}
    b = tuning_epsilon(run=ledger, delta=delta, distribution=dist, **kw)
    assert 0.0 <= b.lower <= b.upper
    raw = b.details.get("threshold_lower")
    if raw is not None:  # the instance's own value, before any clipping
        assert raw <= b.upper, (b, raw)
        assert b.lower == max(raw, b.details["one_run_lower"])


@pytest.mark.parametrize(
    "run",
    [
        [(Gaussian(noise_multiplier=1.0), 1)],
        [(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.1), sampling_rate=0.01), 1000)],
    ],
)
def test_one_run_gives_back_one_runs_lower_end(run):
    """``K = 1``: the instance is one run, so its lower end lies in one run's certified interval, close to the
    lower end (the grid of thresholds and the tail bound cost little)."""
    one = ConnectDotsAccountant().compose(run).epsilon(1e-6)
    eps, info = tuned_lower_epsilon(run, 1e-6, StoppingLaw("fixed", runs=1).tail, 1.0)
    assert eps <= float(one.upper), (eps, one)
    assert eps >= float(one.lower) - 0.01, (eps, one)
    assert info["threshold"] is not None and info["threshold"] <= eps


def test_dpsgd_tuned_lower_end_near_one_run_at_delta_over_mean():
    """DP-SGD, geometric K of mean 10: the instance's lower end is about one run's epsilon at delta / E K (the
    event's probability is about E K times one run's), far above one run's at delta."""
    run = [(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.1), sampling_rate=0.01), 1000)]
    b = tuning_epsilon(run=run, delta=1e-6, distribution="geometric", mean=10)
    scaled = ConnectDotsAccountant().compose(run).epsilon(1e-7)
    assert float(scaled.lower) - 0.01 <= b.lower <= float(scaled.upper)
    assert b.lower > b.details["one_run_lower"] + 0.2
