"""The run description: sampling schemes as objects, one registry of their names, one calibrator.

Truth used here: the Gaussian mechanism's closed form (Balle & Wang 2018, Thm 8: a T-fold composition of
Gaussian steps of noise sigma is mu-GDP with mu = sqrt(T)/sigma, delta(eps) = Phi(-eps/mu + mu/2) -
e^eps Phi(-eps/mu - mu/2)), which a test-local scheme (each step uses every example) must reproduce after
flowing through every front end without any of them naming it; and the keyword API, which must give
exactly the same intervals as the object API it parses into.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from scipy import optimize, stats

import tightdp
from tightdp import calibration
from tightdp.cli import main
from tightdp.mechanisms import Gaussian
from tightdp.report import ReportConfig
from tightdp.runs import TrainingRun
from tightdp.sampling import (
    AMBIGUOUS,
    SCHEMES,
    CyclicAllocation,
    FixedBatch,
    Poisson,
    RandomAllocation,
    Relation,
    SamplingScheme,
    Shuffle,
    TruncatedPoisson,
    from_jax_privacy,
    parse_sampling,
    register_scheme,
    scheme_class,
    scheme_names,
    unregister_scheme,
)

DELTA = 1e-5


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon of mu-GDP at ``delta`` (closed form, solved to 1e-13)."""

    def d(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta

    return optimize.brentq(d, 0.0, 100.0, xtol=1e-13)


# ------------------------------------------------------------------ the registry
@pytest.mark.parametrize(
    "spelling, cls",
    [
        ("poisson", Poisson),
        ("Poisson", Poisson),
        ("random-allocation", RandomAllocation),
        ("random_allocation", RandomAllocation),
        ("balls-in-bins-fresh", RandomAllocation),
        ("cyclic-allocation", CyclicAllocation),
        ("balls_in_bins_fixed", CyclicAllocation),
        ("shuffle", Shuffle),
        ("truncated_poisson", TruncatedPoisson),
        ("fixed-batch", FixedBatch),
    ],
)
def test_every_spelling_maps_to_one_class(spelling, cls):
    assert scheme_class(spelling) is cls


def test_the_ambiguous_name_is_refused_everywhere_naming_both_schemes(capsys, tmp_path):
    calls = [
        lambda: tightdp.dpsgd_epsilon(
            noise_multiplier=1.0, sampling_rate=0.1, steps=10, delta=DELTA, sampling="balls-and-bins"
        ),
        lambda: tightdp.privacy_statement(
            noise_multiplier=1.0, sampling_rate=0.1, steps=10, delta=DELTA, sampling="balls_and_bins"
        ),
        lambda: tightdp.group_epsilon(
            noise_multiplier=1.0, sampling_rate=0.1, steps=10, delta=DELTA, group_size=2, sampling="Balls-And-Bins"
        ),
        lambda: tightdp.calibrate_noise(
            target_epsilon=2.0, delta=DELTA, sampling_rate=0.1, steps=10, sampling="balls-and-bins"
        ),
        lambda: ReportConfig.from_dict(
            {"training": {"sampling_rate": 0.1, "steps": 10, "noise_multiplier": 1.0, "sampling": "balls_and_bins"}}
        ),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="ambiguous") as info:
            call()
        assert "random-allocation" in str(info.value) and "cyclic-allocation" in str(info.value)
    assert (
        main(
            [
                "epsilon",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.1",
                "--steps",
                "10",
                "--delta",
                "1e-5",
                "--sampling",
                "balls-and-bins",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cyclic-allocation" in err and "random-allocation" in err
    with pytest.raises(ValueError, match="already taken"):

        @register_scheme
        @dataclass(frozen=True, kw_only=True)
        class Squatter(Poisson):
            name: ClassVar[str] = "balls-and-bins"


def test_a_jax_privacy_balls_in_bins_description_maps_only_to_the_fixed_assignment_scheme():
    # jax_privacy's BallsInBinsSampling(iterations, cycle_length): one bin per example for the whole run
    described = {"iterations": 32, "cycle_length": 8}
    scheme, steps = from_jax_privacy(**described)
    assert type(scheme) is CyclicAllocation and not isinstance(scheme, RandomAllocation)
    assert scheme.steps_per_cycle == 8 and steps == 32
    # no other scheme takes that description
    for cls in dict.fromkeys(SCHEMES.values()):
        if cls is CyclicAllocation:
            continue
        with pytest.raises((TypeError, ValueError)):
            cls(steps_per_cycle=8)
    assert "balls-in-bins" not in SCHEMES and set(AMBIGUOUS) == {"balls-and-bins"}
    assert "jax_privacy" in CyclicAllocation.summary and "afresh" in RandomAllocation.summary


def test_cyclic_allocation_flows_and_says_which_scheme_was_accounted():
    run = TrainingRun(noise_multiplier=2.0, sampling=CyclicAllocation(steps_per_cycle=4), steps=8)
    fixed = tightdp.dpsgd_epsilon(run=run, delta=DELTA, eps_error=0.05)
    fresh = tightdp.dpsgd_epsilon(
        noise_multiplier=2.0, sampling_rate=1 / 4, steps=8, delta=DELTA, sampling="random-allocation", eps_error=0.05
    )
    assert fixed.lower > fresh.upper  # one bin for the run is far less private than a fresh one each epoch
    assert fixed.details["scheme"].startswith("cyclic-allocation")
    assert fresh.details["scheme"].startswith("random-allocation")


@pytest.mark.parametrize("bad", [[], {}, np.array([1.0, 2.0]), np.array([]), 3, b"poisson"])
def test_sampling_that_is_not_a_name_or_scheme_is_a_clear_value_error(bad):
    kw = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=DELTA)
    for call in (
        lambda: tightdp.group_epsilon(**kw, group_size=2, sampling=bad),
        lambda: tightdp.group_curve(**kw, group_sizes=[1, 2], sampling=bad),
        lambda: tightdp.dpsgd_epsilon(**kw, sampling=bad),
        lambda: tightdp.privacy_statement(**kw, sampling=bad),
    ):
        with pytest.raises(ValueError, match="sampling"):
            call()


# ------------------------------------------------------------------ the run object
def test_schemes_and_runs_are_frozen_keyword_only_and_validated():
    with pytest.raises(TypeError):
        Poisson(0.1)  # keyword-only
    p = Poisson(sampling_rate=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.sampling_rate = 0.2
    with pytest.raises(ValueError, match="sampling_rate"):
        Poisson(sampling_rate=1.5)
    with pytest.raises(ValueError, match="max_batch_size"):
        TruncatedPoisson(sampling_rate=0.1, dataset_size=10, max_batch_size=11)
    with pytest.raises(ValueError, match="steps"):
        TrainingRun(noise_multiplier=1.0, sampling=Shuffle(steps_per_epoch=10), steps=15)
    with pytest.raises(ValueError, match="relation"):
        TrainingRun(noise_multiplier=1.0, sampling=Shuffle(steps_per_epoch=10), steps=10, relation="add-remove")
    with pytest.raises(ValueError, match="conflicts"):
        TrainingRun(noise_multiplier=1.0, sampling=Shuffle(steps_per_epoch=10), steps=10, epochs=2)
    with pytest.raises(ValueError, match="sampling"):
        TrainingRun(noise_multiplier=1.0, sampling="poisson", steps=10)
    run = TrainingRun(noise_multiplier=1.0, sampling=Shuffle(steps_per_epoch=10), epochs=3)
    assert run.steps == 30 and run.relation is Relation.ZERO_OUT and run.sampling_rate == 0.1
    assert TrainingRun(noise_multiplier=1.0, sampling=p, steps=5).relation is Relation.ADD_REMOVE
    assert TrainingRun.from_dict(json.loads(json.dumps(run.to_dict()))) == dataclasses.replace(run, epochs=None)


def test_object_and_keyword_apis_give_the_same_intervals():
    cases = [
        (dict(sampling_rate=0.02, sampling="poisson"), Poisson(sampling_rate=0.02), 200),
        (dict(sampling_rate=0.1, sampling="random-allocation"), RandomAllocation(steps_per_epoch=10), 30),
        (dict(sampling_rate=0.1, sampling="shuffle"), Shuffle(steps_per_epoch=10), 30),
        (
            dict(sampling_rate=0.01, sampling="truncated-poisson", dataset_size=2000, max_batch_size=25),
            TruncatedPoisson(sampling_rate=0.01, dataset_size=2000, max_batch_size=25),
            40,
        ),
    ]
    for kw, scheme, steps in cases:
        run = TrainingRun(noise_multiplier=1.3, sampling=scheme, steps=steps)
        a = tightdp.dpsgd_epsilon(noise_multiplier=1.3, steps=steps, delta=DELTA, eps_error=0.02, **kw)
        b = tightdp.dpsgd_epsilon(run=run, delta=DELTA, eps_error=0.02)
        assert (a.lower, a.estimate, a.upper) == (b.lower, b.estimate, b.upper)
        assert b.details["scheme"].startswith(scheme.name)
    with pytest.raises(ValueError, match="run replaces steps"):
        tightdp.dpsgd_epsilon(run=run, steps=3, delta=DELTA)
    run = TrainingRun(noise_multiplier=1.3, sampling=Poisson(sampling_rate=0.02), steps=200)
    g1 = tightdp.group_epsilon(run=run, delta=DELTA, group_size=3, eps_error=0.02)
    g2 = tightdp.group_epsilon(
        noise_multiplier=1.3, sampling_rate=0.02, steps=200, delta=DELTA, group_size=3, eps_error=0.02
    )
    assert (g1.lower, g1.upper) == (g2.lower, g2.upper)
    s1 = tightdp.privacy_statement(run=run, delta=DELTA, group_sizes=[1, 3], eps_error=0.02)
    s2 = tightdp.privacy_statement(
        noise_multiplier=1.3, sampling_rate=0.02, steps=200, delta=DELTA, group_sizes=[1, 3], eps_error=0.02
    )
    assert [(g.epsilon.lower, g.epsilon.upper) for g in s1.groups] == [
        (g.epsilon.lower, g.epsilon.upper) for g in s2.groups
    ]
    assert s1.epsilon.upper == s2.epsilon.upper


def test_the_statement_says_which_allocation_ran():
    s = tightdp.privacy_statement(
        noise_multiplier=2.0, sampling_rate=0.25, steps=8, delta=DELTA, sampling="random-allocation", eps_error=0.05
    )
    text = " ".join(s.to_text().split())  # unwrapped
    assert "fresh step every epoch" in text and "not jax_privacy's balls-in-bins" in text
    assert s.parameters["scheme"].startswith("random-allocation")


# ------------------------------------------------------------------ one calibrator
def test_calibrate_is_what_the_wrappers_run():
    kw = dict(target_epsilon=2.0, delta=DELTA, eps_error=0.05)
    run = TrainingRun(noise_multiplier=1.0, sampling=Poisson(sampling_rate=0.02), steps=300)
    a = calibration.calibrate(run=run, parameter="noise_multiplier", **kw)
    b = tightdp.calibrate_noise(sampling_rate=0.02, steps=300, **kw)
    assert (a.noise_multiplier, a.epsilon.upper) == (b.noise_multiplier, b.epsilon.upper)
    assert a.run == run.replace(noise_multiplier=a.noise_multiplier)
    ep = calibration.calibrate(
        run=TrainingRun(noise_multiplier=2.0, sampling=Shuffle(steps_per_epoch=5), steps=5), parameter="epochs", **kw
    )
    st = tightdp.calibrate_steps(noise_multiplier=2.0, sampling_rate=0.2, sampling="shuffle", **kw)
    assert ep.steps == st.steps and ep.steps % 5 == 0
    r = calibration.calibrate(run=run, parameter="sampling_rate", **kw)
    assert r.sampling_rate == tightdp.calibrate_sampling_rate(noise_multiplier=1.0, steps=300, **kw).sampling_rate
    with pytest.raises(ValueError, match="sampling_rate"):
        calibration.calibrate(run=ep.run, parameter="sampling_rate", **kw)
    with pytest.raises(ValueError, match="parameter"):
        calibration.calibrate(run=run, parameter="batch", **kw)
    with pytest.raises(ValueError, match="epochs"):
        calibration.calibrate(run=run, parameter="epochs", **kw)


# ------------------------------------------------------------------ adding a scheme is one class
@dataclass(frozen=True, kw_only=True)
class FullBatch(SamplingScheme):
    """Every step uses every example: the Gaussian mechanism each step (a test-local scheme)."""

    name: ClassVar[str] = "toy-full-batch"
    summary: ClassVar[str] = "full batches: every step uses every example"
    options: ClassVar[tuple[str, ...]] = ("sampling_rate",)

    @property
    def sampling_rate(self) -> float:
        return 1.0

    def step_mechanism(self, *, noise_multiplier, relation=None):
        return Gaussian(noise_multiplier=noise_multiplier)

    @classmethod
    def from_options(cls, *, sampling_rate=None, **_):
        if sampling_rate not in (None, 1, 1.0):
            raise ValueError(f"sampling_rate must be 1 for sampling={cls.name!r}, got {sampling_rate!r}")
        return cls()


@pytest.fixture
def toy():
    register_scheme(FullBatch)
    yield FullBatch
    unregister_scheme(FullBatch)


def test_a_new_scheme_flows_through_every_front_end(toy, capsys):
    sigma, steps = 4.0, 16
    exact = gaussian_epsilon(math.sqrt(steps) / sigma, DELTA)
    assert "toy-full-batch" in scheme_names() and isinstance(parse_sampling("toy_full_batch"), FullBatch)
    b = tightdp.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=1.0, steps=steps, delta=DELTA, sampling="toy-full-batch"
    )
    assert b.lower <= exact <= b.upper and b.upper - b.lower <= 2e-3 * exact + 1e-4
    st = tightdp.privacy_statement(
        noise_multiplier=sigma,
        sampling_rate=1.0,
        steps=steps,
        delta=DELTA,
        sampling="toy-full-batch",
        group_sizes=[1, 2],
    )
    assert st.epsilon.upper == b.upper and "full batches" in st.to_text()
    assert st.groups[1].epsilon is None and st.groups[1].not_applicable  # it declared no group analysis
    cal = tightdp.calibrate_noise(
        target_epsilon=exact, delta=DELTA, sampling_rate=1.0, steps=steps, sampling="toy-full-batch"
    )
    assert cal.sampling == "toy-full-batch" and cal.epsilon.upper <= exact
    assert sigma <= cal.noise_multiplier <= sigma * 1.01  # the closed form's sigma, rounded to the safe side
    assert (
        main(
            [
                "epsilon",
                "--noise-multiplier",
                str(sigma),
                "--sampling-rate",
                "1",
                "--steps",
                str(steps),
                "--delta",
                "1e-5",
                "--sampling",
                "toy-full-batch",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"]["upper"] == b.upper and out["parameters"]["sampling"] == "toy-full-batch"
    with pytest.raises(tightdp.UnsupportedMechanismError, match="toy-full-batch"):
        tightdp.group_epsilon(
            noise_multiplier=sigma, sampling_rate=1.0, steps=steps, delta=DELTA, group_size=2, sampling="toy-full-batch"
        )


def test_fixed_order_is_the_gaussian_mechanism_once_per_epoch():
    sigma, t, epochs = 2.0, 5, 3
    exact = gaussian_epsilon(math.sqrt(epochs) / sigma, DELTA)
    b = tightdp.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=DELTA, sampling="fixed-order"
    )
    assert b.lower <= exact <= b.upper and b.upper - b.lower <= 2e-3 * exact + 1e-4
    shuffled = tightdp.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=DELTA, sampling="shuffle"
    )
    assert shuffled.upper == b.upper and shuffled.lower <= b.lower  # the same no-amplification bound


def test_the_run_derives_its_step_and_group_mechanisms():
    run = TrainingRun(noise_multiplier=1.5, sampling=Poisson(sampling_rate=0.01), steps=10)
    assert run.step_mechanism() == tightdp.dpsgd_mechanism(noise_multiplier=1.5, sampling_rate=0.01)
    assert run.group_mechanism(group_size=3) == tightdp.group.group_mechanism(
        noise_multiplier=1.5, group_size=3, sampling_rate=0.01
    )
    shuffled = TrainingRun(noise_multiplier=1.5, sampling=Shuffle(steps_per_epoch=10), steps=10)
    assert shuffled.step_mechanism() is None
    with pytest.raises(tightdp.UnsupportedMechanismError, match="without amplification"):
        shuffled.group_mechanism(group_size=2)
    capped = TrainingRun(
        noise_multiplier=1.5,
        steps=10,
        sampling=TruncatedPoisson(sampling_rate=0.01, dataset_size=100, max_batch_size=5),
    )
    with pytest.raises(tightdp.UnsupportedMechanismError, match="Ganesh 2025"):
        capped.group_mechanism(group_size=2)
