"""Group privacy for the sampling schemes (``group_epsilon(sampling=...)``).

Truth: with one step per epoch, balls-and-bins is the Gaussian mechanism and a group of ``k`` is exactly
``k sqrt(E)/sigma``-GDP (closed form); shuffling's upper end is that GDP bound for any ``t``; the
group-privacy-lemma upper end is re-derived from an independent example-level query; the lower end is
the example-level one; truncated Poisson is refused with its reason.
"""

from __future__ import annotations

import math

import pytest
from scipy import optimize, special

import tightdp
from tightdp.errors import UnsupportedMechanismError
from tightdp.group import _log_group_factor
from tightdp.sampling import TruncatedPoisson

DELTA = 1e-5


def gdp_epsilon(mu: float, delta: float) -> float:
    def d(e):
        return special.ndtr(-e / mu + mu / 2) - math.exp(e + special.log_ndtr(-e / mu - mu / 2)) - delta

    return optimize.brentq(d, 0.0, 10 * mu * mu + 50, xtol=1e-13, rtol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_one_step_per_epoch_is_the_gaussian_group_bound(k):
    """t = 1: the epoch is one Gaussian step, a group of k shifts it by k: exactly k sqrt(E)/sigma-GDP."""
    sigma, epochs = 3.0, 4
    b = tightdp.group_epsilon(
        noise_multiplier=sigma, sampling_rate=1.0, steps=epochs, delta=DELTA, group_size=k, sampling="random-allocation"
    )
    exact = gdp_epsilon(k * math.sqrt(epochs) / sigma, DELTA)
    assert b.kind == "bound" and b.lower <= exact <= b.upper
    assert b.upper <= exact + 2 * max(1e-3 * exact, 5e-5)  # the no-amplification bound is exact here


@pytest.mark.parametrize("k", [2, 4])
def test_shuffle_group_upper_is_the_gdp_group_bound(k):
    sigma, t, epochs = 2.0, 50, 3
    b = tightdp.group_epsilon(
        noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=DELTA, group_size=k, sampling="shuffle"
    )
    exact = gdp_epsilon(k * math.sqrt(epochs) / sigma, DELTA)
    assert exact <= b.upper <= exact + 2 * max(1e-3 * exact, 5e-5)
    one = tightdp.dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=DELTA, sampling="shuffle"
    )
    assert b.lower == one.lower  # Chua et al.'s attack on one record of the group
    assert "Dong, Roth, Su" in b.details["upper"]


@pytest.mark.slow
def test_balls_and_bins_group_lemma_is_rederived_and_beats_no_amplification():
    sigma, t, epochs, k = 1.0, 100, 3, 2
    kw = dict(noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=DELTA)
    b = tightdp.group_epsilon(**kw, group_size=k, sampling="random-allocation")
    lemma = b.details["group_privacy_lemma_epsilon"]
    assert lemma is not None and b.upper == lemma < b.details["no_amplification_epsilon"]
    # re-derive: (eps', delta / S(eps')) certified for one example by an independent query gives (k eps', delta)
    eps1 = lemma / k
    delta1 = math.exp(math.log(DELTA) - _log_group_factor(eps1, k))
    one = tightdp.allocation_epsilon(noise_multiplier=sigma, steps_per_epoch=t, epochs=epochs, delta=delta1)
    assert one.upper <= eps1 * (1 + 1e-9)
    example = tightdp.dpsgd_epsilon(**kw, sampling="random-allocation")
    assert b.lower == example.lower <= b.upper
    # more members never certify less
    b4 = tightdp.group_epsilon(**kw, group_size=4, sampling="random-allocation")
    assert b4.upper >= b.upper and b4.lower <= b4.upper


def test_group_of_one_is_the_example_level_answer():
    kw = dict(noise_multiplier=1.0, sampling_rate=1 / 20, steps=40, delta=DELTA)
    for sampling in ("random-allocation", "shuffle"):
        g = tightdp.group_epsilon(**kw, group_size=1, sampling=sampling)
        e = tightdp.dpsgd_epsilon(**kw, sampling=sampling)
        assert (g.lower, g.upper) == (e.lower, e.upper)


def test_truncated_poisson_group_is_not_applicable_with_its_reason():
    assert TruncatedPoisson.group_reason.startswith("not applicable:")
    with pytest.raises(UnsupportedMechanismError, match="not applicable: Ganesh 2025"):
        tightdp.group_epsilon(
            noise_multiplier=1.0,
            sampling_rate=0.01,
            steps=10,
            delta=DELTA,
            group_size=2,
            sampling="truncated-poisson",
            dataset_size=1000,
        )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sampling_rate=0.3, steps=10), "sampling_rate"),
        (dict(sampling_rate=0.1, steps=15), "steps"),
        (dict(steps=10), "sampling_rate"),
        (dict(sampling_rate=0.1, steps=10, batch_size=5), "batch_size"),
        (dict(sampling_rate=0.1, steps=10, accountant="prv"), "accountant"),
        (dict(sampling_rate=0.1, steps=10, group_size=0), "group_size"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    kw = dict(noise_multiplier=1.0, delta=DELTA, group_size=2, sampling="random-allocation") | kwargs
    with pytest.raises(ValueError, match=name):
        tightdp.group_epsilon(**kw)


@pytest.mark.parametrize("sampling", ["shuffle", "random-allocation"])
def test_group_curve_and_cli_for_the_epoch_schemes(sampling, capsys):
    """``group_curve`` / ``tightdp group --sampling <scheme>`` report group_epsilon's certified bound per size
    (they refused every scheme but Poisson and fixed batches)."""
    import json

    from tightdp.cli import main
    from tightdp.group import group_curve

    kw = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=200, delta=1e-5)
    reports = group_curve(group_sizes=[1, 4], sampling=sampling, **kw)
    direct = tightdp.group_epsilon(group_size=4, sampling=sampling, **kw)
    assert reports[1].epsilon.upper == direct.upper and reports[1].epsilon.lower == direct.lower
    assert reports[0].epsilon.upper == reports[1].example_epsilon.upper
    assert reports[0].epsilon.upper <= reports[1].epsilon.upper
    if sampling == "random-allocation":  # its upper end is the lemma's, here below no amplification
        assert reports[1].group_privacy_lemma_epsilon == pytest.approx(direct.upper)
    else:
        assert reports[1].group_privacy_lemma_epsilon is None
    code = main(
        [
            "group",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "200",
            "--delta",
            "1e-5",
            "--group-size",
            "4",
            "--sampling",
            sampling,
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["epsilon"]["upper"] == direct.upper and out["sampling"] == sampling
    assert (
        main(
            [
                "group",
                "--noise-multiplier",
                "1",
                "--steps",
                "200",
                "--delta",
                "1e-5",
                "--group-size",
                "4",
                "--sampling",
                sampling,
            ]
        )
        == 2
    )  # no --sampling-rate: one line, exit 2
    assert "--sampling-rate is required" in capsys.readouterr().err
