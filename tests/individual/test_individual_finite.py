"""Per-example epsilons are finite, certified upper bounds (no bare inf),
the exact fallback, and bad input / resource checks of IndividualAccountant."""

import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

import tightdp
from tightdp.accountants import ConnectDotsAccountant
from tightdp.individual import IndividualAccountant
from tightdp.individual import _pld_queries as acc_mod
from tightdp.mechanisms import Gaussian, PoissonSampled


def _truth(sigma, q, ratios, delta):
    """Certified interval of the exact heterogeneous composition (core engine)."""
    r = np.asarray(ratios, float)
    v, c = np.unique(r[r > 0], return_counts=True)
    if v.size == 0:
        return 0.0, 0.0
    a = ConnectDotsAccountant(eps_error=0.005)
    a.compose(
        [
            (PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma, sensitivity=float(x)), sampling_rate=q), int(k))
            for x, k in zip(v, c)
        ]
    )
    b = a.epsilon(delta)
    return b.lower, b.upper


@pytest.mark.slow
def test_one_step_is_finite_and_tight():
    # was: worst_case_epsilon = inf (wrap-around term 0.27 >> delta), no note
    acc = IndividualAccountant(num_examples=4, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.01)
    acc.record_step([0.5, 1.0, 2.0, 0.1])
    w = acc.worst_case_epsilon(1e-5).upper
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=1, delta=1e-5)
    assert math.isfinite(w) and ref.lower <= w <= 1.02 * ref.upper
    e = acc.epsilons(1e-5)
    assert np.all(np.isfinite(e.upper))
    for i, r in enumerate([0.5, 1.0, 1.0, 0.1]):
        lo, hi = _truth(1.0, 0.01, [r], 1e-5)
        assert lo <= e.upper[i] <= 1.05 * hi + 0.005, (i, e.upper[i], lo, hi)
    assert max(e.details["remove"]["max_error_delta"], e.details["add"]["max_error_delta"]) <= 0.1 * 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("delta", [1e-7, 1e-9, 1e-12])
def test_small_delta_few_steps_finite(delta):
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.01)
    acc.record_steps(np.tile([2.0, 0.5, 0.0], (3, 1)))
    e = acc.epsilons(delta).upper
    assert np.all(np.isfinite(e)) and e[2] == 0.0
    for i, r in enumerate([1.0, 0.5]):
        lo, hi = _truth(1.0, 0.01, [r] * 3, delta)
        assert lo <= e[i] <= 1.05 * hi + 0.01


@pytest.mark.slow
def test_fallback_when_fast_path_cannot_certify(monkeypatch):
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05)
    acc.record_steps(np.tile([1.0, 0.3, 0.0], (20, 1)))
    real = acc_mod.population_epsilons
    monkeypatch.setattr(
        acc_mod, "population_epsilons", lambda bs, c, d, **kw: (np.full(c.shape[0], math.inf), real(bs, c, d, **kw)[1])
    )
    b = acc.epsilons(1e-6)
    assert np.all(np.isfinite(b.upper)) and b.upper[2] == 0.0
    for i, r in enumerate([1.0, 0.3]):
        lo, hi = _truth(1.0, 0.05, [r] * 20, 1e-6)
        assert lo <= b.upper[i] <= hi * (1 + 1e-6) + 1e-9
    assert acc.worst_case_epsilon(1e-6).upper >= b.upper[0]
    # an uncertifiable example is not active (the filter stays conservative)
    assert acc.active(100.0, 1e-6, rule="pld").tolist() == [False, False, False]


@pytest.mark.slow
def test_fallback_groups_by_dominating_bucket(monkeypatch):
    rng = np.random.default_rng(0)
    n = acc_mod._FALLBACK_GROUPS + 8
    acc = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05)
    acc.record_steps(rng.uniform(0, 1.2, size=(6, n)))
    monkeypatch.setattr(
        acc_mod, "population_epsilons", lambda bs, c, d, **kw: (np.full(c.shape[0], math.inf), np.zeros(c.shape[0]))
    )
    b = acc.epsilons(1e-5)
    assert np.all(np.isfinite(b.upper)) and np.all(b.upper > 0)
    assert b.details["fallback"]["method"] in ("largest bucket", "worst case")


@settings(max_examples=scaled(6), deadline=None)
@given(
    sigma=st.sampled_from([0.7, 1.0, 2.0]),
    q=st.sampled_from([0.001, 0.01, 0.1]),
    steps=st.sampled_from([1, 2, 5, 30]),
    logd=st.floats(-12, -4),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow
def test_property_subsampled_finite_and_certified(sigma, q, steps, logd, seed):
    rng = np.random.default_rng(seed)
    delta = 10.0**logd
    norms = rng.choice([0.0, 0.25, 0.6, 1.0, 4.0], size=(steps, 3))
    acc = IndividualAccountant(num_examples=3, noise_multiplier=sigma, clip_norm=1.0, sampling_rate=q)
    acc.record_steps(norms)
    e = acc.epsilons(delta).upper
    assert np.all(np.isfinite(e)) and np.all(e >= 0)
    for i in range(3):
        lo, hi = _truth(sigma, q, np.minimum(norms[:, i], 1.0), delta)
        assert e[i] >= lo
        if lo == 0.0 and hi == 0.0:
            assert e[i] == 0.0


@settings(max_examples=scaled(5), deadline=None)
@given(
    sigma=st.floats(0.7, 2.0),
    q=st.floats(0.005, 0.2),
    steps=st.integers(1, 6),
    logd=st.floats(-10, -4),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow
def test_property_few_steps_continuous_norms_bracket_the_exact_composition(sigma, q, steps, logd, seed):
    """Both ends at random noise, rates and continuous norms after few steps (where the spectral cut of the
    per-example queries drops the most frequencies), against each example's composition at its exact, unbucketed
    norms by the core engine."""
    rng = np.random.default_rng(seed)
    delta = 10.0**logd
    norms = rng.exponential(0.8, size=(steps, 3))
    acc = IndividualAccountant(num_examples=3, noise_multiplier=sigma, clip_norm=1.0, sampling_rate=q)
    acc.record_steps(norms)
    e = acc.epsilons(delta)
    for i in range(3):
        lo, hi = _truth(sigma, q, np.minimum(norms[:, i], 1.0), delta)
        assert float(e.upper[i]) >= lo * (1 - 1e-12), (i, e.upper[i], lo)
        assert float(e.lower[i]) <= hi * (1 + 1e-12), (i, e.lower[i], hi)


# ------------------------------------------------------------------------- bad input, resources
def test_huge_ledger_refused_before_allocating():
    with pytest.raises(ValueError, match=r"num_examples=1000000000.*GiB"):
        IndividualAccountant(num_examples=10**9, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.01)


@pytest.mark.parametrize("clip", [1e-320, 5e-324, 0.0, -1.0, math.inf, math.nan, True, "1.0", None])
def test_clip_norm_rejected(clip):
    with pytest.raises(ValueError, match="clip_norm"):
        IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1)


def test_tiny_and_huge_normal_clip_norms_work():
    for clip in (1e-300, 1e6):
        acc = IndividualAccountant(
            num_examples=3, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1, num_buckets=10
        )
        acc.record_step([clip, clip * 0.45, clip * 1e-310])
        assert acc.bucket_counts[:, 1:].argmax(axis=1).tolist() == [9, 4, 0]  # buckets 10, 5, 1


@pytest.mark.parametrize(
    "bad",
    [
        [True, False],
        ["1.0", "2.0"],
        [1 + 2j, 0],
        [None, 1.0],
        [[1.0], [2.0]],
        [-1.0, 0.0],
        [-math.inf, 0.0],
        "ab",
        [object(), 1.0],
    ],
)
def test_bad_norms_rejected(bad):
    acc = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1)
    with pytest.raises(ValueError, match="grad_norms"):
        acc.record_step(bad)
    with pytest.raises(ValueError, match="grad_norms"):
        acc.record_steps([bad] if np.ndim(np.asarray(bad, dtype=object)) == 1 else bad)
    assert acc.steps == 0 and acc.bucket_counts.sum() == 0


@pytest.mark.parametrize("arg", [True, "3", 2.5, None])
def test_bool_str_arguments_rejected(arg):
    with pytest.raises(ValueError):
        IndividualAccountant(num_examples=arg, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1)
    with pytest.raises(ValueError, match="noise_multiplier"):
        IndividualAccountant(
            num_examples=2, noise_multiplier=arg if arg != 2.5 else "x", clip_norm=1.0, sampling_rate=0.1
        )


def test_nan_and_inf_norms_are_worst_case():
    # documented: NaN marks a norm that was not computed, +inf is clipped to C; both are sensitivity 1
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1, num_buckets=10)
    acc.record_step([math.nan, math.inf, 1.0])
    assert acc.bucket_counts[:, 10].tolist() == [1, 1, 1]


def test_load_rejects_inconsistent_counts(tmp_path):
    a = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1)
    a.record_step([1.0, 0.5])
    p = tmp_path / "l.npz"
    a.save(p)
    with np.load(p) as z:
        d = dict(z)
    d["counts"] = d["counts"].copy()
    d["counts"][0, 0] += 5
    np.savez(p, **d)
    with pytest.raises(ValueError, match="steps"):
        IndividualAccountant.load(p)
