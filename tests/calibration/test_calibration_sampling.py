"""Calibration for the sampling schemes people run: ``sampling=`` on calibrate_noise,
calibrate_steps and calibrate_sampling_rate, and ``tightdp calibrate --sampling``.

Truth: shuffling's certified upper bound and balls-and-bins with one step per epoch are exactly
``sqrt(E)/sigma``-GDP (closed form below); truncated Poisson with the cap at the data set size never
truncates, so it is Poisson sampling; every other answer is re-checked with ``dpsgd_epsilon(sampling=...)``
at the accuracy it was certified at (the calibration's promise) and its tightness record is inspected.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy import optimize, special

import tightdp
from tightdp.calibration import calibrate_noise, calibrate_sampling_rate, calibrate_steps

DELTA = 1e-5


def gdp_delta(eps: float, mu: float) -> float:
    return special.ndtr(-eps / mu + mu / 2) - math.exp(eps + special.log_ndtr(-eps / mu - mu / 2))


def gdp_mu_for(eps: float, delta: float) -> float:
    """The mu with delta(eps; mu) = delta (delta grows with mu)."""
    return optimize.brentq(lambda m: gdp_delta(eps, m) - delta, 1e-6, 50.0, xtol=1e-15, rtol=1e-15)


def recheck(cal, **scheme):
    return tightdp.dpsgd_epsilon(
        noise_multiplier=cal.noise_multiplier,
        sampling_rate=cal.sampling_rate,
        steps=cal.steps,
        delta=cal.delta,
        eps_error=cal.eps_error,
        rel_error=cal.rel_error,
        sampling=cal.sampling,
        **scheme,
    )


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize(
    "sampling, t",
    [pytest.param("shuffle", 20, marks=pytest.mark.slow), ("random-allocation", 1)],  # shuffle: ~10 s
)
def test_noise_for_gaussian_schemes_matches_the_closed_form(sampling, t):
    """Shuffling's upper bound (any t) and 1-of-1 allocation are sqrt(E)/sigma-GDP: the calibrated noise is at
    least the exact sigma* = sqrt(E)/mu*(target) (safe) and within the search's 1e-3 plus rounding (tight)."""
    epochs, target = 4, 2.0
    cal = calibrate_noise(
        target_epsilon=target, delta=DELTA, sampling_rate=1.0 / t, steps=epochs * t, sampling=sampling
    )
    exact = math.sqrt(epochs) / gdp_mu_for(target, DELTA)
    assert cal.sampling == sampling and cal.to_dict()["sampling"] == sampling
    assert exact <= cal.noise_multiplier <= exact * 1.003
    assert recheck(cal).upper <= target
    if sampling == "shuffle":
        assert "no tighter certified bound" in cal.details["note_sampling"]
        assert cal.epsilon.lower < 0.5 * target  # Chua et al.'s lower bound is far below: no tightness claim
        assert cal.details["tightness"]["overshoots"] is False


def test_steps_for_shuffling_is_the_closed_form_number_of_epochs():
    """E epochs are sqrt(E)/sigma-GDP: the largest feasible E is floor((sigma mu*)^2), in whole epochs of t."""
    sigma, t, target = 4.0, 25, 2.0
    cal = calibrate_steps(
        target_epsilon=target, delta=DELTA, noise_multiplier=sigma, sampling_rate=1.0 / t, sampling="shuffle"
    )
    exact_epochs = math.floor((sigma * gdp_mu_for(target, DELTA)) ** 2)
    assert cal.steps % t == 0 and cal.details["multiple_of"] == t
    assert cal.steps // t in (exact_epochs - 1, exact_epochs)  # -1 only if the certified width decides it
    assert recheck(cal).upper <= target


def test_truncated_poisson_without_truncation_calibrates_like_poisson():
    """A cap at the data set size never truncates (p_T = 0): the scheme is Poisson sampling."""
    kw = dict(target_epsilon=1.5, delta=DELTA, sampling_rate=0.02, steps=300)
    poisson = calibrate_noise(**kw)
    capped = calibrate_noise(**kw, sampling="truncated-poisson", dataset_size=500, max_batch_size=500)
    assert capped.noise_multiplier == pytest.approx(poisson.noise_multiplier, rel=2e-3)
    assert recheck(capped, dataset_size=500, max_batch_size=500).upper <= 1.5


# ------------------------------------------------------------------ the schemes that have no closed form
@pytest.mark.slow
def test_balls_and_bins_noise_is_safe_tight_and_below_poisson():
    kw = dict(target_epsilon=2.0, delta=DELTA, sampling_rate=1 / 50, steps=50 * 4)
    bins = calibrate_noise(**kw, sampling="random-allocation")
    assert recheck(bins).upper <= 2.0
    tight = bins.details["tightness"]
    assert tight["overshoots"] is True and tight["epsilon_lower"] > 2.0  # 1 % less noise certainly exceeds
    assert tight["checked"] >= 0.99 * bins.noise_multiplier * (1 - 1e-6)
    poisson = calibrate_noise(**kw)
    assert bins.noise_multiplier < poisson.noise_multiplier  # balls-and-bins needs less noise here


def test_balls_and_bins_steps_in_whole_epochs_and_tight():
    t = 40
    cal = calibrate_steps(
        target_epsilon=1.0,
        delta=DELTA,
        noise_multiplier=1.2,
        sampling_rate=1 / t,
        sampling="random-allocation",
        multiple_of=4,
    )  # lcm(4, 40) = 40: whole epochs
    assert cal.steps % t == 0 and cal.details["multiple_of"] == t
    assert recheck(cal).upper <= 1.0
    assert cal.details["tightness"]["checked"] == cal.steps + t and cal.details["tightness"]["overshoots"] is True


@pytest.mark.slow
def test_epochs_interface_counts_ceil_n_over_b_steps_per_epoch():
    cal = calibrate_noise(
        target_epsilon=3.0,
        delta=DELTA,
        epochs=2,
        dataset_size=1000,
        batch_size=30,
        sampling="random-allocation",
        eps_error=0.01,
    )
    assert cal.sampling_rate == 1 / 34 and cal.steps == 68
    assert recheck(cal, dataset_size=1000).upper <= 3.0


@pytest.mark.slow
def test_truncated_poisson_rate_and_noise_recheck():
    scheme = dict(sampling="truncated-poisson", dataset_size=2000, max_batch_size=25)
    rate = calibrate_sampling_rate(
        target_epsilon=2.0, delta=DELTA, noise_multiplier=1.0, steps=200, eps_error=0.01, **scheme
    )
    assert rate.sampling == "truncated-poisson" and "gap" in rate.details["note_sampling"]
    assert recheck(rate, dataset_size=2000, max_batch_size=25).upper <= 2.0
    noise = calibrate_noise(target_epsilon=2.0, delta=DELTA, sampling_rate=0.01, steps=200, eps_error=0.01, **scheme)
    assert recheck(noise, dataset_size=2000, max_batch_size=25).upper <= 2.0


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "fn, kwargs, name",
    [
        (calibrate_noise, dict(sampling_rate=0.01, steps=100, sampling="bins"), "sampling"),
        (
            calibrate_noise,
            dict(sampling_rate=0.01, steps=100, sampling="truncated-poisson", max_batch_size=5),
            "dataset_size",
        ),
        (
            calibrate_noise,
            dict(sampling_rate=0.01, steps=100, sampling="truncated-poisson", dataset_size=1000),
            "max_batch_size",
        ),
        (calibrate_noise, dict(sampling_rate=0.01, steps=100, max_batch_size=5), "max_batch_size"),
        (calibrate_noise, dict(sampling_rate=0.01, steps=100, sampling="shuffle", accountant="prv"), "accountant"),
        (calibrate_noise, dict(sampling_rate=0.03, steps=100, sampling="shuffle"), "sampling_rate"),
        (calibrate_noise, dict(sampling_rate=0.01, steps=150, sampling="random-allocation"), "steps"),
        (calibrate_noise, dict(sampling_rate=0.01, steps=100, sampling="shuffle", dataset_size=50), "dataset_size"),
        (
            calibrate_noise,
            dict(sampling_rate=0.01, steps=100, sampling="shuffle", epsilon_fn=lambda *a: None),
            "epsilon_fn",
        ),
        (calibrate_steps, dict(noise_multiplier=1.0, sampling_rate=0.3, sampling="random-allocation"), "sampling_rate"),
        (calibrate_sampling_rate, dict(noise_multiplier=1.0, steps=100, sampling="random-allocation"), "sampling"),
    ],
)
def test_bad_input_names_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(target_epsilon=2.0, delta=DELTA, **kwargs)


# ------------------------------------------------------------------ CLI
def test_cli_calibrate_sampling_and_its_recheck_command(capsys):
    from tightdp.cli import main

    assert (
        main(
            [
                "calibrate",
                "--target-epsilon",
                "2",
                "--delta",
                "1e-5",
                "--sampling-rate",
                str(1 / 30),
                "--steps",
                "90",
                "--sampling",
                "random-allocation",
                "--eps-error",
                "0.01",
                "--json",
            ]
        )
        == 0
    )
    cal = json.loads(capsys.readouterr().out)
    assert cal["sampling"] == "random-allocation" and cal["epsilon"]["upper"] <= 2.0
    assert "--sampling random-allocation" in cal["recheck"]
    argv = cal["recheck"].split()[1:]  # "tightdp epsilon ..." -> run it: the rate must stay exactly 1/t
    assert main([*argv, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["epsilon"]["upper"] <= 2.0
    assert (
        main(
            [
                "calibrate",
                "--target-epsilon",
                "2",
                "--delta",
                "1e-5",
                "--solve",
                "steps",
                "--noise-multiplier",
                "2",
                "--dataset-size",
                "1000",
                "--batch-size",
                "40",
                "--sampling",
                "shuffle",
                "--eps-error",
                "0.01",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "epochs of 25 steps" in out and "sampling shuffle" in out and "no tighter certified bound" in out


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--sampling-rate", "0.01", "--steps", "100", "--sampling", "bogus"], "--sampling"),
        (["--sampling-rate", "0.01", "--steps", "100", "--sampling", "balls-and-bins"], "cyclic-allocation"),
        (["--sampling-rate", "0.01", "--steps", "100", "--sampling", "truncated-poisson"], "--max-batch-size"),
        (["--sampling-rate", "0.01", "--steps", "100", "--max-batch-size", "5"], "--max-batch-size"),
        (
            ["--solve", "sampling-rate", "--noise-multiplier", "1", "--steps", "100", "--sampling", "shuffle"],
            "sampling",
        ),
    ],
)
def test_cli_calibrate_sampling_bad_input(capsys, argv, name):
    from tightdp.cli import main

    assert main(["calibrate", "--target-epsilon", "2", "--delta", "1e-5", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0]
