"""dpsgd_epsilon(sampling=...): every scheme answers a certified, ordered interval; bad input is named."""

from __future__ import annotations

import math

import pytest

import tightdp
from tightdp.sampling import scheme_names
from tightdp.schemes import allocation_epsilon, shuffle_epsilon, truncated_poisson_epsilon

KW = dict(noise_multiplier=1.0, sampling_rate=1 / 100, steps=500, delta=1e-5)


def test_default_is_poisson_and_unchanged():
    a = tightdp.dpsgd_epsilon(**KW)
    b = tightdp.dpsgd_epsilon(**KW, sampling="poisson")
    assert (a.lower, a.estimate, a.upper) == (b.lower, b.estimate, b.upper)
    prv = tightdp.dpsgd_epsilon(**KW, accountant="prv")
    assert prv.lower <= a.upper and a.lower <= prv.upper


@pytest.mark.parametrize("sampling", ["random-allocation", "random_allocation", "balls-in-bins-fresh"])
def test_allocation_dispatch(sampling):
    b = tightdp.dpsgd_epsilon(**KW, sampling=sampling)
    ref = allocation_epsilon(noise_multiplier=1.0, steps_per_epoch=100, epochs=5, delta=1e-5)
    assert (b.lower, b.upper) == (ref.lower, ref.upper)
    assert 0 < b.lower <= b.estimate <= b.upper and b.upper - b.lower <= 0.02 + 1e-9


def test_shuffle_dispatch():
    b = tightdp.dpsgd_epsilon(**KW, sampling="shuffle")
    ref = shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=100, epochs=5, delta=1e-5)
    assert (b.lower, b.upper) == (ref.lower, ref.upper)
    assert b.upper == b.estimate and "no amplification" in b.details["upper"]


def test_truncated_dispatch():
    b = tightdp.dpsgd_epsilon(**KW, sampling="truncated-poisson", dataset_size=10_000, max_batch_size=120)
    ref = truncated_poisson_epsilon(
        noise_multiplier=1.0, sampling_rate=0.01, dataset_size=10_000, max_batch_size=120, steps=500, delta=1e-5
    )
    assert (b.lower, b.upper) == (ref.lower, ref.upper)
    po = tightdp.dpsgd_epsilon(**KW)
    assert b.lower <= po.upper and po.lower <= b.upper  # truncation at 1.2x the mean batch: near Poisson


def test_every_scheme_is_ordered_and_finite():
    for sampling in scheme_names(step_mechanism=False):
        if sampling == "cyclic-allocation":
            continue  # tests/sampling/test_sampling_schemes.py
        extra = dict(dataset_size=10_000, max_batch_size=150) if sampling == "truncated-poisson" else {}
        b = tightdp.dpsgd_epsilon(**KW, sampling=sampling, **extra)
        assert 0 <= b.lower <= b.estimate <= b.upper < math.inf and b.kind == "bound", sampling


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="sampling"):
        tightdp.dpsgd_epsilon(**KW, sampling="reshuffle")
    with pytest.raises(ValueError, match="sampling_rate"):  # 1/sampling_rate is not a whole number of steps
        tightdp.dpsgd_epsilon(
            noise_multiplier=1.0, sampling_rate=0.3, steps=10, delta=1e-5, sampling="random-allocation"
        )
    with pytest.raises(ValueError, match="steps"):  # not whole epochs
        tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=150, delta=1e-5, sampling="shuffle")
    with pytest.raises(ValueError, match="accountant"):
        tightdp.dpsgd_epsilon(**KW, sampling="random-allocation", accountant="prv")
    with pytest.raises(ValueError, match="dataset_size"):
        tightdp.dpsgd_epsilon(**KW, sampling="truncated-poisson", max_batch_size=10)
    with pytest.raises(ValueError, match="max_batch_size"):
        tightdp.dpsgd_epsilon(**KW, sampling="truncated-poisson", dataset_size=1000)
    with pytest.raises(ValueError, match="max_batch_size"):  # batch larger than the dataset
        tightdp.dpsgd_epsilon(**KW, sampling="truncated-poisson", dataset_size=100, max_batch_size=101)
    with pytest.raises(ValueError, match="dataset_size"):  # fewer examples than steps per epoch
        tightdp.dpsgd_epsilon(**KW, sampling="random-allocation", dataset_size=50)
    with pytest.raises(ValueError, match="sampling"):
        tightdp.dpsgd_epsilon(**KW, sampling=1)
