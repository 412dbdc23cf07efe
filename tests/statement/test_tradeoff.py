"""The certified operational views (``tightdp.tradeoff``): trade-off curve, attack TPR at FPR, mu-GDP.

Truths used: the mu-GDP trade-off ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)`` (Dong, Roth, Su 2022,
Def. 2.7; a ledger of Gaussians is exactly mu-GDP, Cor. 3.3), the pure eps-DP trade-off
``f_(eps,0)(a) = max(0, 1 - e^eps a, e^-eps (1 - a))`` (their Eq. (3); binary randomized response
attains it), whose tightest GDP mu is ``-2 Phi^-1(1 / (1 + e^eps))`` (``G_mu`` is convex and
``f_(eps,0)`` linear between its three vertices), mpmath at 50 digits, and dp-accounting 0.6.0's
PLD (pessimistic and optimistic discretisations) for the Poisson-subsampled Gaussian.
"""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import ndtr, ndtri

import tightdp
from tightdp._gdp_math import gdp_delta_bounds
from tightdp.cli import main
from tightdp.tradeoff import DEFAULT_ALPHAS, TradeoffCurve, tradeoff_curve, tradeoff_lower_curve


def gdp_beta(mu, a):
    a = np.asarray(a, float)
    with np.errstate(divide="ignore"):
        z = np.where(a <= 0.5, -ndtri(a), ndtri(1.0 - a))
    return ndtr(z - mu)


def pure_beta(eps, a):
    a = np.asarray(a, float)
    return np.maximum(0.0, np.maximum(1.0 - np.exp(eps) * a, np.exp(-eps) * (1.0 - a)))


def gdp_grid_curve(mu, n, slack=0.0, alphas=None):
    """The generic (grid) path on a Gaussian's certified delta bounds, optionally loosened by ``slack``."""
    eps = np.linspace(0.0, mu * mu / 2 + 8 * mu, n)
    lo, _, up = gdp_delta_bounds(mu, eps)
    lo, up = np.asarray(lo) * (1 - slack), np.minimum(1.0, np.asarray(up) * (1 + slack))
    b = tightdp.Bounds(lo, lo, up, "delta", "bound")
    return tradeoff_curve(b, epsilons=eps, alphas=alphas)


# ------------------------------------------------------------------------------------ Gaussian ledgers
@pytest.mark.parametrize("mu", [0.3, 1.0, 2.5, 6.0])
def test_grid_curves_bracket_the_gaussian_closed_form_and_close_in(mu):
    a = np.concatenate([DEFAULT_ALPHAS, np.linspace(0, 1, 1001), np.geomspace(1e-12, 1e-6, 30)])
    truth = gdp_beta(mu, a)
    gaps = []
    for n in (41, 161):
        c = gdp_grid_curve(mu, n, alphas=a)
        lo, up = c.beta_lower, c.beta_upper
        order = np.argsort(c.alpha)
        t = gdp_beta(mu, c.alpha)
        assert np.all(lo <= t) and np.all(t <= up), (mu, n)
        gaps.append(c.max_gap)
        assert c.mu_lower <= mu <= c.mu_upper
        assert np.all(np.diff(lo[order]) <= 0) and np.all(np.diff(up[order]) <= 0)
    assert truth.size
    # the gap shrinks quadratically with the grid spacing (4x the points: about 16x smaller)
    assert gaps[1] < gaps[0] / 8
    assert gaps[1] < 1e-3 * max(1.0, mu)  # grid spacing ~ mu / 20 here


@pytest.mark.parametrize("sigma, count", [(1.0, 1), (2.0, 9), (0.7, 3), (50.0, 10_000)])
def test_gaussian_ledger_is_answered_in_closed_form_exactly(sigma, count):
    acc = tightdp.ConnectDotsAccountant().compose(tightdp.Gaussian(noise_multiplier=sigma), count)
    c = tradeoff_curve(acc)
    mu = np.sqrt(count) / sigma
    assert c.mu_lower <= mu <= c.mu_upper and c.mu_upper - c.mu_lower < 1e-11 * mu
    assert "closed form" in c.method and c.max_gap < 1e-8
    mpmath.mp.dps = 50
    for a, lo, up in zip(c.alpha[::7], c.beta_lower[::7], c.beta_upper[::7]):
        exact = (
            mpmath.ncdf(-mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(a) - 1) - mpmath.mpf(mu))
            if 0 < a < 1
            else mpmath.mpf(1 - a)
        )
        assert lo <= exact <= up
    for fpr in (1e-6, 1e-3, 0.1):  # the best attack's TPR: Phi(Phi^-1(fpr) + mu)
        lo, up = c.tpr(fpr)
        exact = mpmath.ncdf(mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(fpr) - 1) + mpmath.mpf(mu))
        assert lo <= exact <= up and up - lo <= 1e-8 * exact


def test_gdp_accountant_gaussian_ledger_and_empty_ledger():
    acc = tightdp.GDPAccountant().compose(tightdp.Gaussian(noise_multiplier=2.0), 4)
    c = tradeoff_curve(acc)
    assert c.mu_lower <= 1.0 <= c.mu_upper
    empty = tradeoff_curve(tightdp.ConnectDotsAccountant(), alphas=[0.0, 0.3, 1.0])
    assert np.allclose(empty.beta_lower, [1.0, 0.7, 0.0]) and empty.mu_upper == 0.0
    lo, up = empty.tpr([0.0, 0.3, 1.0])  # no information: the best attack is a coin with bias alpha
    assert np.allclose(lo, [0.0, 0.3, 1.0]) and np.allclose(up, [0.0, 0.3, 1.0])


# ------------------------------------------------------------------------------------ pure DP and RR
@pytest.mark.parametrize(
    "mech, eps",
    [
        (tightdp.RandomizedResponse(noise_parameter=0.5, num_buckets=2), np.log(3.0)),
        (tightdp.PureDP(epsilon=1.0), 1.0),
    ],
)
def test_pure_dp_and_randomized_response_against_the_exact_tradeoff(mech, eps):
    acc = tightdp.ConnectDotsAccountant().compose(mech, 1)
    a = np.concatenate([np.linspace(0, 1, 401), [1 / (1 + np.exp(eps))]])
    c = tradeoff_curve(acc, alphas=a)
    truth = pure_beta(eps, c.alpha)
    assert np.all(c.beta_lower <= truth) and np.all(truth <= c.beta_upper)
    # the gap is the grid's (refined to 2e-3) plus the accountant's own delta width near the kink
    assert c.max_gap < 2e-3 + 1.5 * np.max(c.delta_upper - c.delta_lower)
    mu = -2 * ndtri(1 / (1 + np.exp(eps)))
    assert c.mu_lower <= mu <= c.mu_upper and c.mu_upper - c.mu_lower < 0.05
    lo, up = c.tpr(0.01)
    assert lo <= 1 - pure_beta(eps, 0.01) <= up


def test_lower_curve_of_one_pure_dp_guarantee_is_exact():
    """eps-DP alone: f(a) = max(0, 1 - e^eps a, e^-eps (1 - a)) (Dong, Roth, Su 2022, Eq. (3))."""
    _a, beta = tradeoff_lower_curve([1.0], [0.0], alphas=[0.0, 0.1, 0.5, 1.0])
    expected = pure_beta(1.0, [0.0, 0.1, 0.5, 1.0])
    assert beta == pytest.approx(expected, abs=1e-14) and np.all(beta <= expected)


# ------------------------------------------------------------------------------------ subsampled Gaussian
@pytest.fixture(scope="module")
def subsampled():
    acc = tightdp.ConnectDotsAccountant().compose(
        tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.0), sampling_rate=0.05), 100
    )
    return tradeoff_curve(acc, max_gap=2e-3)


def _dp_accounting_curve(alphas, pessimistic: bool):
    from dp_accounting.pld import privacy_loss_distribution as pld

    p = pld.from_gaussian_mechanism(
        standard_deviation=1.0, sampling_prob=0.05, value_discretization_interval=1e-3, pessimistic_estimate=pessimistic
    ).self_compose(100)
    eps = np.linspace(0.0, 12.0, 1201)
    delta = np.array(p.get_delta_for_epsilon(eps))
    return tradeoff_lower_curve(eps, np.clip(delta, 0, 1), alphas=alphas)[1]


@pytest.mark.peers
def test_subsampled_gaussian_against_dp_accounting(subsampled):
    c = subsampled
    assert c.max_gap < 2e-3 + 1.5 * np.max(c.delta_upper - c.delta_lower) and c.max_gap < 5e-3
    pess = _dp_accounting_curve(c.alpha, True)  # from upper delta: below the truth, so below beta_upper
    opt = _dp_accounting_curve(c.alpha, False)  # from lower delta: above the truth up to its grid's envelope
    assert np.all(pess <= c.beta_upper + 1e-12)
    assert np.all(c.beta_lower <= opt + 1e-4)
    assert np.max(np.abs(pess - c.beta_lower)) < 3e-3
    lo, _up = c.tpr(np.array([1e-3, 1e-2, 0.1]))
    assert np.all(lo <= 1 - pess[np.searchsorted(c.alpha, [1e-3, 1e-2, 0.1])] + 1e-12)
    assert c.mu_lower > 0.3 and c.mu_upper == np.inf and "mu_note" in c.details


def test_curve_json_round_trip(subsampled):
    d = json.loads(json.dumps(subsampled.to_dict()))
    assert set(d) >= {"alpha", "beta_lower", "beta_upper", "max_gap", "mu", "epsilons", "method"}
    assert d["mu"]["upper"] is None and d["mu"]["lower"] == subsampled.mu_lower
    lo, up = subsampled.at([0.05])
    i = list(subsampled.alpha).index(0.05)
    assert lo[0] == subsampled.beta_lower[i] and up[0] >= subsampled.beta_lower[i]


# ------------------------------------------------------------------------------------ properties
@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mu=st.floats(0.05, 8.0), n=st.integers(3, 80), slack=st.floats(0.0, 0.3))
def test_gaussian_grid_curves_are_sound_monotone_and_convex(mu, n, slack):
    a = np.linspace(0.0, 1.0, 257)
    c = gdp_grid_curve(mu, n, slack, alphas=a)
    t = gdp_beta(mu, a)
    assert np.all(c.beta_lower <= t) and np.all(t <= c.beta_upper)
    assert np.all(np.diff(c.beta_lower) <= 0) and np.all(np.diff(c.beta_upper) <= 0)
    assert np.all(np.diff(c.beta_lower, 2) >= -1e-12)  # a maximum of lines is convex
    assert c.mu_lower <= mu <= c.mu_upper


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mu=st.floats(0.1, 4.0),
    eps0=st.floats(0.05, 3.0),
    d0=st.floats(0.0, 0.2),
    n=st.integers(2, 40),
    seed=st.integers(0, 2**31),
)
def test_upper_curve_is_sound_for_a_kinked_tradeoff(mu, eps0, d0, n, seed):
    """f = max(G_mu, f_(eps0, d0)) is a symmetric trade-off function with kinks; its delta(eps) =
    max_a [1 - e^eps a - f(a)] is bracketed from a fine alpha grid (the maximum over the grid is a
    lower bound, plus slope x spacing an upper one); the curves must bracket f on random grids."""
    fine = np.linspace(0.0, 1.0, 20001)

    def f(x):
        return np.maximum(
            gdp_beta(mu, x), np.maximum(0, np.maximum(1 - d0 - np.exp(eps0) * x, np.exp(-eps0) * (1 - d0 - x)))
        )

    eps = np.sort(np.random.default_rng(seed).uniform(0.0, max(4.0, mu * mu / 2 + 6 * mu), n))
    vals = 1 - np.exp(eps)[:, None] * fine[None, :] - f(fine)[None, :]
    lo = np.clip(vals.max(axis=1), 0, 1)
    up = np.clip(lo + (np.exp(eps) + 1e6) * (fine[1] - fine[0]), 0, 1)  # |f'| is finite away from 0
    # (near alpha = 0 the Gaussian part is steep; cover it by a generous slope allowance)
    up = np.clip(np.maximum(up, lo + 1e-2), 0, 1)
    c = tradeoff_curve(tightdp.Bounds(lo, lo, up, "delta", "bound"), epsilons=eps, alphas=fine[::50])
    t = f(c.alpha)
    assert np.all(c.beta_lower <= t + 1e-15) and np.all(t <= c.beta_upper + 1e-15)


# ------------------------------------------------------------------------------------ bad input
@pytest.fixture(scope="module")
def small_acc():
    return tightdp.ConnectDotsAccountant().compose(tightdp.Laplace(scale=1.0), 2)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"alphas": [0.1, 1.5]}, "alphas"),
        ({"alphas": [float("nan")]}, "alphas"),
        ({"alphas": []}, "alphas"),
        ({"max_gap": -1.0}, "max_gap"),
        ({"max_gap": float("nan")}, "max_gap"),
        ({"max_points": 1}, "max_points"),
        ({"rounds": -1}, "rounds"),
        ({"epsilons": [-1.0]}, "epsilons"),
        ({"epsilons": [1e9]}, "epsilons"),
    ],
)
def test_bad_input_names_the_argument(small_acc, kwargs, name):
    with pytest.raises(ValueError, match=name):
        tradeoff_curve(small_acc, **kwargs)


def test_bad_sources():
    with pytest.raises(ValueError, match="source"):
        tradeoff_curve("connect-dots")
    edgeworth = tightdp.EdgeworthAccountant().compose(
        tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.0), sampling_rate=0.1), 10
    )
    assert edgeworth.kind == "approximation"
    with pytest.raises(ValueError, match="source"):
        tradeoff_curve(edgeworth)
    b = tightdp.Bounds(np.array([0.1]), None, np.array([0.2]), "delta", "bound")
    with pytest.raises(ValueError, match="epsilons"):
        tradeoff_curve(b)
    with pytest.raises(ValueError, match="source"):
        tradeoff_curve(tightdp.Bounds(np.array([0.3]), None, np.array([0.2]), "delta", "bound"), epsilons=[1.0])
    with pytest.raises(ValueError, match="source"):
        tradeoff_curve(tightdp.Bounds(None, np.array([0.2]), None, "delta", "approximation"), epsilons=[1.0])
    with pytest.raises(ValueError, match="delta_lower"):  # a lower bound no upper bound allows
        tradeoff_curve(
            tightdp.Bounds(np.array([0.0, 0.5]), None, np.array([0.3, 0.5]), "delta", "bound"), epsilons=[0.0, 1.0]
        )  # delta(1) <= delta(0) <= 0.3 < 0.5


def test_tpr_and_at_validate(subsampled):
    with pytest.raises(ValueError, match="fpr"):
        subsampled.tpr(1.5)
    with pytest.raises(ValueError, match="alphas"):
        subsampled.at([-0.1])
    assert isinstance(subsampled, TradeoffCurve)


# ------------------------------------------------------------------------------------ command line
@pytest.mark.parametrize(
    "extra, option",
    [
        (["--fpr", "2"], "--fpr"),
        (["--fpr", "abc"], "--fpr"),
        (["--alphas", "0.1,-1"], "--alphas"),
        (["--max-gap", "-1"], "--max-gap"),
        (["--max-points", "1"], "--max-points"),
        (["--sampling", "shuffle"], "--sampling"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(capsys, extra, option):
    code = main(["tradeoff", "--noise-multiplier", "1", "--sampling-rate", "1", "--steps", "4", *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and option in err


def test_cli_text_and_json(capsys):
    argv = ["tradeoff", "--noise-multiplier", "2", "--sampling-rate", "1", "--steps", "9", "--fpr", "0.01,0.001"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "beta_lower" in out and "attack TPR at FPR 0.01" in out and "mu in [1.5, 1.5]" in out
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mu"]["lower"] <= 1.5 <= d["mu"]["upper"] and d["kind"] == "bound"
    assert [r["fpr"] for r in d["tpr"]] == [0.01, 0.001]
    for r in d["tpr"]:
        exact = float(ndtr(ndtri(r["fpr"]) + 1.5))
        assert r["lower"] <= exact <= r["upper"]
    assert len(d["curve"]["alpha"]) == len(d["curve"]["beta_upper"]) > 100


@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(1, 12), eps0=st.floats(0.1, 2.0), n=st.integers(2, 40), seed=st.integers(0, 2**31))
def test_curves_are_sound_with_exact_delta_for_composed_randomized_response(k, eps0, n, seed):
    """k-fold binary randomized response: the number B of truthful answers is Bin(k, p) under P and
    Bin(k, 1 - p) under Q (p = e^eps0 / (1 + e^eps0)); the Neyman-Pearson tests give the exact,
    piecewise-linear trade-off through the points (alpha_j, beta_j) of rejecting the j most
    Q-favoured outcomes, and delta(eps) = sum_b (Q(b) - e^eps P(b))_+ exactly. With the exact delta
    (up to a 1e-13 relative rounding allowance) at random epsilons, the curves bracket f at its vertices
    and in between, where the witness segments are tight."""
    from scipy.stats import binom

    p = np.exp(eps0) / (1 + np.exp(eps0))
    b = np.arange(k + 1)
    P, Q = binom.pmf(b, k, p), binom.pmf(b, k, 1 - p)  # Q favours small b
    ap = np.concatenate([[0.0], np.cumsum(P)])  # reject {0, ..., j-1}
    bq = np.concatenate([[1.0], 1 - np.cumsum(Q)])
    eps = np.sort(np.random.default_rng(seed).uniform(0.0, k * eps0 + 0.5, n))
    delta = np.clip((Q[None, :] - np.exp(eps)[:, None] * P[None, :]).clip(0).sum(axis=1), 0, 1)
    lo, up = delta * (1 - 1e-13), np.minimum(1.0, delta * (1 + 1e-13) + 1e-300)
    a = np.unique(np.concatenate([np.linspace(0, 1, 301), np.clip(ap, 0, 1)]))
    c = tradeoff_curve(tightdp.Bounds(lo, lo, up, "delta", "bound"), epsilons=eps, alphas=a)
    truth = np.interp(c.alpha, ap, np.clip(bq, 0, 1))
    assert np.all(c.beta_lower <= truth + 1e-14) and np.all(truth <= c.beta_upper + 1e-14)
    lo_t, up_t = c.tpr(c.alpha)
    assert np.all(lo_t <= 1 - truth + 1e-14) and np.all(1 - truth <= up_t + 1e-14)


@pytest.mark.parametrize("eps0,k", [(1.0, 3), (0.5, 10), (0.3, 40)])
def test_pure_dp_tradeoff_exact_at_the_kinks(eps0, k):
    """k-fold eps0-DP: delta is asked at the composed loss's values (the curve's kinks), so the certified
    curves meet the exact Neyman-Pearson curve (binomial atoms, reject for high loss) up to rounding, in
    one delta query (the default grid alone left a gap of 2.1e-3 at k = 3 after five queries)."""
    from tightdp import ConnectDotsAccountant, PureDP

    c = tradeoff_curve(ConnectDotsAccountant().compose(PureDP(epsilon=eps0), k))
    p = 1.0 / (1.0 + math.exp(-eps0))
    atoms = sorted(
        (((2 * j - k) * eps0, math.comb(k, j) * p**j * (1 - p) ** (k - j)) for j in range(k + 1)), reverse=True
    )

    def beta(alpha):
        a_acc = p_acc = 0.0
        for loss, pm in atoms:
            qm = pm * math.exp(-loss)
            if a_acc + qm >= alpha:
                return 1.0 - (p_acc + (alpha - a_acc) / qm * pm)
            a_acc, p_acc = a_acc + qm, p_acc + pm
        return 0.0

    exact = np.array([beta(a) for a in c.alpha])
    assert np.all(c.beta_lower <= exact + 1e-12) and np.all(exact <= c.beta_upper + 1e-12)
    if k <= 10:
        assert c.details["max_gap"] <= 1e-8 and c.details["delta_queries"] == 1
    else:  # at alpha ~ 1e-6 the gap is the delta intervals' width far in the tail (delta ~ 1e-10)
        assert c.details["reached"]


def test_curve_kinks_only_for_atoms_on_one_lattice():
    from tightdp import ConnectDotsAccountant, Laplace, PureDP

    np.testing.assert_allclose(ConnectDotsAccountant().compose(PureDP(epsilon=1.0), 3)._curve_kinks(700, 100), [1, 3])
    acc = ConnectDotsAccountant().compose([(PureDP(epsilon=1.0), 3), (PureDP(epsilon=math.pi), 2)])
    assert acc._curve_kinks(700, 100) is None
    assert ConnectDotsAccountant().compose(Laplace(scale=1.0), 3)._curve_kinks(700, 100) is None
    assert ConnectDotsAccountant().compose(PureDP(epsilon=0.01), 10_000)._curve_kinks(700, 100) is None  # too many


def test_long_dpsgd_run_extends_the_grid_past_64():
    """k = 1e6 DP-SGD steps (epsilon 139 at delta 1e-5): the default grid ends at 64, where delta is still
    0.92, and the curves were 0.92 apart (after 81 s: every tiny delta was answered again with tilted FFTs).
    The grid now extends until delta is negligible, and delta is asked with an absolute slack."""
    from tightdp import ConnectDotsAccountant

    acc = ConnectDotsAccountant().compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), 10**6)
    c = tradeoff_curve(acc)
    assert c.epsilons.max() > 64 and c.delta_upper[-1] <= 2e-6
    assert c.details["reached"] and np.all(c.beta_lower <= c.beta_upper)
    # mu-GDP with mu = 13.1 (the CLT's mu for this run) has beta(1e-6) ~ 1e-16: nearly perfect distinguishability
    assert float(np.max(c.beta_upper[c.alpha >= 1e-6])) < 1e-3


def test_delta_of_a_flat_curve_does_not_refine_the_mesh_away():
    """delta(0) of 1e6 DP-SGD steps is within 1e-7 of 1: the stop rule asked its interval to be as narrow
    as moving epsilon by 1e-4 would make it (nothing, on a flat curve) and halved the mesh eight times
    (79 s); at the relative default the interval only has to state delta to 0.2 %."""
    from tightdp import ConnectDotsAccountant

    acc = ConnectDotsAccountant().compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), 10**6)
    b = acc.delta([0.0, 32.0, 64.0])
    assert b.details["mesh"] > 1e-4
    assert np.all(b.upper - b.lower <= 2e-3 * b.upper)
