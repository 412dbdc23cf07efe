"""Validity of the audit bounds on simulated Gaussian mechanisms with known epsilon (exact mu-GDP).

A mu-GDP mechanism is (eps, delta)-DP exactly for eps = eps_mu(delta) (Dong, Roth, Su 2022, Cor. 2.13).
Each method's empirical lower bound must exceed that true epsilon in at most a beta fraction of the
simulated audits (one-sided binomial test at level 1e-3 on 1000 audits), and never exceed tightdp's
certified upper end. The same audits of a mechanism *weaker* than claimed must flag it often (the check
has teeth). One canary's score is its Gaussian output: N(0, 1) out, N(mu, 1) in (Dirac canaries of a
Gaussian mechanism with sensitivity 1 and noise 1/mu).
"""

import numpy as np
import pytest
from scipy import stats

from tightdp import ConnectDotsAccountant, Gaussian
from tightdp.audit import (
    clopper_pearson_epsilon_at,
    epsilon_clopper_pearson,
    epsilon_from_guesses,
    epsilon_one_run,
    epsilon_one_run_fdp,
    gdp_epsilon,
)

AUDITS = 1000
BETA = 0.05
DELTA = 1e-5


def _certified_upper(mu: float) -> float:
    return float(ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0 / mu), 1).epsilon(DELTA).upper)


def _max_allowed(n: int, beta: float) -> int:
    """The largest count of exceedances a valid method shows with probability >= 1 - 1e-3."""
    return int(stats.binom.isf(1e-3, n, beta))


def _one_run_scores(mu: float, m: int, seed: int):
    rng = np.random.default_rng(seed)
    member = rng.random((AUDITS, m)) < 0.5
    scores = rng.standard_normal((AUDITS, m)) + mu * member
    return member, scores


@pytest.mark.slow
@pytest.mark.parametrize("method", ["one-run", "fdp-eps-delta", pytest.param("fdp-gdp", marks=pytest.mark.slow)])
def test_one_run_bounds_are_valid_and_below_the_certified_upper_end(method):
    mu, m = 2.0, 100
    true_eps = gdp_epsilon(mu, DELTA)
    upper = _certified_upper(mu)
    assert true_eps <= upper
    member, scores = _one_run_scores(mu, m, seed=1)
    ks = (5, 10, 20, 40)
    # the f-DP GDP family costs ~10 ms an audit: 400 audits keep the validity count meaningful (about 20
    # exceedances expected, ~33 allowed) at less than half the time
    audits = 400 if method == "fdp-gdp" else AUDITS
    bounds = np.empty(audits)
    for i in range(audits):
        kw = dict(
            in_scores=scores[i, member[i]], out_scores=scores[i, ~member[i]], delta=DELTA, beta=BETA, guess_counts=ks
        )
        bounds[i] = (
            epsilon_one_run(**kw) if method == "one-run" else epsilon_one_run_fdp(**kw, family=method[4:])
        ).epsilon_lower
    assert np.sum(bounds > true_eps) <= _max_allowed(audits, BETA)
    assert np.all(bounds <= upper)
    assert np.median(bounds) > 0  # the audits see something: the check is not vacuous
    # teeth: had the mechanism's true epsilon been half the audits' median, the count would flag it
    assert np.sum(bounds > 0.5 * np.median(bounds)) > _max_allowed(audits, BETA)


@pytest.mark.slow
def test_guess_counting_is_valid_at_its_own_guess_count():
    """With one guess count fixed in advance and no correction (the full level at one k)."""
    mu, m, k = 1.0, 1000, 100
    true_eps = gdp_epsilon(mu, DELTA)
    member, scores = _one_run_scores(mu, m, seed=2)
    order = np.argsort(-scores, axis=1)[:, :k]
    v = np.take_along_axis(member, order, axis=1).sum(axis=1)
    cache = {}
    bounds = np.array(
        [
            cache.setdefault(
                int(x),
                epsilon_from_guesses(canaries=m, guesses=k, correct=int(x), delta=DELTA, beta=BETA).epsilon_lower,
            )
            for x in v
        ]
    )
    assert np.sum(bounds > true_eps) <= _max_allowed(AUDITS, BETA)
    assert np.all(bounds <= _certified_upper(mu))


@pytest.mark.parametrize("strategy", [pytest.param("split", marks=pytest.mark.slow), "bonferroni", "fixed"])
def test_clopper_pearson_is_valid(strategy):
    """Multi-run: each score is one run's output, 2000 runs of each kind."""
    mu, n = 1.0, 2000
    true_eps = gdp_epsilon(mu, DELTA)
    rng = np.random.default_rng(3)
    ins = rng.standard_normal((AUDITS, n)) + mu
    outs = rng.standard_normal((AUDITS, n))
    thresholds = [1.5, 2.0, 2.5, 3.0]
    bounds = np.empty(AUDITS)
    for i in range(AUDITS):
        if strategy == "fixed":
            b = clopper_pearson_epsilon_at(in_scores=ins[i], out_scores=outs[i], threshold=2.5, delta=DELTA, beta=BETA)
        else:
            b = epsilon_clopper_pearson(
                in_scores=ins[i],
                out_scores=outs[i],
                delta=DELTA,
                beta=BETA,
                strategy=strategy,
                thresholds=thresholds if strategy == "bonferroni" else None,
                seed=i,
            )
        bounds[i] = b.epsilon_lower
    assert np.sum(bounds > true_eps) <= _max_allowed(AUDITS, BETA)
    assert np.all(bounds <= _certified_upper(mu))
    assert np.median(bounds) > 0.5
    assert np.sum(bounds > 0.5 * np.median(bounds)) > _max_allowed(AUDITS, BETA)


def test_the_curve_test_never_flags_a_correct_subsampled_run_too_often():
    """Dirac canaries of a Poisson-subsampled Gaussian run (q = 1/2, 10 steps, sigma = 2), simulated exactly and
    scored with the likelihood ratio: the f-DP test of the run's certified curve rejects in at most a beta
    fraction of 300 audits; the same audits of a run with a tenth of the noise are rejected in most."""
    from tightdp.audit import fdp_one_run_test, run_curve

    q, steps, sigma, m, n = 0.5, 10, 2.0, 400, 300
    curve, _ = run_curve(noise_multiplier=sigma, sampling_rate=q, steps=steps)
    rng = np.random.default_rng(5)

    def audits(noise):
        member = rng.random((n, m)) < 0.5
        x = (rng.random((n, steps, m)) < q) * member[:, None, :] + noise * rng.standard_normal((n, steps, m))
        score = np.sum(np.logaddexp(np.log1p(-q), np.log(q) + (2 * x - 1) / (2 * sigma**2)), axis=1)
        return [
            fdp_one_run_test(
                in_scores=score[i, member[i]],
                out_scores=score[i, ~member[i]],
                curve=curve,
                beta=BETA,
                guess_counts=(10, 25, 50, 100),
            ).rejected
            for i in range(n)
        ]

    assert sum(audits(sigma)) <= _max_allowed(n, BETA)
    assert sum(audits(sigma / 10)) > n / 2
