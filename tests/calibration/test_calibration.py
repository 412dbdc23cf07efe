"""Calibration: never overshoots, tight to 1 %, robust for targets 0.01..100.

Truth for the search logic: the Gaussian mechanism composed ``k`` times is
exactly mu-GDP with ``mu = sqrt(k) / sigma`` (Dong, Roth, Su 2019; the PRVs add,
Koskela et al. 2023 Thm 6 and eq. (2.2)), whose curve is
``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Koskela et al. 2023 eq. (2.3), Lemma 10).
So for ``q = 1`` the smallest noise has a closed form we can solve to 1e-12.
"""

from __future__ import annotations

import json
import math

import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from tightdp.bounds import Bounds
from tightdp.calibration import (
    CalibrationError,
    calibrate_noise,
    calibrate_sampling_rate,
    calibrate_steps,
    steps_from_epochs,
)


# ----------------------------------------------------------------- closed-form truth
def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP, in log space for the second term (no overflow at eps = 100)."""
    a = special.ndtr(-eps / mu + mu / 2)
    b = math.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
    return max(a - b, 0.0)


def gdp_epsilon(mu: float, delta: float) -> float:
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(hi, mu) > delta:
        hi *= 2
    return optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)


def gdp_mu_for(eps: float, delta: float) -> float:
    """The mu with delta(eps; mu) = delta (delta is increasing in mu)."""
    lo, hi = 1e-6, 1.0
    while gdp_delta(eps, hi) < delta:
        hi *= 2
    return optimize.brentq(lambda m: gdp_delta(eps, m) - delta, lo, hi, xtol=1e-15, rtol=1e-15)


def exact_fn(sigma, q, steps, delta):
    """Exact epsilon of ``steps`` Gaussian releases (q must be 1), returned as a certified Bounds."""
    assert q == 1.0
    e = gdp_epsilon(math.sqrt(steps) / sigma, delta)
    return Bounds(e, e, e, "epsilon", "bound")


def toy_rate_fn(sigma, q, steps, delta):
    """A monotone toy in q (mu = q sqrt(k) / sigma) to exercise the rate search against a closed form."""
    e = gdp_epsilon(q * math.sqrt(steps) / sigma, delta)
    return Bounds(e, e, e, "epsilon", "bound")


# ------------------------------------------------------------------ search logic
@pytest.mark.parametrize("target", [0.01, 0.05, 0.5, 3.0, 10.0, 80.0, 100.0])
@pytest.mark.parametrize("steps", [1, 50, 10_000])
def test_noise_closed_form_safe_and_tight(target, steps):
    delta = 1e-5
    cal = calibrate_noise(target_epsilon=target, delta=delta, sampling_rate=1.0, steps=steps, epsilon_fn=exact_fn)
    sigma_star = math.sqrt(steps) / gdp_mu_for(target, delta)
    assert cal.epsilon.upper <= target
    assert cal.noise_multiplier >= sigma_star * (1 - 1e-9)  # never overshoots the true epsilon
    assert cal.noise_multiplier <= 1.01 * sigma_star  # within 1 % of the smallest noise
    tight = cal.details["tightness"]
    assert tight["overshoots"] and tight["epsilon_upper"] > target
    assert tight["checked"] == pytest.approx(0.99 * cal.noise_multiplier, rel=1e-5)
    assert cal.evaluations <= 25


@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log_target=st.floats(math.log(0.01), math.log(99.99)),  # exp(log(100)) rounds above the 100 cap
    steps=st.integers(1, 10**6),
    log_delta=st.floats(math.log(1e-12), math.log(1e-2)),
)
def test_noise_property_never_overshoots_within_one_percent(log_target, steps, log_delta):
    target, delta = math.exp(log_target), math.exp(log_delta)
    cal = calibrate_noise(target_epsilon=target, delta=delta, sampling_rate=1.0, steps=steps, epsilon_fn=exact_fn)
    true_eps = gdp_epsilon(math.sqrt(steps) / cal.noise_multiplier, delta)
    assert true_eps <= target * (1 + 1e-12)
    sigma_star = math.sqrt(steps) / gdp_mu_for(target, delta)
    assert sigma_star * (1 - 1e-9) <= cal.noise_multiplier <= 1.01 * sigma_star


def test_non_monotone_bound_still_safe_and_tight():
    """A bound that wobbles (as discretised bounds do) must not fool the search."""

    def wobbly(sigma, q, steps, delta):
        e = gdp_epsilon(math.sqrt(steps) / sigma, delta)
        up = e * (1 + 0.004 * (1 + math.sin(4000 * math.log(sigma))))
        return Bounds(e, e, up, "epsilon", "bound")

    for target in (0.05, 3.0, 80.0):
        cal = calibrate_noise(target_epsilon=target, delta=1e-5, sampling_rate=1.0, steps=100, epsilon_fn=wobbly)
        assert cal.epsilon.upper <= target
        assert wobbly(0.99 * cal.noise_multiplier, 1.0, 100, 1e-5).upper > target
        sigma_star = 10.0 / gdp_mu_for(target, 1e-5)
        assert sigma_star <= cal.noise_multiplier <= 1.01 * sigma_star


def test_uncertifiable_points_count_as_infeasible():
    from tightdp.errors import PrecisionError

    def picky(sigma, q, steps, delta):
        if sigma < 2.0:
            raise PrecisionError("cannot certify")
        return exact_fn(sigma, q, steps, delta)

    cal = calibrate_noise(target_epsilon=80.0, delta=1e-5, sampling_rate=1.0, steps=100, epsilon_fn=picky)
    assert cal.noise_multiplier >= 2.0
    assert cal.epsilon.upper <= 80.0


def test_resource_failures_are_safe_and_reported():
    """A fine evaluation that runs out of memory below some noise: the answer stays certified, and the
    tightness record says that the neighbour could not be checked instead of claiming it overshoots."""
    sigma_star = 10.0 / gdp_mu_for(3.0, 1e-5)

    def fine(sigma, q, steps, delta):
        if sigma < 1.02 * sigma_star:
            raise MemoryError("grid too large")
        return exact_fn(sigma, q, steps, delta)

    from tightdp.calibration import _Evaluator

    ev = _Evaluator(fine, 3.0, lambda s: (s, 1.0, 100, 1e-5))
    assert not ev.feasible(sigma_star * 1.01) and ev.failures
    cal = calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=1.0, steps=100, epsilon_fn=fine)
    assert cal.noise_multiplier >= 1.02 * sigma_star and cal.epsilon.upper <= 3.0
    assert cal.details["tightness"]["overshoots"] is None and "certified" in cal.details["tightness"]["note"]
    assert cal.details["uncertified_points"]


def test_infinite_upper_counts_as_infeasible():
    def inf_below(sigma, q, steps, delta):
        if sigma < 5.0:
            return Bounds(1.0, 1.0, math.inf, "epsilon", "bound", {"note": "no certificate"})
        return exact_fn(sigma, q, steps, delta)

    cal = calibrate_noise(target_epsilon=50.0, delta=1e-5, sampling_rate=1.0, steps=10, epsilon_fn=inf_below)
    assert cal.noise_multiplier >= 5.0


def test_steps_closed_form_exact():
    sigma, delta = 10.0, 1e-5
    for target in (0.5, 3.0, 20.0):
        cal = calibrate_steps(
            target_epsilon=target, delta=delta, noise_multiplier=sigma, sampling_rate=1.0, epsilon_fn=exact_fn
        )
        k = cal.steps
        assert gdp_epsilon(math.sqrt(k) / sigma, delta) <= target
        assert gdp_epsilon(math.sqrt(k + 1) / sigma, delta) > target
        assert k == math.floor((gdp_mu_for(target, delta) * sigma) ** 2)
        assert cal.details["tightness"]["checked"] == k + 1


def test_steps_unreachable_and_capped():
    with pytest.raises(CalibrationError, match="already exceed"):
        calibrate_steps(target_epsilon=0.1, delta=1e-5, noise_multiplier=1.0, sampling_rate=1.0, epsilon_fn=exact_fn)
    cal = calibrate_steps(
        target_epsilon=3.0, delta=1e-5, noise_multiplier=1e4, sampling_rate=1.0, max_steps=1000, epsilon_fn=exact_fn
    )
    assert cal.steps == 1000 and "max_steps" in cal.details["note"]


def test_sampling_rate_closed_form():
    sigma, steps, delta = 20.0, 400, 1e-5
    for target in (0.05, 1.0, 3.0):
        cal = calibrate_sampling_rate(
            target_epsilon=target, delta=delta, noise_multiplier=sigma, steps=steps, epsilon_fn=toy_rate_fn
        )
        q_star = gdp_mu_for(target, delta) * sigma / math.sqrt(steps)
        assert cal.epsilon.upper <= target
        assert q_star / 1.01 <= cal.sampling_rate <= q_star * (1 + 1e-9)
        assert cal.details["tightness"]["epsilon_upper"] > target
    full = calibrate_sampling_rate(
        target_epsilon=50.0, delta=delta, noise_multiplier=sigma, steps=steps, epsilon_fn=toy_rate_fn
    )
    assert full.sampling_rate == 1.0 and "full batches" in full.details["note"]


def test_noise_unreachable_raises():
    def never(sigma, q, steps, delta):
        return Bounds(5.0, 5.0, 5.0, "epsilon", "bound")

    with pytest.raises(CalibrationError, match="no noise multiplier"):
        calibrate_noise(target_epsilon=1.0, delta=1e-5, sampling_rate=1.0, steps=10, epsilon_fn=never)


def test_epochs_interface():
    q, k = steps_from_epochs(epochs=3, dataset_size=1000, batch_size=300)
    assert q == 0.3 and k == 12  # ceil(1000/300) = 4 batches per epoch, counted up (safe side)
    a = calibrate_noise(target_epsilon=1.0, delta=1e-5, epochs=2, dataset_size=100, batch_size=100, epsilon_fn=exact_fn)
    b = calibrate_noise(target_epsilon=1.0, delta=1e-5, sampling_rate=1.0, steps=2, epsilon_fn=exact_fn)
    assert a.noise_multiplier == b.noise_multiplier and a.steps == 2


def test_to_dict_is_json():
    cal = calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=1.0, steps=10, epsilon_fn=exact_fn)
    d = json.loads(json.dumps(cal.to_dict()))
    assert d["noise_multiplier"] == cal.noise_multiplier
    assert d["epsilon"]["upper"] <= 3.0 and d["solved"] == "noise_multiplier"
    assert cal.value == cal.noise_multiplier


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(target_epsilon=float("nan")), "target_epsilon"),
        (dict(target_epsilon=-1.0), "target_epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(steps=10.5), "steps"),
        (dict(steps=0), "steps"),
        (dict(rtol=float("nan")), "rtol"),
    ],
)
def test_bad_input_noise(kwargs, name):
    base = dict(target_epsilon=1.0, delta=1e-5, sampling_rate=1.0, steps=10, epsilon_fn=exact_fn)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        calibrate_noise(**base)


def test_bad_input_other():
    with pytest.raises(ValueError, match="noise_multiplier"):
        calibrate_steps(target_epsilon=1.0, delta=1e-5, noise_multiplier=0.0, sampling_rate=0.1, epsilon_fn=exact_fn)
    with pytest.raises(ValueError, match="steps"):
        calibrate_sampling_rate(
            target_epsilon=1.0, delta=1e-5, noise_multiplier=1.0, steps=float("nan"), epsilon_fn=exact_fn
        )
    with pytest.raises(ValueError, match="either"):
        calibrate_noise(target_epsilon=1.0, delta=1e-5, sampling_rate=0.1, steps=10, epochs=1, epsilon_fn=exact_fn)
    with pytest.raises(ValueError, match="batch_size"):
        calibrate_noise(target_epsilon=1.0, delta=1e-5, epochs=1, dataset_size=10, epsilon_fn=exact_fn)
    with pytest.raises(ValueError, match="target_epsilon"):
        calibrate_noise(target_epsilon=0.0, delta=1e-5, sampling_rate=1.0, steps=1, epsilon_fn=exact_fn)


def test_steps_in_whole_epochs():
    sigma, delta, unit = 10.0, 1e-5, 7
    cal = calibrate_steps(
        target_epsilon=3.0,
        delta=delta,
        noise_multiplier=sigma,
        sampling_rate=1.0,
        multiple_of=unit,
        epsilon_fn=exact_fn,
    )
    assert cal.steps % unit == 0
    assert gdp_epsilon(math.sqrt(cal.steps) / sigma, delta) <= 3.0
    assert gdp_epsilon(math.sqrt(cal.steps + unit) / sigma, delta) > 3.0


def test_coarse_then_fine_evaluation():
    """A coarse certified interval decides points far from the boundary; only near it is the fine one used."""
    from tightdp.calibration import _Evaluator

    def with_error(err):
        def fn(sigma, q, steps, delta):
            e = gdp_epsilon(math.sqrt(steps) / sigma, delta)
            return Bounds(max(e - err, 0.0), e, e + err, "epsilon", "bound")

        return fn

    target = 3.0
    sigma_star = 10.0 / gdp_mu_for(target, 1e-5)
    ev = _Evaluator(with_error(0.01), target, lambda s: (s, 1.0, 100, 1e-5), with_error(0.2), 0.01)
    assert ev.feasible(2 * sigma_star) and ev.calls == 0
    assert not ev.feasible(0.5 * sigma_star) and ev.calls == 0
    ev.feasible(1.001 * sigma_star)
    assert ev.calls == 1
    cal = calibrate_noise(target_epsilon=target, delta=1e-5, sampling_rate=1.0, steps=100, epsilon_fn=with_error(0.01))
    assert sigma_star <= cal.noise_multiplier <= 1.01 * sigma_star


# ------------------------------------------------------------- with the certified PRV accountant
def _peer_epsilon(sigma, q, steps, delta, interval):
    """dp-accounting 0.6.0 PLD (pessimistic) for the Poisson-subsampled Gaussian: an independent check."""
    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as pld

    acc = pld.PLDAccountant(value_discretization_interval=interval)
    acc.compose(de.SelfComposedDpEvent(de.PoissonSampledDpEvent(q, de.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(delta)


@pytest.mark.peers
@pytest.mark.parametrize("target", [0.05, 3.0, 80.0])
def test_acceptance_targets_safe_and_tight_with_prv(target):
    """Acceptance: calibration succeeds and is safe for targets 0.05, 3 and 80."""
    q, k, delta = 0.01, 1000, 1e-5
    cal = calibrate_noise(target_epsilon=target, delta=delta, sampling_rate=q, steps=k)
    assert cal.epsilon.kind == "bound" and cal.epsilon.upper <= target
    # the answer is certified at the default accuracy of dpsgd_epsilon / tightdp epsilon
    assert (cal.eps_error, cal.rel_error) == (5e-5, 1e-3)  # relative 1e-3, floor 5e-5
    if target < 1:  # the default accuracy's interval is a large share of a small target: ask for a finer one
        cal = calibrate_noise(target_epsilon=target, delta=delta, sampling_rate=q, steps=k, eps_error=target / 300)
        assert cal.eps_error == target / 300 and cal.epsilon.upper <= target
    # tight, with proof: 1 % less noise has a certified LOWER bound above the target
    tight = cal.details["tightness"]
    assert tight["step"] == 0.01 and tight["overshoots"]
    assert tight["checked"] == pytest.approx((1 - tight["step"]) * cal.noise_multiplier, rel=1e-5)
    assert tight["epsilon_lower"] > target
    # safe, by an independent implementation (dp-accounting's pessimistic PLD, 1e-3 grid)
    pytest.importorskip("dp_accounting")
    interval = min(1e-3, 4e-4 * target)  # the peer's grid must be fine next to the target
    assert _peer_epsilon(cal.noise_multiplier, q, k, delta, interval) <= target * (1 + 1e-3) + 2 * interval


@pytest.mark.slow
@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log_target=st.floats(math.log(0.05), math.log(80.0)),
    log_q=st.floats(math.log(1e-3), 0.0),
    steps=st.integers(1, 2000),
)
def test_prv_calibration_property(log_target, log_q, steps):
    target, q = math.exp(log_target), math.exp(log_q)
    cal = calibrate_noise(target_epsilon=target, delta=1e-5, sampling_rate=q, steps=steps)
    assert cal.epsilon.upper <= target
    tight = cal.details["tightness"]
    assert tight["overshoots"] and tight["epsilon_upper"] > target
    assert tight["epsilon_lower"] > target  # the smallest noise is within 1 % (certified)


def test_prv_steps_and_rate():
    sigma, q, delta = 1.0, 0.01, 1e-5
    cal = calibrate_steps(target_epsilon=2.0, delta=delta, noise_multiplier=sigma, sampling_rate=q)
    assert cal.epsilon.upper <= 2.0 and cal.details["tightness"]["epsilon_upper"] > 2.0
    assert cal.steps + 1 <= cal.details["tightness"]["checked"] <= math.ceil(1.01 * cal.steps)
    assert cal.details["tightness"]["epsilon_lower"] > 2.0  # proved by a certified lower bound
    rate = calibrate_sampling_rate(target_epsilon=2.0, delta=delta, noise_multiplier=sigma, steps=cal.steps)
    assert rate.epsilon.upper <= 2.0 and rate.details["tightness"]["epsilon_upper"] > 2.0
    assert rate.sampling_rate == pytest.approx(q, rel=0.02)  # the inverse question lands back near q


# ------------------------------------------------------------------------ CLI
def test_cli_calibrate_json_and_text(capsys):
    from tightdp.cli import main

    assert (
        main(
            [
                "calibrate",
                "--target-epsilon",
                "3",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "0.01",
                "--steps",
                "1000",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["solved"] == "noise_multiplier" and data["epsilon"]["upper"] <= 3.0
    assert data["noise_multiplier"] == pytest.approx(
        calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=0.01, steps=1000).noise_multiplier
    )
    assert (
        main(
            [
                "calibrate",
                "--solve",
                "steps",
                "--noise-multiplier",
                "1.1",
                "--target-epsilon",
                "3",
                "--delta",
                "1e-5",
                "--dataset-size",
                "50000",
                "--batch-size",
                "256",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "steps:" in out and "epochs of 196 steps" in out
    assert (
        main(
            [
                "calibrate",
                "--solve",
                "sampling-rate",
                "--noise-multiplier",
                "1.0",
                "--steps",
                "100",
                "--target-epsilon",
                "2",
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    assert "sampling rate:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--target-epsilon", "3", "--delta", "0", "--sampling-rate", "0.01", "--steps", "10"], "delta"),
        (
            ["--target-epsilon", "nan", "--delta", "1e-5", "--sampling-rate", "0.01", "--steps", "10"],
            "--target-epsilon",
        ),
        (["--target-epsilon", "3", "--delta", "1e-5", "--sampling-rate", "2", "--steps", "10"], "--sampling-rate"),
        (["--target-epsilon", "3", "--delta", "1e-5", "--sampling-rate", "0.1", "--steps", "2.5"], "--steps"),
        (["--target-epsilon", "3", "--delta", "1e-5", "--sampling-rate", "0.1"], "--steps"),
        (
            ["--solve", "steps", "--target-epsilon", "3", "--delta", "1e-5", "--sampling-rate", "0.1"],
            "--noise-multiplier",
        ),
        (
            [
                "--solve",
                "noise",
                "--noise-multiplier",
                "1",
                "--target-epsilon",
                "3",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "0.1",
                "--steps",
                "10",
            ],
            "--noise-multiplier",
        ),
    ],
)
def test_cli_calibrate_bad_input(capsys, argv, name):
    from tightdp.cli import main

    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0]


def test_cli_calibrate_unreachable(capsys):
    from tightdp.cli import main

    assert (
        main(
            [
                "calibrate",
                "--solve",
                "steps",
                "--noise-multiplier",
                "0.3",
                "--target-epsilon",
                "0.01",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "1",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exceed" in err[0]


def test_cli_spinner_only_on_terminal():
    import io
    import time as _time

    from tightdp.cli.calibrate_cmd import _DelayedSpinner

    quiet = io.StringIO()
    with _DelayedSpinner("x", delay=0.0, stream=quiet):
        _time.sleep(0.05)
    assert quiet.getvalue() == ""

    class FakeTTY(io.StringIO):
        def isatty(self):
            return True

    fast = FakeTTY()
    with _DelayedSpinner("x", delay=5.0, stream=fast):
        pass  # finishes before the delay: nothing shown
    assert fast.getvalue() == ""
