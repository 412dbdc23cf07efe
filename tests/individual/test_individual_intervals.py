"""Buffered recording, sparse recording (missing-norm policies) and per-example certified
intervals ``lower <= exact <= upper`` (Koskela et al. 2023 App. D; dominated / dominating bucket PLDs)."""

import json
import math

import numpy as np
import pytest

import tightdp.individual.accountant as acc_mod
from tightdp.individual import IndividualAccountant
from tightdp.individual._buckets import _bucket_index
from tightdp.individual._population import _weights_closed


def _reference_counts(rows, clip, B, n):
    expect = np.zeros((n, B + 1), dtype=np.int64)
    for row in rows:
        np.add.at(expect, (np.arange(n), _bucket_index(np.asarray(row, float), clip, B)), 1)
    return expect


@pytest.mark.parametrize("B", [7, 100, 300])
def test_buffered_recording_matches_per_step_scatter(monkeypatch, B):
    monkeypatch.setattr(acc_mod, "_BUFFER_BYTES", 1)  # 8-step buffer: many flushes, one partial
    rng = np.random.default_rng(B)
    n, T, clip = 37, 29, 0.7
    rows = rng.gamma(1.5, 0.4, size=(T, n))
    rows[rng.random((T, n)) < 0.1] = 0.0
    rows[0, :4] = [np.nan, np.inf, 5e-324, clip]
    a = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1, num_buckets=B)
    for r in rows:
        a.record_step(r)
    b = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1, num_buckets=B)
    b.record_steps(rows[:13])
    b.record_steps(rows[13:])
    np.testing.assert_array_equal(a.bucket_counts, _reference_counts(rows, clip, B, n))
    assert a == b and a.steps == T and a.bucket_counts.sum() == T * n


@pytest.mark.slow
def test_sparse_worst_case_equals_dense_with_clip_for_missing():
    rng = np.random.default_rng(1)
    n, B = 20, 50
    a = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, num_buckets=B)
    b = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, num_buckets=B)
    for _ in range(30):
        idx = np.nonzero(rng.random(n) < 0.3)[0]
        g = rng.gamma(2.0, 0.2, size=idx.size)
        a.record_step(g, indices=idx)
        dense = np.full(n, np.nan)  # NaN: not computed -> worst case
        dense[idx] = g
        b.record_step(dense)
    assert a == b
    r = a.epsilons(1e-5)
    assert r.kind == "bound" and np.all(a.approximated_steps == 0)


def test_sparse_last_seen_is_labelled_approximation():
    acc = IndividualAccountant(
        num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=1.0, num_buckets=4, missing_norms="last-seen"
    )  # GDP: fast
    acc.record_step([0.25, 0.5, 3.0])  # dense: every example seen (buckets 1, 2, 4)
    acc.record_step([0.75], indices=[0])  # 1 and 2 imputed: 1 from 0.5 (approx), 2 from the clip
    acc.record_step(np.array([]), indices=np.array([], dtype=int))  # all imputed; 0 from 0.75 (approx)
    np.testing.assert_array_equal(acc.approximated_steps, [1, 2, 0])
    c = acc.bucket_counts
    assert c[1, 2] == 3 and c[2, 4] == 3 and c[0, 1] == 1 and c[0, 3] == 2
    r = acc.epsilons(1e-5, lower=False)
    assert r.kind == "approximation" and r.details["approximate_examples"] == 2
    worst = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=1.0, num_buckets=4)
    worst.record_step([0.25, 0.5, 3.0])
    worst.record_step([0.75], indices=[0])
    assert worst.epsilons(1e-5, lower=False).kind == "bound"


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(grad_norms=[0.1, 0.2], indices=[0, 0]), "indices"),
        (dict(grad_norms=[0.1, 0.2], indices=[0, 9]), "indices"),
        (dict(grad_norms=[0.1, 0.2], indices=[0.0, 1.0]), "indices"),
        (dict(grad_norms=[0.1, 0.2], indices=[True, False]), "indices"),
        (dict(grad_norms=[0.1], indices=[0, 1]), "indices"),
        (dict(grad_norms=[-0.1, 0.2], indices=[0, 1]), "grad_norms"),
        (dict(grad_norms=[[0.1, 0.2]], indices=[0, 1]), "grad_norms"),
    ],
)
def test_sparse_bad_input_records_nothing(bad, match):
    acc = IndividualAccountant(
        num_examples=4, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, missing_norms="last-seen"
    )
    with pytest.raises(ValueError, match=match):
        acc.record_step(**bad)
    assert acc.steps == 0 and acc.bucket_counts.sum() == 0 and acc.approximated_steps.sum() == 0
    with pytest.raises(ValueError, match="missing_norms"):
        IndividualAccountant(
            num_examples=4, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, missing_norms="zero"
        )


def _dp_accounting_bracket(sigma, q, ratio_counts, delta, interval=1e-4):
    """dp-accounting 0.6.0 PLD: optimistic (<= exact) and pessimistic (>= exact) epsilons."""
    from dp_accounting.pld import privacy_loss_distribution as P

    out = []
    for pess in (False, True):
        pld = None
        for r, c in ratio_counts:
            one = P.from_gaussian_mechanism(
                sigma / r, sampling_prob=q, pessimistic_estimate=pess, value_discretization_interval=interval
            ).self_compose(c)
            pld = one if pld is None else pld.compose(one)
        out.append(pld.get_epsilon_for_delta(delta))
    return out


@pytest.mark.peers
def test_per_example_interval_contains_exact_few_distinct_values():
    sigma, q, T, delta = 1.0, 0.02, 600, 1e-5
    # norms on the grid k C / B (C = 2, B = 100): clipped, half, quarter, and a mix
    C = 2.0
    cols = [np.full(T, 3.0), np.full(T, 1.0), np.full(T, 0.5), np.r_[np.full(400, 2.0), np.full(200, 1.0)]]
    ratios = [[(1.0, T)], [(0.5, T)], [(0.25, T)], [(1.0, 400), (0.5, 200)]]
    acc = IndividualAccountant(num_examples=len(cols), noise_multiplier=sigma, clip_norm=C, sampling_rate=q)
    for t in range(T):
        acc.record_step([c[t] for c in cols])
    r = acc.epsilons(delta)
    assert r.kind == "bound" and r.details["lower"]["frac_min"] == 1.0
    for i, rc in enumerate(ratios):
        opt, pess = _dp_accounting_bracket(sigma, q, rc, delta)
        lo, up = float(r.lower[i]), float(r.upper[i])
        assert 0 <= lo <= up
        assert lo <= pess and up >= opt, (i, lo, up, opt, pess)  # [lo, up] meets the exact value's bracket
        assert up - lo <= 0.02 * up + 0.01, (i, lo, up)


@pytest.mark.slow
def test_gdp_interval_and_generic_norm_widths():
    rng = np.random.default_rng(3)
    gd = IndividualAccountant(num_examples=5, noise_multiplier=2.0, clip_norm=1.0, sampling_rate=1.0)
    gd.record_steps(rng.gamma(2.0, 0.3, size=(200, 5)))
    r = gd.epsilons(1e-6)
    assert np.all(r.lower <= r.upper) and np.all(r.upper - r.lower <= 1e-6 * r.upper + 1e-9)
    sgd = IndividualAccountant(num_examples=6, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05)
    sgd.record_steps(rng.gamma(2.0, 0.3, size=(300, 6)))
    r = sgd.epsilons(1e-5)
    assert np.all(r.lower >= 0) and np.all(r.lower <= r.upper) and np.all(np.isfinite(r.upper))
    assert r.details["lower"]["frac_min"] < 1.0  # generic norms: each bucket's lower edge is used
    assert sgd.epsilons(1e-5, lower=False).lower is None
    with pytest.raises(ValueError, match="lower"):
        sgd.epsilons(1e-5, lower="yes")


def test_closed_form_weight_dft_within_its_error_bound():
    """The closed-form DFT of the hockey-stick weights against an extended-precision direct sum."""

    class W:
        pass

    pi = np.longdouble("3.14159265358979323846264338327950288")
    for n, h, j0 in [(64, 0.1, -5), (512, 2.9e-3, -300), (1024, 1e-3, -2000)]:
        bs = W()
        bs.n, bs.h, bs.j0 = n, h, j0
        x = (j0 + np.arange(n)) * h
        xl = (np.longdouble(j0) + np.arange(n, dtype=np.longdouble)) * np.longdouble(h)
        eps = np.array([-1e9, x[0] - 0.5 * h, x[0], 0.0, 0.013, x[n // 2], x[n // 2] + 0.3 * h, x[-1], 50.0])
        kmax = n // 2 + 1
        G, E = _weights_closed(bs, eps, kmax)
        ang = 2 * pi * (np.outer(np.arange(kmax), np.arange(n)) % n).astype(np.longdouble) / n
        cos, sin = np.cos(ang), np.sin(ang)
        for i, e in enumerate(eps):
            g = np.where(x > e, -np.expm1(np.longdouble(e) - xl), np.longdouble(0))
            ref_re, ref_im = (cos @ g).astype(float), (-(sin @ g)).astype(float)
            assert np.all(np.abs(G[i].real - ref_re) + np.abs(G[i].imag - ref_im) <= E[i])
        # and the bound is not vacuous: far below the weights' own size
        assert np.all(1e-9 * n >= E)


@pytest.mark.slow
def test_save_load_roundtrip_keeps_policy_state(tmp_path):
    acc = IndividualAccountant(
        num_examples=4, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, missing_norms="last-seen"
    )
    acc.record_step([0.2, 0.4, 0.6, 0.8])
    acc.record_step([0.5, 0.1], indices=[1, 3])
    acc.save(tmp_path / "l.npz")
    back = IndividualAccountant.load(tmp_path / "l.npz")
    assert back == acc and back.options()["missing_norms"] == "last-seen"
    back.record_step([0.3], indices=[0])
    acc.record_step([0.3], indices=[0])
    assert back == acc
    # a format-1 file (no recorded positions) still loads: buckets then use their lower edges
    plain = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05)
    plain.record_steps([[0.5, 1.0]] * 3)
    plain.save(tmp_path / "p.npz")
    with np.load(tmp_path / "p.npz") as z:
        meta = json.loads(bytes(z["meta"]).decode())
        counts = np.array(z["counts"])
    meta["format"] = "tightdp.IndividualAccountant/1"
    del meta["options"]["missing_norms"]
    np.savez(tmp_path / "old.npz", counts=counts, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    old = IndividualAccountant.load(tmp_path / "old.npz")
    np.testing.assert_array_equal(old.bucket_counts, plain.bucket_counts)
    r_old, r_new = old.epsilons(1e-5), plain.epsilons(1e-5)
    assert np.all(r_old.lower <= r_new.lower) and math.isclose(r_old.upper[0], r_new.upper[0])


def test_last_seen_gdp_sums_use_the_imputed_ratio():
    acc = IndividualAccountant(
        num_examples=2, noise_multiplier=2.0, clip_norm=1.0, sampling_rate=1.0, missing_norms="last-seen"
    )
    acc.record_step([0.5, 0.25])
    acc.record_step([0.75], indices=[1])  # example 0 imputed at 0.5
    np.testing.assert_allclose(acc.mus() * 2.0, np.sqrt([0.5, 0.25**2 + 0.75**2]), rtol=1e-12)
    worst = IndividualAccountant(num_examples=2, noise_multiplier=2.0, clip_norm=1.0, sampling_rate=1.0)
    worst.record_step([0.5, 0.25])
    worst.record_step([0.75], indices=[1])  # example 0 at the clip
    np.testing.assert_allclose(worst.mus() * 2.0, np.sqrt([0.25 + 1.0, 0.25**2 + 0.75**2]), rtol=1e-12)
