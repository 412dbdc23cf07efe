"""The privacy-profile route for tuning with a random number of runs (Koskela, Redberg & Wang 2024; the bound
proved in tightdp._tuning_profile), checked against independent computations with mpmath:

* the same inequality evaluated with mpmath quadrature on a Gaussian run's closed-form profile (mu-GDP:
  ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``), with the generating functions written
  out again here from Papernot & Steinke 2022 Def. 1: tightdp's upper Riemann sum lies at or above it and
  within 2 %;
* a concrete tuned procedure (a Gaussian run whose score is its output, so the best run is the largest
  output): its exact hockey-stick divergence, an attained value, lies at or below tightdp's bound;
* ``K = 1`` surely gives one run's profile; a pure ``eps0``-DP run gives at most Papernot & Steinke 2022
  Corollary 3's ``(2 + eta) eps0``; ``tuning_epsilon`` takes the smaller of the two routes.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant, Gaussian, PureDP
from tightdp._tuning_profile import ProfileTable, StoppingLaw, two_region_delta
from tightdp.mechanisms.basic import ApproximateDP
from tightdp.tuning import _gamma_for_mean, tuned_profile_delta, tuned_profile_epsilon, tuning_epsilon

MPMATH_DPS = 20  # mpmath's digits in every test here (conftest); checks at 1e-9 relative: 20 keep quadratures fast


def _gauss_profile(mu: float, eps: float) -> mp.mpf:
    e = mp.mpf(eps)
    return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)


def _laws(law: str, mean: float):
    """(f, f') of the law in mpmath, and tightdp's keyword arguments for it."""
    if law == "poisson":
        mu = mp.mpf(mean)
        return (lambda z: mp.exp(mu * (z - 1)), lambda z: mu * mp.exp(mu * (z - 1)), {"mean": mean})
    if law.startswith("fixed"):
        k = int(mean)
        return (lambda z: z**k, lambda z: k * z ** (k - 1), {"runs": k})
    eta = {"geometric": 1.0, "logarithmic": 0.0}.get(law, 0.5)
    g = _gamma_for_mean(mean, eta)
    gm, em = mp.mpf(g), mp.mpf(eta)
    kw = {"gamma": g} if law != "negative-binomial" else {"gamma": g, "shape": eta}
    if eta == 0.0:
        return (
            lambda z: mp.log(1 - (1 - gm) * z) / mp.log(gm),
            lambda z: (1 - gm) / ((1 - (1 - gm) * z) * mp.log(1 / gm)),
            kw,
        )
    c = gm**-em - 1
    return (
        lambda z: ((1 - (1 - gm) * z) ** -em - 1) / c,
        lambda z: em * (1 - gm) * (1 - (1 - gm) * z) ** (-em - 1) / c,
        kw,
    )


def _g_of(pts):
    def g_of(u):
        out = mp.mpf(1)
        for e, d in pts:
            out = min(out, mp.exp(e) * u + d, 1 - mp.exp(-e) * (1 - u - d))
        return out

    return g_of


_CUTS = sorted(
    set(
        [mp.mpf(0), mp.mpf(1)]
        + [mp.mpf(x) for x in np.linspace(0, 1, 33)[1:-1]]
        + [mp.mpf(10) ** -k for k in range(2, 12)]
        + [1 - mp.mpf(10) ** -k for k in range(2, 12)]
    )
)


def _mp_bound(eps: float, grid: np.ndarray, deltas: list, f, fp) -> mp.mpf:
    """The one-split inequality of tightdp._tuning_profile, evaluated with mpmath quadrature: the minimum over the
    splits eps1 in ``grid`` of 1 - f(1 - delta(eps1)) + e^eps1 int_0^1 [f'(G(u)) - e^(eps - eps1) f'(u)]_+ du."""
    pts = [(mp.mpf(float(e)), d) for e, d in zip(grid, deltas)]
    g_of, cuts = _g_of(pts), _CUTS
    best = mp.mpf(1)
    for e1, d1 in pts:
        if e1 > eps:
            continue
        t = mp.exp(eps - e1)
        integral = mp.quad(lambda u: max(mp.mpf(0), fp(g_of(u)) - t * fp(u)), cuts)
        best = min(best, 1 - f(1 - d1) + mp.exp(e1) * integral)
    return best


def _attained(mu: float, eps: float, fp) -> mp.mpf:
    """delta(eps) of a concrete tuned procedure: a Gaussian run N(mu, 1) against N(0, 1) with score = output
    (density phi(y - m) f'(Phi(y - m))), the larger of both orders, by mpmath quadrature."""

    def hs(m1, m2):
        def integrand(y):
            a = mp.npdf(y - m1) * fp(mp.ncdf(y - m1))
            b = mp.npdf(y - m2) * fp(mp.ncdf(y - m2))
            return max(mp.mpf(0), a - mp.exp(eps) * b)

        return mp.quad(integrand, list(np.linspace(-12.0, 14.0, 53)))

    return max(hs(mu, 0.0), hs(0.0, mu))


LAWS = ["geometric", "logarithmic", "negative-binomial", "poisson", "fixed"]


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # ~5 s an example (mpmath)
@given(
    mu=st.floats(0.3, 1.5),
    law=st.sampled_from(LAWS),
    mean=st.floats(1.5, 20.0),
    eps=st.floats(0.5, 5.0),
)
def test_profile_bound_matches_mpmath_and_dominates_an_attained_pair(mu, law, mean, eps):
    """Gaussian run with its closed-form profile: tightdp's bound >= the same inequality by mpmath quadrature
    (within 2 %), and >= the exact delta of a concrete tuned procedure."""
    if law == "fixed":
        mean = float(max(2, round(mean)))
    f, fp, kw = _laws(law, mean)
    grid = np.linspace(0.0, 3.0 * mu + 6.0, 7)
    exact = [_gauss_profile(mu, e) for e in grid]
    deltas = np.array([min(1.0, float(d) * (1 + 1e-12) + 1e-300) for d in exact])  # rounded up
    ours = tuned_profile_delta(epsilon=eps, epsilons=grid, deltas=deltas, distribution=law, **kw)
    single = ProfileTable.build(_law_of(law, kw), grid, deltas).delta(eps, grid, deltas)
    ref = _mp_bound(eps, grid, exact, f, fp)
    assert single >= float(ref) * (1 - 1e-9), (single, ref)
    assert single <= float(ref) * 1.02 + 1e-12, (single, ref)
    assert ours <= single  # the smaller of the one-split and two-region bounds
    attained = _attained(mu, eps, fp)
    assert ours >= float(attained) * (1 - 1e-9), (ours, attained)


def _law_of(law: str, kw: dict) -> StoppingLaw:
    if law == "fixed":
        return StoppingLaw("fixed", runs=kw["runs"])
    if law == "poisson":
        return StoppingLaw("poisson", mean=kw["mean"])
    return StoppingLaw(
        "negative-binomial", gamma=kw["gamma"], shape=kw.get("shape", 1.0 if law == "geometric" else 0.0)
    )


@pytest.mark.parametrize(
    "law,mean,s,eps,levels",
    [
        ("poisson", 10.0, 0.9, 9.0, (3.0, 5.5)),
        ("geometric", 10.0, 0.99, 6.0, (2.5, 4.5)),
        ("logarithmic", 20.0, 0.5, 6.0, (2.5, 4.5)),
    ],
)
def test_two_region_bound_matches_mpmath(law, mean, s, eps, levels):
    """Step 5 (two regions: split a where F <= s, b >= a above) by mpmath quadrature on a Gaussian run's
    closed-form profile, for the levels a < b given: tightdp's value (the smallest of the pairs a <= b of
    {a, b}) lies at or above the smallest of the three mpmath values and within 2 %."""
    mu = 1.0
    f, fp, kw = _laws(law, mean)
    grid = np.linspace(0.0, 9.0, 7)
    exact = [_gauss_profile(mu, e) for e in grid]
    deltas = np.array([min(1.0, float(d) * (1 + 1e-12) + 1e-300) for d in exact])
    table = ProfileTable.build(_law_of(law, kw), grid, deltas)
    levels = np.array(levels)
    d_levels = np.array([float(_gauss_profile(mu, e)) * (1 + 1e-12) for e in levels])
    ours = two_region_delta([(s, *table.split(s))], eps, levels, d_levels)
    g_of = _g_of([(mp.mpf(float(e)), d) for e, d in zip(grid, exact)])
    # the cut where G(u) crosses s
    lo, hi = mp.mpf(0), mp.mpf(1)
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g_of(mid) <= s else (lo, mid)
    cuts = sorted(set(_CUTS + [lo]))
    refs = []
    for a, b in ((0, 0), (0, 1), (1, 1)):
        da, db = (_gauss_profile(mu, levels[i]) for i in (a, b))
        ea, eb = mp.mpf(levels[a]), mp.mpf(levels[b])
        t1 = f(s) - f(s - min(s, da))
        t2 = 1 - f(1 - min(1 - mp.mpf(s), db))
        integral = mp.quad(
            lambda u: max(mp.mpf(0), mp.exp(ea if g_of(u) <= s else eb) * fp(g_of(u)) - mp.exp(eps) * fp(u)), cuts
        )
        refs.append(t1 + t2 + integral)
    ref = float(min(refs))
    assert ref < 0.5, refs  # a bound that says something
    assert ref * (1 - 1e-9) <= ours <= ref * 1.02 + 1e-12, (ours, refs)


@settings(max_examples=10, deadline=None)
@given(mu=st.floats(0.2, 3.0), eps=st.floats(0.0, 6.0))
def test_one_run_surely_is_the_run(mu, eps):
    """K = 1 surely (f' = 1): the bound at a profile point is that point's delta (up to the rounding margins)."""
    grid = np.unique(np.append(np.linspace(0.0, 10.0, 21), eps))
    deltas = np.array([float(_gauss_profile(mu, e)) for e in grid])
    ours = tuned_profile_delta(epsilon=eps, epsilons=grid, deltas=deltas, distribution="fixed", runs=1)
    d = float(_gauss_profile(mu, eps))
    assert d <= ours <= d * (1 + 1e-8) + 1e-300


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0, 3.0])
def test_pure_dp_run_within_corollary_3(eta):
    """An eps0-DP run: the profile route's epsilon at delta = 1e-10 is at most (2 + eta) eps0 (Papernot &
    Steinke 2022 Cor. 3), and the same at every delta when only the point (eps0, 0) and eps = 0 are given."""
    e0 = 0.3
    law = {0.0: "logarithmic", 1.0: "geometric"}.get(eta, "negative-binomial")
    kw = {"gamma": _gamma_for_mean(5.0, eta)} | ({"shape": eta} if law == "negative-binomial" else {})
    tv = math.expm1(e0) / (math.exp(e0) + 1)
    eps = tuned_profile_epsilon(delta=1e-10, epsilons=[0.0, e0], deltas=[tv, 0.0], distribution=law, **kw)
    assert eps <= (2 + eta) * e0 * (1 + 1e-9), (eps, (2 + eta) * e0)
    b = tuning_epsilon(
        run=PureDP(epsilon=e0),
        delta=1e-10,
        distribution=law,
        mean=5.0,
        **({"shape": eta} if law == "negative-binomial" else {}),
    )
    assert b.upper <= (2 + eta) * e0 + 1e-9 and b.lower <= b.upper


@settings(max_examples=6, deadline=None)
@given(
    sigma=st.floats(0.8, 4.0),
    law=st.sampled_from(["geometric", "logarithmic", "poisson", "negative-binomial"]),
    mean=st.floats(1.0, 30.0),
    delta=st.sampled_from([1e-4, 1e-6, 1e-9]),
)
def test_tuning_epsilon_takes_the_smaller_route(sigma, law, mean, delta):
    """The upper end is min(Renyi route, profile route), the method names the winner, and the lower end (one
    run's certified lower end) lies below it."""
    kw = {"shape": 2.0} if law == "negative-binomial" else {}
    b = tuning_epsilon(run=Gaussian(noise_multiplier=sigma), delta=delta, distribution=law, mean=mean, **kw)
    rdp, prof = b.details["rdp_epsilon"], b.details["profile_epsilon"]
    assert b.upper == min(rdp, prof)
    assert b.details["method"].startswith("privacy profile" if prof < rdp else "Renyi")
    assert 0.0 <= b.lower <= b.upper
    # each route on its own lies above the certified lower end of one run (at delta / P(K >= 1) for Poisson)
    target = delta / -math.expm1(-mean) if law == "poisson" else delta
    one = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=sigma)).epsilon(target)
    assert prof >= float(one.lower) and rdp >= float(one.lower), (prof, rdp, one)


def test_fixed_runs_profile_against_composition():
    """K fixed, best released: min(composition, profile route); K = 1 is one run's certified interval."""
    run = Gaussian(noise_multiplier=1.0)
    one = tuning_epsilon(run=run, delta=1e-6, runs=1)
    base = ConnectDotsAccountant().compose(run).epsilon(1e-6)
    assert (one.lower, one.upper) == (float(base.lower), float(base.upper))
    for sigma, k in ((1.0, 3), (3.0, 20)):
        b = tuning_epsilon(run=Gaussian(noise_multiplier=sigma), delta=1e-6, runs=k)
        comp, prof = b.details["composition_epsilon"], b.details["profile_epsilon"]
        assert b.upper == min(comp, prof) and (sigma != 1.0 or float(base.lower) <= b.lower <= b.upper)
        # few runs: the composition is smaller; sigma = 3, 20 runs: the profile route (7.58 against 7.75)
        assert (prof < comp) == (k == 20), (sigma, k, comp, prof)


def test_larger_profile_never_lowers_the_bound():
    grid = np.linspace(0.0, 8.0, 17)
    d = np.array([float(_gauss_profile(1.0, e)) for e in grid])
    lo = tuned_profile_delta(epsilon=2.5, epsilons=grid, deltas=d, distribution="geometric", gamma=0.1)
    hi = tuned_profile_delta(
        epsilon=2.5, epsilons=grid, deltas=np.minimum(1.0, 1.5 * d), distribution="geometric", gamma=0.1
    )
    assert lo <= hi


def test_run_without_renyi_curve_answers_through_the_profile():
    """(eps, delta)-DP has no Renyi curve (the Renyi route is unavailable); the profile route answers."""
    b = tuning_epsilon(run=ApproximateDP(epsilon=0.5, delta=1e-9), delta=1e-6, distribution="geometric", mean=5.0)
    assert math.isinf(b.details["rdp_epsilon"]) and b.details["method"].startswith("privacy profile")
    assert 0.49 <= b.lower <= b.upper <= 3 * 0.5 + 1e-9  # Liu & Talwar 2019: 3 eps0 for geometric stopping


@pytest.mark.parametrize(
    "kw,name",
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilons": [0.0, -1.0]}, "epsilons"),
        ({"deltas": [0.5]}, "deltas"),
        ({"deltas": [0.5, 1.5]}, "deltas"),
        ({"distribution": "uniform"}, "distribution"),
        ({"distribution": "geometric", "gamma": None}, "gamma"),
        ({"distribution": "geometric", "gamma": 1.5}, "gamma"),
        ({"distribution": "negative-binomial"}, "shape"),
        ({"distribution": "poisson", "gamma": None, "mean": -1.0}, "mean"),
        ({"distribution": "fixed", "gamma": None, "runs": 0}, "runs"),
    ],
)
def test_bad_input_names_the_argument(kw, name):
    args = {"epsilon": 1.0, "epsilons": [0.0, 1.0], "deltas": [0.5, 0.1], "distribution": "geometric", "gamma": 0.1}
    args.update(kw)
    args = {k: v for k, v in args.items() if v is not None}
    with pytest.raises(ValueError, match=name):
        tuned_profile_delta(**args)
    args.pop("epsilon")
    with pytest.raises(ValueError, match=name if name != "epsilon" else "delta"):
        tuned_profile_epsilon(delta=1e-6 if name != "epsilon" else 2.0, **args)
