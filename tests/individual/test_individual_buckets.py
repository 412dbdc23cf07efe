"""Bucket index arithmetic of IndividualAccountant: a real norm is mapped to
the smallest bucket whose sensitivity covers ``min(g, C) / C``, never out of range, never another row."""

import math
from fractions import Fraction

import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tightdp
from tightdp.individual import IndividualAccountant
from tightdp.individual._buckets import _bucket_index, _bucket_ratio

#: examples of the cheap property tests (HYPOTHESIS_PROFILE=explore runs ten times as many)
N_PROP = scaled(150)

CLIPS = [0.3, 0.1, 1 / 3, 1e-3, 7.77, 1.0, 2.0, 0.7, 1e-6, 1e6]
BUCKETS = [1, 10, 100, 1000, 37, 10_000]


def _covers(norm: float, clip: float, B: int, b: int) -> bool:
    """Exact rational check: bucket b's sensitivity >= min(g, C) / C, and at most 1/B above it."""
    if math.isnan(norm) or norm >= clip:
        r = Fraction(1)
    else:
        r = Fraction(norm) / Fraction(clip)
    sens = Fraction(_bucket_ratio(b, B))
    ok_up = sens >= r and (0 < b <= B or (b == 0 and norm == 0))
    ok_tight = Fraction(b, B) <= r + Fraction(1, B)
    return ok_up and ok_tight


def _edge_norms(clip: float, B: int) -> list[float]:
    out = [
        0.0,
        clip,
        math.nextafter(clip, 0),
        math.nextafter(clip, math.inf),
        2 * clip,
        1e300,
        math.inf,
        math.nan,
        5e-324,
        clip * 1e-300,
    ]
    for b in sorted({1, 2, B // 3, B // 2, B - 1, B}):
        if b <= 0:
            continue
        e = b * (clip / B)  # a bucket edge (rounded)
        out += [e, math.nextafter(e, 0), math.nextafter(e, math.inf), b / B * clip, clip * (b / B)]
    return out


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("B", BUCKETS)
def test_boundaries_round_up_and_stay_in_range(clip, B):
    norms = np.array(_edge_norms(clip, B))
    idx = _bucket_index(norms, clip, B)
    assert idx.min() >= 0 and idx.max() <= B
    for g, b in zip(norms, idx):
        assert _covers(float(g), clip, B, int(b)), (g, clip, B, b)
    # a norm at or above the clip is the full bucket B, exactly
    assert np.all(idx[(norms >= clip) | np.isnan(norms)] == B)
    assert idx[0] == 0  # norm 0: no loss


@pytest.mark.slow
def test_norm_at_clip_lands_in_its_own_row():
    # ceil(0.3 * (100 / 0.3)) = 101: the step went to bucket 0 of the next example (epsilon [0, 0])
    acc = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=0.3, sampling_rate=0.01)
    acc.record_steps(np.tile([0.3, 0.0], (1000, 1)))
    c = acc.bucket_counts
    assert c[0, 100] == 1000 and c[0].sum() == 1000
    assert c[1, 0] == 1000 and c[1].sum() == 1000
    e = acc.epsilons(1e-5).upper
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    assert e[0] >= ref.lower  # never below the certified truth (the truth is in [ref.lower, ref.upper])
    assert e[0] <= 1.02 * ref.upper + 0.01
    assert e[1] == 0.0


@pytest.mark.parametrize("clip", [0.3, 0.1, 1 / 3, 7.77])
def test_last_example_at_clip(clip):
    # used to raise IndexError (record_step) / a reshape ValueError (record_steps)
    a = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.01)
    a.record_step([0.0, clip])
    b = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.01)
    b.record_steps([[0.0, clip]])
    for acc in (a, b):
        assert acc.bucket_counts[1, 100] == 1 and acc.bucket_counts[0, 0] == 1


def test_record_step_and_record_steps_agree_on_edges():
    rng = np.random.default_rng(0)
    for clip in CLIPS:
        for B in (1, 10, 100, 1000):
            norms = np.array([x for x in _edge_norms(clip, B) if not math.isnan(x)])
            norms = rng.permutation(np.tile(norms, 3))[: 3 * (norms.size // 3)].reshape(3, -1)
            a = IndividualAccountant(
                num_examples=norms.shape[1], noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1, num_buckets=B
            )
            b = IndividualAccountant(
                num_examples=norms.shape[1], noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.1, num_buckets=B
            )
            a.record_steps(norms)
            for row in norms:
                b.record_step(row)
            assert a == b
            assert np.all(a.bucket_counts.sum(axis=1) == 3)
            expect = np.zeros_like(a.bucket_counts)
            for t in range(3):
                np.add.at(expect, (np.arange(norms.shape[1]), _bucket_index(norms[t], clip, B)), 1)
            np.testing.assert_array_equal(a.bucket_counts, expect)


# ------------------------------------------------------------------------------ properties
_clip_st = st.one_of(
    st.floats(-6, 6).map(lambda x: 10.0**x),
    st.sampled_from(CLIPS),
    st.decimals(min_value="0.001", max_value="99.999", places=3).map(float).filter(lambda x: x > 0),
)


@st.composite
def _norm_for(draw, clip, B):
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return clip
    b = draw(st.integers(0, B))
    e = b * clip / B
    if kind == 1:
        return e
    if kind == 2:
        return math.nextafter(e, math.inf)
    if kind == 3:
        return math.nextafter(e, 0)
    if kind == 4:
        return clip * draw(st.floats(0, 1e6))
    if kind == 5:
        return draw(st.sampled_from([0.0, math.inf, math.nan, 1e308, 5e-324]))
    return draw(st.floats(0, 1e300))


@settings(max_examples=N_PROP, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), clip=_clip_st, B=st.sampled_from([1, 2, 3, 7, 10, 37, 100, 1000, 10_000]))
def test_property_bucket_covers_clipped_norm(data, clip, B):
    norms = data.draw(st.lists(_norm_for(clip, B), min_size=1, max_size=8))
    idx = _bucket_index(np.array(norms, dtype=float), clip, B)
    for g, b in zip(norms, idx):
        assert 0 <= b <= B
        assert _covers(g, clip, B, int(b)), (g, clip, B, int(b))


@settings(max_examples=scaled(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), clip=_clip_st, B=st.sampled_from([1, 10, 100, 1000]), n=st.integers(1, 6))
def test_property_recording_touches_only_own_row(data, clip, B, n):
    steps = data.draw(st.lists(st.lists(_norm_for(clip, B), min_size=n, max_size=n), min_size=1, max_size=4))
    a = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.5, num_buckets=B)
    b = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=clip, sampling_rate=0.5, num_buckets=B)
    arr = np.array(steps, dtype=float)
    a.record_steps(arr)
    for row in arr:
        before = b.bucket_counts.copy()
        b.record_step(row)
        diff = b.bucket_counts - before
        assert np.all(diff.sum(axis=1) == 1) and np.all(diff >= 0)  # exactly one cell of each row
        assert np.all(diff[np.arange(n), _bucket_index(row, clip, B)] == 1)
    assert a == b


@pytest.mark.slow
@settings(max_examples=scaled(6), deadline=None)
@given(
    clip=_clip_st,
    factor=st.sampled_from([1.0, 1.0000001, 3.0]),
    q=st.sampled_from([0.01, 0.05]),
    steps=st.integers(1, 300),
)
def test_property_constant_clipped_norm_is_dpsgd(clip, factor, q, steps):
    acc = IndividualAccountant(num_examples=2, noise_multiplier=1.0, clip_norm=clip, sampling_rate=q)
    acc.record_steps(np.tile([clip * factor, 0.0], (steps, 1)))
    e = acc.epsilons(1e-5).upper
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=q, steps=steps, delta=1e-5)
    assert math.isfinite(e[0]) and e[0] >= ref.lower
    assert e[1] == 0.0
