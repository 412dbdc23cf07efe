"""Mixture-of-Gaussians mechanisms (Ganesh 2024 Def. 2.8, Thm 3.1, Thm 3.3): validation, numerics, truth.

Single-step hockey-stick divergences are checked against mpmath (50 digits),
the closed-form Poisson inverse of Koskela et al. 2020 Sec. 6.1 and dp_accounting 0.6.0's
``MixtureGaussianPrivacyLoss``.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from _support import mixture_delta_mp, scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from tightdp.losses import DiscreteLoss, GaussianLoss, GaussianMixtureLoss, poisson_gaussian_loss
from tightdp.mechanisms import mechanism_from_dict
from tightdp.mechanisms.mixture import (
    GroupFixedBatchSampled,
    GroupPoissonSampled,
    MixtureAddLoss,
    MixtureOfGaussians,
    MixtureRemoveLoss,
    binomial_sensitivity,
    hypergeometric_sensitivity,
)


def one_step_delta(loss, eps: float) -> float:
    """``delta(eps) = P(L > eps) - e^eps Q(L > eps)`` of one MoG direction, through ``loss.inverse``."""
    _lo, hi = loss.support()
    if eps >= hi:
        return loss.infinity_mass
    x = float(loss.inverse(np.array([eps]))[0])
    sig = loss.sigma
    p_tail = sum(w * special.ndtr((m - x) / sig) for m, w in zip(loss.p_means, loss.p_weights))
    q_tail = sum(v * special.ndtr((m - x) / sig) for m, v in zip(loss.q_means, loss.q_weights))
    return float(p_tail - math.exp(eps) * q_tail + loss.infinity_mass)


def mp_delta_remove(sens, probs, sigma, eps, dps=50) -> mp.mpf:
    """Independent 50-digit hockey-stick divergence of ``sum p_i N(c_i, s^2)`` against ``N(0, s^2)``."""
    with mp.workdps(dps):
        s2 = mp.mpf(sigma) ** 2
        loss = lambda x: mp.log(
            mp.fsum(mp.mpf(p) * mp.exp((c * x - mp.mpf(c) ** 2 / 2) / s2) for c, p in zip(sens, probs))
        )
        lo, hi = mp.mpf(-200), mp.mpf(200)
        for _ in range(400):  # bisection: the loss is increasing
            mid = (lo + hi) / 2
            if loss(mid) > eps:
                hi = mid
            else:
                lo = mid
        x = (lo + hi) / 2
        tail = lambda m: mp.ncdf((m - x) / mp.sqrt(s2))
        return mp.fsum(mp.mpf(p) * tail(c) for c, p in zip(sens, probs)) - mp.exp(eps) * tail(0)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise_multiplier=0.0, sensitivities=(1.0,), probabilities=(1.0,)), "noise_multiplier"),
        (dict(noise_multiplier=-1.0, sensitivities=(1.0,), probabilities=(1.0,)), "noise_multiplier"),
        (dict(noise_multiplier=float("nan"), sensitivities=(1.0,), probabilities=(1.0,)), "noise_multiplier"),
        (dict(noise_multiplier=1.0, sensitivities=(-1.0, 1.0), probabilities=(0.5, 0.5)), r"sensitivities\[0\]"),
        (dict(noise_multiplier=1.0, sensitivities=(float("nan"),), probabilities=(1.0,)), r"sensitivities\[0\]"),
        (dict(noise_multiplier=1.0, sensitivities=(float("inf"),), probabilities=(1.0,)), r"sensitivities\[0\]"),
        (dict(noise_multiplier=1.0, sensitivities=(0.0, 1.0), probabilities=(0.5, 0.6)), "sum to 1"),
        (dict(noise_multiplier=1.0, sensitivities=(0.0, 1.0), probabilities=(-0.5, 1.5)), r"probabilities\[0\]"),
        (dict(noise_multiplier=1.0, sensitivities=(0.0, 1.0), probabilities=(1.0,)), "same length"),
        (dict(noise_multiplier=1.0, sensitivities=(), probabilities=()), "empty"),
        (dict(noise_multiplier=1.0, sensitivities="12", probabilities=(1.0,)), "sequence"),
        (dict(noise_multiplier=1.0, sensitivities=1.0, probabilities=(1.0,)), "sequence"),
    ],
)
def test_mixture_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MixtureOfGaussians(**kwargs)


def test_mixture_is_keyword_only_frozen_and_serialises():
    m = MixtureOfGaussians(noise_multiplier=1.5, sensitivities=[0, 1, 2], probabilities=[0.81, 0.18, 0.01])
    with pytest.raises(TypeError):
        MixtureOfGaussians(1.5, (1.0,), (1.0,))  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.noise_multiplier = 2.0  # type: ignore[misc]
    assert m.sensitivities == (0.0, 1.0, 2.0)
    d = json.loads(json.dumps(m.to_dict()))
    assert d["type"] == "mixture_of_gaussians"
    assert mechanism_from_dict(d) == m
    assert hash(mechanism_from_dict(d).privacy_losses()) == hash(m.privacy_losses())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise_multiplier=1.0, sampling_rate=0.01, group_size=0), "group_size"),
        (dict(noise_multiplier=1.0, sampling_rate=0.01, group_size=2.5), "group_size"),
        (dict(noise_multiplier=1.0, sampling_rate=0.0, group_size=2), "sampling_rate"),
        (dict(noise_multiplier=1.0, sampling_rate=1.5, group_size=2), "sampling_rate"),
        (dict(noise_multiplier=0.0, sampling_rate=0.5, group_size=2), "noise_multiplier"),
    ],
)
def test_group_poisson_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GroupPoissonSampled(**kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(noise_multiplier=1.0, batch_size=10, dataset_size=100, group_size=0), "group_size"),
        (dict(noise_multiplier=1.0, batch_size=200, dataset_size=100, group_size=2), "batch_size"),
        (dict(noise_multiplier=1.0, batch_size=10, dataset_size=100, group_size=101), "group_size"),
        (dict(noise_multiplier=1.0, batch_size=0, dataset_size=100, group_size=2), "batch_size"),
        (dict(noise_multiplier=1.0, batch_size=10, dataset_size=10.5, group_size=2), "dataset_size"),
    ],
)
def test_group_fixed_batch_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GroupFixedBatchSampled(**kwargs)


# ----------------------------------------------------------------------------- structure
def test_degenerate_mixtures():
    g = MixtureOfGaussians(noise_multiplier=2.0, sensitivities=(3.0,), probabilities=(1.0,))
    assert g.privacy_losses().remove == GaussianLoss(mu=1.5)
    z = MixtureOfGaussians(noise_multiplier=2.0, sensitivities=(0.0, 0.0), probabilities=(0.5, 0.5))
    assert z.privacy_losses().remove == DiscreteLoss(values=(0.0,), probs=(1.0,))
    # duplicates merge; the loss sees one component per distinct sensitivity
    m = MixtureOfGaussians(noise_multiplier=1.0, sensitivities=(1.0, 0.0, 1.0), probabilities=(0.25, 0.5, 0.25))
    c, w = m.support
    assert c.tolist() == [0.0, 1.0] and w.tolist() == [0.5, 0.5]
    rem, add = m.privacy_losses()
    assert isinstance(rem, MixtureRemoveLoss) and isinstance(add, MixtureAddLoss)
    assert min(add.p_means) >= max(add.q_means)  # reflected: non-decreasing loss


def test_probability_residue_goes_to_the_safe_side():
    short = MixtureOfGaussians(
        noise_multiplier=1.0, sensitivities=(0.0, 1.0, 2.0), probabilities=(0.5, 0.3, 0.2 - 5e-10)
    )
    rem, add = short.privacy_losses()
    # the deficit goes to the largest sensitivity (stochastically larger, Ganesh 2024 Lemma 2.9), not to +inf,
    # where it would be added to the lower bound's delta at every step too
    assert rem.infinity_mass == 0.0
    assert rem.p_weights[-1] >= 0.2 and math.fsum(rem.p_weights) >= 1.0
    assert math.fsum(add.q_weights) < 1.0  # Q short of the deficit: loss only larger
    over = MixtureOfGaussians(
        noise_multiplier=1.0, sensitivities=(0.0, 1.0, 2.0), probabilities=(0.5, 0.3, 0.2 + 5e-10)
    )
    _c, w = over.support
    assert w[0] == pytest.approx(0.5 - 5e-10, abs=1e-16) and w[2] == 0.2 + 5e-10  # taken from the smallest


def test_binomial_and_hypergeometric_sensitivities():
    c, p = binomial_sensitivity(9, 0.01)
    assert c.tolist() == list(range(10))
    np.testing.assert_allclose(p, stats.binom.pmf(np.arange(10), 9, 0.01), rtol=1e-12)
    c, p = binomial_sensitivity(3, 1.0)
    assert p.tolist() == [0.0, 0.0, 0.0, 1.0]
    # Ganesh 2024 Thm 3.3: 2 * Hypergeom(B, n + k, k); k = 1 puts the member in the batch w.p. B / (n + 1)
    c, p = hypergeometric_sensitivity(1, 500, 50_000)
    assert c.tolist() == [0.0, 2.0]
    assert p[1] == pytest.approx(500 / 50_001, rel=1e-12)
    c, p = hypergeometric_sensitivity(4, 3, 10)  # at most min(k, B) members drawn
    assert c.tolist() == [0.0, 2.0, 4.0, 6.0]
    brute = np.array([math.comb(4, m) * math.comb(10, 3 - m) / math.comb(14, 3) for m in range(4)])
    np.testing.assert_allclose(p, brute, rtol=1e-12)
    m = GroupFixedBatchSampled(noise_multiplier=1.0, batch_size=3, dataset_size=10, group_size=4).as_mixture()
    np.testing.assert_allclose(m.support[1], brute, rtol=1e-12)


def test_group_size_one_is_the_poisson_subsampled_gaussian():
    """Binom(1, q) MoG == Koskela et al. 2020 Sec. 6.1 closed form, both directions, CDF and survival function."""
    sigma, q = 1.3, 0.02
    rem, add = GroupPoissonSampled(noise_multiplier=sigma, sampling_rate=q, group_size=1).privacy_losses()
    ref_rem = poisson_gaussian_loss(sigma=sigma, q=q, direction="remove")
    ref_add = poisson_gaussian_loss(sigma=sigma, q=q, direction="add")
    s = np.linspace(-8, 8, 2001)
    for ours, ref in ((rem, ref_rem), (add, ref_add)):
        lo, hi = ref.support()
        inside = s[(s > lo) & (s < hi)]
        np.testing.assert_allclose(ours.inverse(inside), ref.inverse(inside), rtol=1e-11, atol=1e-11)
        c1, sf1, err = ours.cdf_sf(s)
        c2, sf2, _ = ref.cdf_sf(s)
        assert err < 1e-12
        np.testing.assert_allclose(c1, c2, rtol=1e-10, atol=1e-300)
        np.testing.assert_allclose(sf1, sf2, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("k, sigma, eps", [(2, 1.0, 0.5), (4, 2.0, 0.1), (9, 1.0, 1.0), (16, 0.7, 3.0)])
def test_one_step_delta_matches_mpmath(k, sigma, eps):
    c, p = binomial_sensitivity(k, 0.05)
    rem = MixtureOfGaussians(noise_multiplier=sigma, sensitivities=c, probabilities=p).privacy_losses().remove
    ours = one_step_delta(rem, eps)
    ref = float(mp_delta_remove(c.tolist(), p.tolist(), sigma, eps))
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-16)


# ----------------------------------------------------------------------------- numerics
@pytest.mark.parametrize("k, sigma", [(64, 0.5), (64, 1.0), (32, 0.5)])
@pytest.mark.parametrize("direction", [0, 1])
def test_large_groups_small_noise_do_not_overflow(k, sigma, direction):
    loss = GroupPoissonSampled(noise_multiplier=sigma, sampling_rate=0.01, group_size=k).privacy_losses()[direction]
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is harmless
        lx = loss.loss(np.array([-1e4, -50.0, 0.0, 50.0, 1e4]))
    assert np.all(np.isfinite(lx)) and np.all(np.diff(lx) >= 0)
    lo, hi = loss.support()
    s = np.linspace(-30, 400, 20001)
    c, sf, err = loss.cdf_sf(s)
    assert err < 1e-11  # the inverse is accurate to float precision in loss space
    assert np.all(np.isfinite(c)) and np.all(np.isfinite(sf))
    # certified weights are rounded up (sum 1 + a few units in the last place)
    assert np.all((c >= 0) & (c <= 1 + 1e-15)) and np.all((sf >= 0) & (sf <= 1 + 1e-15))
    assert np.all(np.diff(c) >= -1e-16) and np.all(np.diff(sf) <= 1e-16)
    np.testing.assert_allclose(c + sf, 1.0 - loss.infinity_mass, atol=1e-14)
    inside = s[(s > lo) & (s < hi)]
    x = loss.inverse(inside)
    assert np.all(np.isfinite(x)) and np.all(np.diff(x) > 0)
    pm, pm_err = loss.partial_mean(loss.lower_quantile(1e-15), loss.upper_quantile(1e-15))
    assert math.isfinite(pm) and pm_err < 1e-9


def test_fast_inverse_agrees_with_generic_mixture_loss():
    m = GroupPoissonSampled(noise_multiplier=0.8, sampling_rate=0.1, group_size=12).as_mixture()
    for loss in m.privacy_losses():
        generic = GaussianMixtureLoss(loss.p_means, loss.p_weights, loss.q_means, loss.q_weights, loss.sigma)
        s = np.linspace(-20, 60, 4001)
        c1, sf1, _ = loss.cdf_sf(s)
        c2, sf2, _ = generic.cdf_sf(s)
        np.testing.assert_allclose(c1, c2, rtol=1e-9, atol=1e-300)
        np.testing.assert_allclose(sf1, sf2, rtol=1e-9, atol=1e-300)
        x = np.linspace(-30, 30, 101)
        np.testing.assert_allclose(loss.loss(x), generic.loss(x), rtol=1e-12, atol=1e-12)


@settings(max_examples=scaled(60), deadline=None)
@given(
    sens=st.lists(st.floats(0.0, 20.0), min_size=2, max_size=8),
    raw=st.lists(st.floats(1e-6, 1.0), min_size=8, max_size=8),
    sigma=st.floats(0.4, 5.0),
    s=st.lists(st.floats(-50.0, 200.0), min_size=1, max_size=20),
)
def test_inverse_roundtrip_property(sens, raw, sigma, s):
    w = np.asarray(raw[: len(sens)])
    w = (w / w.sum()).tolist()
    w[-1] = 1.0 - math.fsum(w[:-1])
    if w[-1] < 0:
        return
    m = MixtureOfGaussians(noise_multiplier=sigma, sensitivities=sens, probabilities=w)
    for loss in m.privacy_losses():
        if not isinstance(loss, GaussianMixtureLoss):
            continue
        lo, hi = loss.support()
        s_in = np.array([v for v in s if lo + 1e-9 < v < hi - 1e-9])
        if s_in.size == 0:
            continue
        x = loss.inverse(s_in)
        assert np.all(np.isfinite(x))
        np.testing.assert_allclose(loss.loss(x), s_in, rtol=1e-11, atol=1e-11)


# ----------------------------------------------------------------------------- peers
@pytest.mark.peers
@pytest.mark.parametrize("k, sigma", [(2, 1.0), (8, 2.0), (16, 1.0)])
def test_one_step_delta_matches_dp_accounting(k, sigma):
    from dp_accounting.pld import privacy_loss_mechanism as plm

    c, p = binomial_sensitivity(k, 0.01)
    rem, add = MixtureOfGaussians(noise_multiplier=sigma, sensitivities=c, probabilities=p).privacy_losses()
    eps = np.array([0.0, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0])
    theirs = [
        np.asarray(
            plm.MixtureGaussianPrivacyLoss(sigma, c.tolist(), p.tolist(), adjacency_type=adj).get_delta_for_epsilon(eps)
        )
        for adj in (plm.AdjacencyType.ADD, plm.AdjacencyType.REMOVE)
    ]
    ours = [np.array([one_step_delta(loss, e) for e in eps]) for loss in (rem, add)]
    ours_max, theirs_max = np.maximum(*ours), np.maximum(*theirs)
    np.testing.assert_allclose(ours_max, theirs_max, rtol=1e-6, atol=1e-14)


@pytest.mark.parametrize("direction", [0, 1])
@pytest.mark.parametrize("mass", [1e-8, 1e-40, 1e-200])
def test_tail_quantiles_hold_down_to_tiny_masses(direction, mass):
    loss = GroupPoissonSampled(noise_multiplier=1.0, sampling_rate=0.01, group_size=8).privacy_losses()[direction]
    b, a = loss.upper_quantile(mass), loss.lower_quantile(mass)
    assert math.isfinite(b) and math.isfinite(a) and a < b
    assert float(loss.sf(np.array([b]))[0]) <= mass
    assert float(loss.cdf(np.array([a]))[0]) <= mass


def test_loss_at_infinity_is_its_limit():
    rem, add = GroupPoissonSampled(noise_multiplier=1.0, sampling_rate=0.1, group_size=3).privacy_losses()
    with np.errstate(all="raise"):
        r = rem.loss(np.array([-np.inf, np.inf]))
        d = add.loss(np.array([-np.inf, np.inf]))
    assert r[0] == pytest.approx(3 * math.log(0.9)) and r[1] == math.inf
    assert d[0] == -math.inf and d[1] == pytest.approx(-3 * math.log(0.9))


@settings(max_examples=scaled(40), deadline=None)
@given(k=st.integers(1, 20), q=st.floats(0.001, 0.5), sigma=st.floats(0.5, 4.0), eps=st.floats(0.0, 5.0))
def test_one_step_delta_grows_with_the_group(k, q, sigma, eps):
    """Binom(k + 1, q) stochastically dominates Binom(k, q), so by Ganesh 2024 Lemma 2.9 delta(eps) cannot shrink."""

    def delta(kk):
        rem, add = GroupPoissonSampled(noise_multiplier=sigma, sampling_rate=q, group_size=kk).privacy_losses()
        return max(one_step_delta(rem, eps), one_step_delta(add, eps))

    d0, d1 = delta(k), delta(k + 1)
    assert 0.0 <= d0 <= 1.0 and 0.0 <= d1 <= 1.0
    assert d1 >= d0 - 1e-12


def test_a_group_of_1000_at_rate_half_answers_in_a_grid_of_its_own_tails():
    """A fuzz corner: a group of 1000 at rate 1/2, noise 500 (1001 mixture components). The remove loss's lower end
    is log 2^-1000 = -693, and the grids spanned [-693, 7] at mesh 5e-3, each cell inverting a 1001-component
    mixture, after a loss-variance estimate over all 1001 components (6 s): over 100 s. The grids now stop at the
    tail points of the mass they may leave out, and the estimate skips components lighter than 1e-16 of the
    heaviest. Against mpmath (one step; the remove direction is the worse one here)."""
    from tightdp import ConnectDotsAccountant
    from tightdp.pld._cells import grid_ends

    mech = GroupPoissonSampled(noise_multiplier=500, sampling_rate=0.5, group_size=1000)
    remove = mech.privacy_losses().remove
    assert remove.support()[0] < -690.0 and grid_ends(remove, (1e-12, 1e-9))[0] > -50.0
    out = ConnectDotsAccountant().compose(mech).delta([0.0, 1.0, 100.0])
    with mp.workdps(50):
        comps = [(i, mp.binomial(1000, i) / mp.mpf(2) ** 1000) for i in range(1001)]
        for e, lo, up in zip([0.0, 1.0], out.lower, out.upper):
            truth = mixture_delta_mp(comps, [(0, 1)], 500.0, e)
            assert lo <= truth <= up and up - lo <= 1e-3 * up
    assert out.upper[2] <= 1e-280  # the truth is about exp(-78000)
