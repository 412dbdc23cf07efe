"""IndividualAccountant: per-example epsilons against the core engine, filters, save/load, bad input (Koskela et al. 2023)."""

import os

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.accountants.prv import PRVAccountant
from tightdp.individual import GDPFilter, IndividualAccountant, gdp_epsilon, gdp_mu
from tightdp.mechanisms import Gaussian, PoissonSampled


def _exact(sigma, q, ratios_counts, delta, eps_error=0.005):
    """Heterogeneous composition by the core PRV engine: (lower, estimate, upper)."""
    acc = PRVAccountant(eps_error=eps_error)
    acc.compose(
        [
            (PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma, sensitivity=r), sampling_rate=q), c)
            for r, c in ratios_counts
            if c > 0 and r > 0
        ]
    )
    return acc.epsilon(delta)


@pytest.mark.parametrize("sigma,q,steps", [(1.0, 0.05, 300), (0.8, 0.01, 2000), (2.0, 0.2, 150)])
def test_constant_norms_reproduce_worst_case(sigma, q, steps):
    acc = IndividualAccountant(num_examples=4, noise_multiplier=sigma, clip_norm=2.0, sampling_rate=q)
    acc.record_steps(np.tile([2.0, 5.0, np.nan, np.inf], (steps, 1)))  # all at or above C (NaN = worst case)
    eps = acc.epsilons(1e-5).upper
    ref = _exact(sigma, q, [(1.0, steps)], 1e-5)
    assert np.all(eps == eps[0])
    assert ref.lower <= eps[0] <= ref.upper + 0.01 * ref.upper
    assert acc.worst_case_epsilon(1e-5).upper == pytest.approx(eps[0], rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_norms_upper_bound_and_tight(seed):
    rng = np.random.default_rng(seed)
    sigma, q, C, T = 1.0, 0.05, 1.0, 400
    levels = np.array([0.0, 0.13, 0.37, 0.62, 0.9, 1.7])  # a few distinct norms so the engine stays fast
    norms = rng.choice(levels, size=(T, 3), p=rng.dirichlet(np.ones(levels.size)))
    acc = IndividualAccountant(num_examples=3, noise_multiplier=sigma, clip_norm=C, sampling_rate=q)
    for row in norms:  # step by step
        acc.record_step(row)
    eps = acc.epsilons(1e-5).upper
    for i in range(3):
        ratios = np.minimum(norms[:, i], C) / C
        vals, counts = np.unique(ratios, return_counts=True)
        ref = _exact(sigma, q, list(zip(vals, counts)), 1e-5)
        assert eps[i] >= ref.lower, "per-example epsilon below the exact composition"
        assert eps[i] <= 1.02 * ref.estimate + 0.01


@pytest.mark.slow
def test_deltas_consistent_with_epsilons():
    rng = np.random.default_rng(5)
    acc = IndividualAccountant(num_examples=50, noise_multiplier=1.1, clip_norm=1.0, sampling_rate=0.02)
    acc.record_steps(rng.gamma(2.0, 0.4, size=(500, 50)))
    e = acc.epsilons(1e-6).upper
    d = acc.deltas(float(np.median(e))).upper
    # delta at an example's own epsilon is <= 1e-6 (both certified upper bounds on the same curve)
    i = int(np.argmin(np.abs(e - np.median(e))))
    assert d[i] <= 1e-6 * 1.05
    # monotone: smaller epsilon -> delta at the median epsilon larger for examples with larger epsilon
    assert np.all(d[e > np.median(e) + 0.05] > 1e-6 * 0.95)


@pytest.mark.slow
def test_zero_norm_examples_have_no_loss():
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1)
    acc.record_steps(np.tile([0.0, 1.0, 0.0], (50, 1)))
    e = acc.epsilons(1e-5).upper
    assert e[0] == 0.0 and e[2] == 0.0 and e[1] > 0
    assert acc.deltas(0.5).upper[0] < 1e-9


def test_full_batch_is_exact_gdp():
    rng = np.random.default_rng(3)
    sigma, C = 5.0, 2.0
    norms = rng.uniform(0, 3.0, size=(200, 6))
    acc = IndividualAccountant(num_examples=6, noise_multiplier=sigma, clip_norm=C, sampling_rate=1.0)
    acc.record_steps(norms)
    mu = np.sqrt(np.sum((np.minimum(norms, C) / C) ** 2, axis=0)) / sigma
    eps = acc.epsilons(1e-5).upper
    for i in range(6):
        assert eps[i] >= gdp_epsilon(mu=mu[i], delta=1e-5) - 1e-12
        assert eps[i] == pytest.approx(gdp_epsilon(mu=mu[i], delta=1e-5), rel=1e-9)
    # the Gaussian special case of the PRV engine agrees
    ref = _exact(sigma / 1.0, 1.0, [(1.0, 200)], 1e-5)
    assert ref.lower <= acc.worst_case_epsilon(1e-5).upper <= ref.upper + 1e-9


def test_bucket_rounding_is_upwards():
    acc = IndividualAccountant(num_examples=4, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1, num_buckets=10)
    acc.record_step([0.05, 0.1, 0.1000001, 7.0])
    c = acc.bucket_counts
    assert c[0, 1] == 1 and c[1, 1] == 1 and c[2, 2] == 1 and c[3, 10] == 1


@settings(max_examples=scaled(12), deadline=None)
@given(eps_budget=st.floats(0.2, 3.0), seed=st.integers(0, 10_000))
def test_gdp_filter_never_exceeds_budget_and_drops_stay_dropped(eps_budget, seed):
    rng = np.random.default_rng(seed)
    n, sigma, delta = 8, 4.0, 1e-5
    acc = IndividualAccountant(num_examples=n, noise_multiplier=sigma, clip_norm=1.0, sampling_rate=1.0)
    prev = np.ones(n, dtype=bool)
    for _ in range(60):
        mask = acc.active(eps_budget, delta)  # worst-case next step
        assert not np.any(mask & ~prev), "a dropped example came back"
        prev = mask
        norms = rng.exponential(0.8, size=n)
        acc.record_step(np.where(mask, norms, 0.0))
        assert np.all(acc.epsilons(delta).upper <= eps_budget * (1 + 1e-9) + 1e-12)
    # Alg. 1 with the coming step's norms also never exceeds the budget
    acc2 = IndividualAccountant(num_examples=n, noise_multiplier=sigma, clip_norm=1.0, sampling_rate=1.0)
    for _ in range(60):
        norms = rng.exponential(0.8, size=n)
        mask = acc2.active(eps_budget, delta, grad_norms=norms)
        acc2.record_step(np.where(mask, norms, 0.0))
    assert np.all(acc2.mus() <= gdp_mu(epsilon=eps_budget, delta=delta) * (1 + 1e-12))


def test_filter_matches_gdp_filter_on_constant_norms():
    # Koskela et al. 2023 Sec. 4.1 setting per example: sigma = 100, full batch, budget of 420 RDP steps
    acc = IndividualAccountant(num_examples=2, noise_multiplier=100.0, clip_norm=1.0, sampling_rate=1.0)
    f = GDPFilter(epsilon=0.8156299871929082, delta=1e-5)
    steps = 0
    while acc.active(0.8156299871929082, 1e-5)[0]:
        acc.record_step([1.0, 0.0])
        assert f.admit(0.01)
        steps += 1
    assert steps == 495


@pytest.mark.slow
def test_pld_filter_mask():
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05)
    acc.record_steps(np.tile([1.0, 0.2, 0.0], (300, 1)))
    e = acc.epsilons(1e-5).upper
    budget = float(0.5 * (e[0] + e[1]))
    m = acc.active(budget, 1e-5)
    assert m.tolist() == [False, True, True]


@pytest.mark.slow
def test_save_load_roundtrip_and_resume(tmp_path):
    rng = np.random.default_rng(1)
    norms = rng.gamma(2.0, 0.5, size=(40, 20))
    norms[3, 4] = np.nan
    a = IndividualAccountant(num_examples=20, noise_multiplier=1.2, clip_norm=1.0, sampling_rate=0.1, num_buckets=37)
    a.record_steps(norms[:20])
    p = tmp_path / "ledger.npz"
    a.save(p)
    b = IndividualAccountant.load(p)
    assert a == b
    a.record_steps(norms[20:])
    for row in norms[20:]:
        b.record_step(row)
    assert a == b
    np.testing.assert_array_equal(a.epsilons(1e-5).upper, b.epsilons(1e-5).upper)
    # gdp ledger keeps its exact sums
    g = IndividualAccountant(num_examples=5, noise_multiplier=3.0, clip_norm=1.0)
    g.record_steps(rng.uniform(0, 2, size=(30, 5)))
    g.save(tmp_path / "g.npz")
    g2 = IndividualAccountant.load(tmp_path / "g.npz")
    np.testing.assert_array_equal(g.mus(), g2.mus())
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_save_is_atomic(tmp_path, monkeypatch):
    a = IndividualAccountant(num_examples=5, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.5)
    a.record_step([1, 2, 3, 4, 5])
    p = tmp_path / "l.npz"
    a.save(p)
    before = p.read_bytes()
    a.record_step([1, 2, 3, 4, 5])

    def boom(*args, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        a.save(p)
    assert p.read_bytes() == before
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_load_rejects_garbage(tmp_path):
    p = tmp_path / "x.npz"
    p.write_bytes(b"not a ledger")
    with pytest.raises(ValueError, match="path"):
        IndividualAccountant.load(p)


def test_bad_input():
    with pytest.raises(ValueError, match="num_examples"):
        IndividualAccountant(num_examples=0, noise_multiplier=1.0, clip_norm=1.0)
    with pytest.raises(ValueError, match="num_examples"):
        IndividualAccountant(num_examples=2.5, noise_multiplier=1.0, clip_norm=1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        IndividualAccountant(num_examples=3, noise_multiplier=0.0, clip_norm=1.0)
    with pytest.raises(ValueError, match="clip_norm"):
        IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=float("nan"))
    with pytest.raises(ValueError, match="sampling_rate"):
        IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=1.5)
    with pytest.raises(ValueError, match="num_buckets"):
        IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.5, num_buckets=0)
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.5)
    with pytest.raises(ValueError, match=r"grad_norms.*shape"):
        acc.record_step([1.0, 2.0])
    with pytest.raises(ValueError, match=r"grad_norms.*>= 0"):
        acc.record_step([1.0, -2.0, 0.0])
    with pytest.raises(ValueError, match="grad_norms"):
        acc.record_step(["a", "b", "c"])
    with pytest.raises(ValueError, match="grad_norms"):
        acc.record_steps([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"grad_norms.*shape"):
        acc.record_steps(np.ones((4, 2)))
    assert acc.steps == 0 and acc.bucket_counts.sum() == 0  # nothing half-applied
    with pytest.raises(ValueError, match="delta"):
        acc.epsilons(0.0)
    with pytest.raises(ValueError, match="delta"):
        acc.epsilons(float("nan"))
    with pytest.raises(ValueError, match="epsilon"):
        acc.deltas(-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        acc.active(-1.0, 1e-5)
    with pytest.raises(ValueError, match=r"mus|sampling_rate"):
        acc.mus()
