"""Lower ends come only from pairs attained by neighbouring data sets.

Every ``Mechanism`` subclass of the package declares ``pair_attained`` in its own class body (a new class
cannot skip it), and for each one the accountant's certified lower end is checked against an upper bound
computed here independently, sharing no code with the library: Renyi divergences of the mechanism's output
densities by mpmath quadrature or closed form (Mironov 2017, Prop. 3 for the conversion), exact enumeration
for discrete outputs, and the Gaussian's closed form.
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

import tightdp
from tightdp import ConnectDotsAccountant
from tightdp.integrations.dp_accounting import NonPrivate, PoissonSampledNonPrivate
from tightdp.mechanisms import (
    ApproximateDP,
    BoundedRange,
    DiscreteGaussian,
    DiscreteLaplace,
    DistributedDiscreteGaussian,
    ExponentialMechanism,
    Gaussian,
    GroupFixedBatchSampled,
    GroupPoissonSampled,
    Laplace,
    Mechanism,
    MixtureOfGaussians,
    PermuteAndFlip,
    PoissonSampled,
    PoissonSampledDiscrete,
    PureDP,
    RandomAllocation,
    RandomizedResponse,
    ReportNoisyMax,
    SampledWithoutReplacement,
    SampledWithReplacement,
    Skellam,
    SparseVector,
)
from tightdp.mechanisms._bounded_range_blocks import BoundedRangeBlock
from tightdp.mechanisms.selection import FinitePair
from tightdp.mechanisms.truncated import TruncatedPoissonSampled

DELTA = 1e-5
ORDERS = (2, 3, 4, 6, 8, 12, 16, 24, 32)


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _package_mechanisms():
    return sorted(
        {c for c in _all_subclasses(Mechanism) if c.__module__.startswith("tightdp.")}, key=lambda c: c.__name__
    )


# ----------------------------------------------------------------- independent references (mpmath only)
def _log_mixture(components, s):
    """log-density of sum w N(m, s^2) for ``components = [(w, m), ...]`` (floats, log space)."""
    comps = [(math.log(float(w)), float(m)) for w, m in components if float(w) > 0]
    s = float(s)
    norm = math.log(s * math.sqrt(2 * math.pi))

    def logpdf(x):
        terms = [lw - 0.5 * ((x - m) / s) ** 2 for lw, m in comps]
        top = max(terms)
        return top + math.log(math.fsum(math.exp(t - top) for t in terms)) - norm

    return logpdf


def _renyi(logp, logq, alpha, points):
    """D_alpha(P || Q) = log(int p^a q^(1-a)) / (a - 1) by scipy quadrature split at ``points`` (``inf``
    where the integrand overflows: that order then bounds nothing)."""

    def f(x):
        e = alpha * logp(x) + (1 - alpha) * logq(x)
        if e > 700:
            raise OverflowError
        return math.exp(e)

    pts = sorted({float(v) for v in points})
    edges = [-math.inf] + pts + [math.inf]
    try:
        val = sum(
            integrate.quad(f, a, b, epsabs=0, epsrel=1e-9, limit=200)[0] for a, b in itertools.pairwise(edges) if b > a
        )
    except OverflowError:
        return math.inf
    return math.log(val) / (alpha - 1)


def _rdp_epsilon(pairs, steps, delta):
    """min over orders of ``steps D_a + log(1/delta) / (a - 1)`` over both directions (Mironov 2017, Prop. 3),
    with a relative margin of 1e-6 for the quadrature."""
    best = math.inf
    for a in ORDERS:
        d = max(_renyi(p, q, a, pts) for p, q, pts in pairs)
        best = min(best, steps * d + math.log(1 / delta) / (a - 1))
    return best * (1 + 1e-6)


def _mixture_pairs(p_comp, q_comp, s):
    """Both directions of a pair of scalar Gaussian mixtures (P, Q) with noise ``s``."""
    p, q = _log_mixture(p_comp, s), _log_mixture(q_comp, s)
    pts = [float(m) for _, m in p_comp + q_comp]
    return [(p, q, pts), (q, p, pts)]


def _gauss_eps(mu, delta):
    """Exact epsilon of mu-GDP by bisection on the closed form."""
    mu = mp.mpf(mu)
    f = lambda e: mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2) - delta
    lo, hi = mp.mpf(0), mp.mpf(1)
    while f(hi) > 0:
        hi *= 2
    if f(lo) <= 0:
        return 0.0
    return float(mp.findroot(f, (lo, hi), solver="bisect", tol=1e-20))


def _discrete_eps(p, q, delta):
    """Exact epsilon of one discrete pair (lists of outcome probabilities; ``q = 0`` for P-only outcomes)."""
    d = lambda e: mp.fsum(max(pi - mp.exp(e) * qi, 0) for pi, qi in zip(p, q))
    lo, hi = mp.mpf(0), mp.mpf(60)
    if d(lo) <= delta:
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
    return float(hi)


def _binom(k, q):
    q = mp.mpf(q)
    return [mp.binomial(k, i) * q**i * (1 - q) ** (k - i) for i in range(k + 1)]


def _hypergeom(B, n, k):
    """P(m group records among B drawn from n + k records, k of them the group's)."""
    return [mp.binomial(k, m) * mp.binomial(n, B - m) / mp.binomial(n + k, B) for m in range(min(k, B) + 1)]


def _poisson_delta(rate, shift, sigma, eps, direction):
    """Exact delta(eps) of ``((1 - r) N(0) + r N(shift), N(0))`` (remove) or its reverse (add), sigma's noise."""
    r, sh, s, e = mp.mpf(rate), mp.mpf(shift), mp.mpf(sigma), mp.mpf(eps)
    if r == 0:
        return mp.mpf(0)
    sf = lambda z: mp.ncdf(-z)
    if direction == "remove":  # loss > eps  <=>  x > x*
        if mp.exp(e) <= 1 - r:
            return mp.mpf(1) - mp.exp(e)
        x = s**2 / sh * mp.log((mp.exp(e) - (1 - r)) / r) + sh / 2
        return (1 - r) * sf(x / s) + r * sf((x - sh) / s) - mp.exp(e) * sf(x / s)
    if mp.exp(-e) <= 1 - r:  # add: loss = -log(1 - r + r e^(...)) > eps  <=>  x < x**
        return mp.mpf(0)
    x = s**2 / sh * mp.log((mp.exp(-e) - (1 - r)) / r) + sh / 2
    return mp.ncdf(x / s) - mp.exp(e) * ((1 - r) * mp.ncdf(x / s) + r * mp.ncdf((x - sh) / s))


def revealed_delta(n, q, b, sigma, eps):
    """delta(eps) of one step of the revealed-S pair (``mechanisms.truncated``'s docstring): the flagged mixture
    over ``X ~ Bin(n - 1, q)`` of the Poisson pair at rate ``q`` and shift 1 (``X < b``) or at rate
    ``q b / (X + 1)`` and shift 2 (``X >= b``); the worse direction. Exact, in mpmath."""
    px = _binom(n - 1, q)
    out = mp.mpf(0)
    for direction in ("remove", "add"):
        d = mp.fsum(
            px[x]
            * (
                _poisson_delta(q, 1, sigma, eps, direction)
                if x < b
                else _poisson_delta(mp.mpf(q) * b / (x + 1), 2, sigma, eps, direction)
            )
            for x in range(n)
        )
        out = max(out, d)
    return out


def revealed_epsilon(n, q, b, sigma, delta):
    """epsilon(delta) of one step of the revealed-S pair, by bisection (rounded up)."""
    lo, hi = mp.mpf(0), mp.mpf(1)
    if revealed_delta(n, q, b, sigma, 0) <= delta:
        return 0.0
    while revealed_delta(n, q, b, sigma, hi) > delta:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if revealed_delta(n, q, b, sigma, mid) > delta else (lo, mid)
    return float(hi) * (1 + 1e-12)


def revealed_rdp_epsilon(n, q, b, sigma, steps, delta):
    """Renyi bound on ``steps`` steps of the revealed-S pair: per order, ``exp((a - 1) D_a)`` of a flagged
    mixture is the mixture of the components' (closed form at integer orders for the remove direction,
    quadrature for the add direction)."""
    px = _binom(n - 1, q)
    s = mp.mpf(sigma)

    def remove_moment(rate, shift, a):  # E_Q[(P/Q)^a], P = (1 - r) N(0) + r N(shift), Q = N(0)
        return mp.fsum(
            mp.binomial(a, j) * (1 - rate) ** (a - j) * rate**j * mp.exp(j * (j - 1) * mp.mpf(shift) ** 2 / (2 * s**2))
            for j in range(a + 1)
        )

    def add_moment(rate, shift, a):  # E_Q[(P/Q)^a] of the reverse pair, by quadrature
        lq = _log_mixture([(1 - rate, 0), (rate, shift)], s)
        lp = _log_mixture([(1, 0)], s)
        return mp.mpf(math.exp((a - 1) * _renyi(lp, lq, a, [0, float(shift)])))

    best = mp.inf
    for a in (2, 4, 8, 16, 32):
        worst = mp.mpf(0)
        for moment in (remove_moment, add_moment):
            tot = mp.fsum(
                px[x] * (moment(mp.mpf(q), 1, a) if x < b else moment(mp.mpf(q) * b / (x + 1), 2, a)) for x in range(n)
            )
            worst = max(worst, mp.log(tot) / (a - 1))
        best = min(best, steps * worst + mp.log(1 / mp.mpf(delta)) / (a - 1))
    return float(best) * (1 + 1e-6)


def _ref_truncated(m: TruncatedPoissonSampled, steps, delta):
    """The revealed-S upper bound, computed here from its definition (exact for one step, Renyi for more)."""
    if steps == 1:
        return revealed_epsilon(m.dataset_size, m.sampling_rate, m.max_batch_size, m.sigma, delta)
    return revealed_rdp_epsilon(m.dataset_size, m.sampling_rate, m.max_batch_size, m.sigma, steps, delta)


def _ref(mech, steps, delta):
    """An independent upper bound on epsilon of ``steps`` runs of ``mech``."""
    if isinstance(mech, Gaussian):
        return _gauss_eps(math.sqrt(steps) * mech.sensitivity / mech.noise_multiplier, delta)
    if isinstance(mech, Laplace):
        b, r = mech.scale, mech.sensitivity
        p = lambda x: -abs(x - r) / b - math.log(2 * b)
        q = lambda x: -abs(x) / b - math.log(2 * b)
        return _rdp_epsilon([(p, q, [0, r]), (q, p, [0, r])], steps, delta)
    if isinstance(mech, (RandomizedResponse, PureDP, ApproximateDP)) and steps == 1:
        if isinstance(mech, RandomizedResponse):
            k, t = mech.num_buckets, mp.mpf(mech.noise_parameter)
            p = [1 - t + t / k, t / k] + [t / k] * (k - 2)
            q = [t / k, 1 - t + t / k] + [t / k] * (k - 2)
        else:
            e = mp.mpf(mech.epsilon)
            d = mp.mpf(getattr(mech, "delta", 0))
            p = [(1 - d) * mp.exp(e) / (1 + mp.exp(e)), (1 - d) / (1 + mp.exp(e)), d]
            q = [(1 - d) / (1 + mp.exp(e)), (1 - d) * mp.exp(e) / (1 + mp.exp(e)), 0]
        return _discrete_eps(p, q, delta)
    if isinstance(mech, PoissonSampled) and isinstance(mech.mechanism, Laplace):
        lap, r = mech.mechanism, mech.sampling_rate
        b, c = lap.scale, lap.sensitivity
        q = lambda x: -abs(x) / b - math.log(2 * b)
        p = lambda x: float(np.logaddexp(math.log1p(-r) + q(x), math.log(r) - abs(x - c) / b - math.log(2 * b)))
        return _rdp_epsilon([(p, q, [0, c]), (q, p, [0, c])], steps, delta)
    if isinstance(mech, PoissonSampled):
        g, r = mech.mechanism, mp.mpf(mech.sampling_rate)
        s = mp.mpf(g.noise_multiplier) / g.sensitivity
        if mech.relation == "substitute":
            return _rdp_epsilon(_mixture_pairs([(1 - r, 0), (r, 1)], [(1 - r, 0), (r, -1)], s), steps, delta)
        return _rdp_epsilon(_mixture_pairs([(1 - r, 0), (r, 1)], [(1, 0)], s), steps, delta)
    if isinstance(mech, SampledWithoutReplacement):
        g, r = mech.mechanism, mp.mpf(mech.sample_size) / mech.dataset_size
        s = mp.mpf(g.noise_multiplier) / g.sensitivity
        return _rdp_epsilon(_mixture_pairs([(1 - r, 0), (r, 1)], [(1 - r, 0), (r, -1)], s), steps, delta)
    if isinstance(mech, SampledWithReplacement):
        g = mech.mechanism
        s = mp.mpf(g.noise_multiplier) / g.sensitivity
        w = _binom(mech.sample_size, mp.mpf(1) / mech.dataset_size)
        return _rdp_epsilon(
            _mixture_pairs([(wi, i) for i, wi in enumerate(w)], [(wi, -i) for i, wi in enumerate(w)], s), steps, delta
        )
    if isinstance(mech, MixtureOfGaussians):
        comps = [(mp.mpf(p), mp.mpf(c)) for c, p in zip(mech.sensitivities, mech.probabilities)]
        return _rdp_epsilon(_mixture_pairs(comps, [(1, 0)], mp.mpf(mech.noise_multiplier)), steps, delta)
    if isinstance(mech, GroupPoissonSampled):
        w = _binom(mech.group_size, mech.sampling_rate)
        return _rdp_epsilon(
            _mixture_pairs([(wi, i) for i, wi in enumerate(w)], [(1, 0)], mp.mpf(mech.noise_multiplier)), steps, delta
        )
    if isinstance(mech, GroupFixedBatchSampled):
        w = _hypergeom(mech.batch_size, mech.dataset_size, mech.group_size)
        return _rdp_epsilon(
            _mixture_pairs([(wi, 2 * i) for i, wi in enumerate(w)], [(1, 0)], mp.mpf(mech.noise_multiplier)),
            steps,
            delta,
        )
    if isinstance(mech, RandomAllocation):
        # no amplification: each epoch is num_selected Gaussian steps of the record (joint convexity)
        return _gauss_eps(math.sqrt(steps * mech.num_selected) / mech.sigma, delta)
    if isinstance(mech, TruncatedPoissonSampled):
        return _ref_truncated(mech, steps, delta)
    if isinstance(
        mech, (DiscreteGaussian, DiscreteLaplace, Skellam, DistributedDiscreteGaussian, PoissonSampledDiscrete)
    ):
        return _integer_eps(mech, steps, delta)
    if isinstance(mech, (ExponentialMechanism, PermuteAndFlip, ReportNoisyMax, SparseVector)):
        # each is epsilon-DP (bounded range implies pure DP; Durfee & Rogers 2019), so ``steps`` runs are
        # (steps * epsilon, 0)-DP: an upper bound on epsilon at every delta
        return steps * mech.epsilon
    if isinstance(mech, FinitePair) and steps == 1:
        p = [mp.mpf(x) for x in mech.probs]
        return _discrete_eps(p, [pi * mp.exp(-mp.mpf(v)) for pi, v in zip(p, mech.values)], delta)
    raise AssertionError(f"no reference for {type(mech).__name__}")


def _integer_law(mech) -> np.ndarray:
    """The noise law on the integers ``-R..R`` (index ``i`` is the value ``i - R``), from its definition:
    discrete Gaussian ``exp(-x^2 / (2 sigma^2))``, discrete Laplace ``exp(-t |x|)``, Skellam
    ``e^(-2 mu) I_|x|(2 mu)`` (mpmath), a sum of ``clients`` discrete Gaussians by direct convolution."""
    if isinstance(mech, DiscreteLaplace):
        r = int(math.ceil(760 / mech.noise_parameter)) + mech.sensitivity
        x = np.arange(-r, r + 1)
        w = np.exp(-mech.noise_parameter * np.abs(x))
    elif isinstance(mech, Skellam):
        r = int(mech.mu + 40 * math.sqrt(2 * mech.mu) + 40) + mech.sensitivity
        w = np.array(
            [float(mp.exp(-2 * mp.mpf(mech.mu)) * mp.besseli(abs(k), 2 * mp.mpf(mech.mu))) for k in range(-r, r + 1)]
        )
    else:
        r0 = int(40 * mech.sigma) + 10
        x = np.arange(-r0, r0 + 1)
        w = np.exp(-(x.astype(float) ** 2) / (2 * mech.sigma**2))
        w /= w.sum()
        out = w
        for _ in range(getattr(mech, "clients", 1) - 1):
            out = np.convolve(out, w)
        w = out
    return w / w.sum()


def _integer_eps(mech, steps, delta):
    """Exact epsilon of ``steps`` releases of a discrete-noise mechanism (sampled or not), both directions,
    by enumerating the product laws of the two neighbouring outputs."""
    base = mech.mechanism if isinstance(mech, PoissonSampledDiscrete) else mech
    q_rate = mech.sampling_rate if isinstance(mech, PoissonSampledDiscrete) else 1.0
    law = _integer_law(base)
    shift = base.sensitivity
    q = np.concatenate([law, np.zeros(shift)])
    p = (1 - q_rate) * q + q_rate * np.concatenate([np.zeros(shift), law])
    p, q = p / p.sum(), q / q.sum()
    P, Q = p, q
    for _ in range(steps - 1):
        P, Q = np.outer(P, p).ravel(), np.outer(Q, q).ravel()

    def eps(a, b):
        d = lambda e: float(np.sum(np.maximum(a - math.exp(e) * b, 0.0)))
        lo, hi = 0.0, 60.0
        if d(lo) <= delta:
            return 0.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if d(mid) > delta else (lo, mid)
        return hi

    return max(eps(P, Q), eps(Q, P))


G = Gaussian(noise_multiplier=1.0)
CASES = {
    "Gaussian": [(Gaussian(noise_multiplier=0.8, sensitivity=1.5), 3)],
    "Laplace": [(Laplace(scale=2.0), 2)],
    "RandomizedResponse": [(RandomizedResponse(noise_parameter=0.3, num_buckets=4), 1)],
    "PureDP": [(PureDP(epsilon=0.7), 1)],
    "ApproximateDP": [(ApproximateDP(epsilon=0.5, delta=1e-6), 1)],
    "PoissonSampled": [
        (PoissonSampled(mechanism=G, sampling_rate=0.1), 10),
        (PoissonSampled(mechanism=G, sampling_rate=0.1, relation="substitute"), 5),
        (PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.2), 4),
    ],
    "SampledWithoutReplacement": [(SampledWithoutReplacement(mechanism=G, sample_size=10, dataset_size=100), 5)],
    "SampledWithReplacement": [(SampledWithReplacement(mechanism=G, sample_size=10, dataset_size=100), 5)],
    "MixtureOfGaussians": [
        (MixtureOfGaussians(noise_multiplier=1.0, sensitivities=(0.0, 1.0, 2.0), probabilities=(0.7, 0.2, 0.1)), 3)
    ],
    "GroupPoissonSampled": [(GroupPoissonSampled(noise_multiplier=1.5, sampling_rate=0.1, group_size=3), 5)],
    "GroupFixedBatchSampled": [
        (GroupFixedBatchSampled(noise_multiplier=2.0, batch_size=10, dataset_size=100, group_size=2), 5)
    ],
    "RandomAllocation": [
        (RandomAllocation(mechanism=G, steps_per_epoch=4), 2),
        (RandomAllocation(mechanism=G, steps_per_epoch=3, num_selected=3), 2),
    ],
    "TruncatedPoissonSampled": [
        (TruncatedPoissonSampled(mechanism=G, sampling_rate=0.2, dataset_size=50, max_batch_size=10), 1),
        (
            TruncatedPoissonSampled(
                mechanism=Gaussian(noise_multiplier=1.5), sampling_rate=0.3, dataset_size=30, max_batch_size=4
            ),
            1,
        ),
        (
            TruncatedPoissonSampled(
                mechanism=Gaussian(noise_multiplier=1.5), sampling_rate=0.3, dataset_size=30, max_batch_size=4
            ),
            4,
        ),
    ],
    "DiscreteGaussian": [(DiscreteGaussian(sigma=1.3, sensitivity=2), 2)],
    "DiscreteLaplace": [(DiscreteLaplace(noise_parameter=0.8, sensitivity=1), 2)],
    "Skellam": [(Skellam(mu=3.0, sensitivity=1), 1)],
    "DistributedDiscreteGaussian": [(DistributedDiscreteGaussian(sigma=1.0, clients=3, sensitivity=1), 1)],
    "PoissonSampledDiscrete": [
        (PoissonSampledDiscrete(mechanism=DiscreteGaussian(sigma=1.0), sampling_rate=0.3), 2),
        (PoissonSampledDiscrete(mechanism=DiscreteLaplace(noise_parameter=1.0), sampling_rate=0.2), 1),
    ],
    "ExponentialMechanism": [(ExponentialMechanism(epsilon=1.0, num_candidates=10), 3)],
    "PermuteAndFlip": [(PermuteAndFlip(epsilon=0.7), 2)],
    "ReportNoisyMax": [
        (ReportNoisyMax(epsilon=0.9, noise="laplace"), 2),
        (ReportNoisyMax(epsilon=0.9, noise="gumbel"), 1),
    ],
    "FinitePair": [(ExponentialMechanism(epsilon=1.5).attained_pairs()[1], 1)],
    # no attained pair is known: the lower end is 0 (checked in test_no_attained_pair_means_lower_zero)
    "BoundedRange": [],
    "BoundedRangeBlock": [],
    "SparseVector": [(SparseVector(epsilon=1.0, cutoff=2, threshold_epsilon=0.4), 2)],
    # a release without privacy: the lower end is the truth itself (checked in test_non_private)
    "NonPrivate": [],
    "PoissonSampledNonPrivate": [],
}


def test_every_mechanism_declares_its_pair():
    classes = _package_mechanisms()
    assert len(classes) >= 15
    for cls in classes:
        assert "pair_attained" in cls.__dict__, f"{cls.__name__} does not declare pair_attained"
        assert isinstance(cls.pair_attained, bool), cls.__name__
        if not cls.pair_attained:
            assert "attained_mechanism" in cls.__dict__, f"{cls.__name__}: an unattained pair names its lower end"
        assert cls.__name__ in CASES, f"{cls.__name__} has no independent check in this file"
        assert "attained" in (cls.__doc__ or "").lower(), f"{cls.__name__}'s docstring does not say which pair"


#: the cases that take a few seconds each (exact enumeration of the discrete Laplace, truncated Poisson sums)
_SLOW_CASES = ("DiscreteLaplace", "TruncatedPoissonSampled")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(k, marks=pytest.mark.slow) if k in _SLOW_CASES else k
        for k in sorted(k for k, v in CASES.items() if v)
    ],
)
def test_lower_end_below_independent_upper_bound(name):
    mp.mp.dps = 20
    for mech, steps in CASES[name]:
        low = mech.attained_mechanism()
        assert low is not None
        assert low.attained_mechanism() is low  # one level: the attained pair's lower end is its own
        got = ConnectDotsAccountant().compose(mech, steps).epsilon(DELTA)
        ref = _ref(mech, steps, DELTA)
        assert 0.0 <= got.lower <= got.estimate <= got.upper
        assert got.lower <= ref * (1 + 1e-9), (mech, got, ref)


@pytest.mark.parametrize(
    "mech",
    [BoundedRange(epsilon=1.0), SparseVector(epsilon=1.0, cutoff=2), BoundedRangeBlock(epsilon=0.5, steps=2)],
)
def test_no_attained_pair_means_lower_zero(mech):
    assert mech.attained_mechanism() is None
    got = ConnectDotsAccountant().compose(mech, 2).epsilon(DELTA)
    steps = getattr(mech, "steps", 1)  # a block of steps epsilon-BR mechanisms is (steps epsilon)-DP
    assert got.lower == 0.0 and 0.0 < got.upper <= 2.0 * steps * mech.epsilon * (1 + 1e-9)


def test_non_private():
    sampled = ConnectDotsAccountant().compose(PoissonSampledNonPrivate(sampling_rate=0.01), 3)
    b = sampled.delta(1.0)
    truth = 1 - 0.99**3
    assert b.lower <= truth * (1 + 1e-12) and truth <= b.upper * (1 + 1e-12)
    assert NonPrivate().attained_mechanism() is not None


def test_unattained_pair_lower_end_is_not_the_pairs():
    """The truncated-Poisson counterexample: Ganesh's pair's own lower end (7.106) exceeds a valid upper bound
    on the mechanism (the revealed-S pair's exact epsilon, 6.957, computed here in mpmath)."""
    mp.mp.dps = 20
    mech = TruncatedPoissonSampled(
        mechanism=G, sampling_rate=0.2, dataset_size=50, max_batch_size=10, upper_pair="ganesh"
    )
    b = ConnectDotsAccountant().compose(mech, 1).epsilon(1e-5)
    truth_above = revealed_epsilon(50, 0.2, 10, 1.0, 1e-5)
    assert 6.95 < truth_above < 6.96
    assert b.details["dominating_pair_lower"] > 7.0 > truth_above
    assert b.lower <= truth_above
    # the default upper pair is the revealed-S one: its certified upper end holds the mpmath value
    r = (
        ConnectDotsAccountant()
        .compose(TruncatedPoissonSampled(mechanism=G, sampling_rate=0.2, dataset_size=50, max_batch_size=10), 1)
        .epsilon(1e-5)
    )
    assert truth_above <= r.upper <= truth_above * (1 + 2e-3) and r.lower == b.lower
    kept = (
        ConnectDotsAccountant()
        .compose(PoissonSampled(mechanism=G, sampling_rate=mech.kept_probability()), 1)
        .epsilon(1e-5)
    )
    assert b.lower == min(kept.lower, b.upper)


def test_unknown_mechanism_has_no_lower_end():
    """A subclass that declares nothing gets no certified lower end (0), whatever its pair's curve says."""
    from dataclasses import dataclass

    @dataclass(frozen=True, kw_only=True)
    class Undeclared(Mechanism):
        def privacy_losses(self):
            return G.privacy_losses()

    b = ConnectDotsAccountant().compose(Undeclared(), 2).epsilon(1e-5)
    assert b.lower == 0.0 and b.upper > 1.0 and "no pair attained" in b.details["lower"]
    d = ConnectDotsAccountant().compose(Undeclared(), 2).delta([0.5, 1.0])
    assert list(d.lower) == [0.0, 0.0]


def test_tradeoff_upper_curve_from_attained_pair():
    """The trade-off curve's upper end (from delta's lower end) must lie above the attained pair's lower curve."""
    mech = TruncatedPoissonSampled(mechanism=G, sampling_rate=0.2, dataset_size=50, max_batch_size=10)
    curve = tightdp.tradeoff_curve(ConnectDotsAccountant().compose(mech, 1))
    kept = PoissonSampled(mechanism=G, sampling_rate=mech.kept_probability())
    lower_of_truth = tightdp.tradeoff_curve(ConnectDotsAccountant().compose(kept, 1))
    assert (curve.beta_upper >= curve.beta_lower - 1e-12).all()
    lo_k, _ = lower_of_truth.at(curve.alpha)
    # f_mech <= f_kept (the kept pair is attained), and beta_upper is built from the attained lower deltas,
    # so it lies on or above kept's certified lower curve, never below it as Ganesh's pair's did
    assert (curve.beta_upper >= lo_k - 1e-9).all()


@settings(max_examples=scaled(10), deadline=None)
@given(
    n=st.integers(2, 30),
    q=st.floats(0.01, 0.6),
    frac=st.floats(0.0, 1.0),
    sigma=st.floats(0.6, 3.0),
    log_delta=st.floats(-10.0, -3.0),
)
def test_truncated_lower_and_revealed_upper_against_mpmath(n, q, frac, sigma, log_delta):
    """One step at random (n, q, b, sigma, delta): the accountant's lower end (attained pair) is at most, and its
    upper end (the revealed-S pair, certified by dominance) at least, the revealed-S pair's exact epsilon computed
    here in mpmath; and ``truncated_poisson_epsilon`` is no worse than that."""
    mp.mp.dps = 20
    b = max(1, min(n, int(round(frac * n))))
    delta = 10.0**log_delta
    mech = TruncatedPoissonSampled(
        mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q, dataset_size=n, max_batch_size=b
    )
    got = ConnectDotsAccountant().compose(mech, 1).epsilon(delta)
    ref = revealed_epsilon(n, q, b, sigma, delta)
    assert got.lower <= ref * (1 + 1e-9) + 1e-12
    assert ref <= got.upper * (1 + 1e-9) + 1e-12
    assert 0.0 <= got.lower <= got.estimate <= got.upper


@settings(max_examples=scaled(12), deadline=None)
@given(
    n=st.integers(2, 30),
    q=st.floats(0.02, 0.5),
    frac=st.floats(0.0, 1.0),
    sigma=st.floats(0.8, 3.0),
    steps=st.integers(2, 20),
    log_delta=st.floats(-10.0, -3.0),
)
def test_truncated_lower_below_revealed_renyi_bound(n, q, frac, sigma, steps, log_delta):
    """Several steps: the lower end is at most the Renyi bound of the revealed-S pair, computed here."""
    mp.mp.dps = 20
    b = max(1, min(n, int(round(frac * n))))
    delta = 10.0**log_delta
    mech = TruncatedPoissonSampled(
        mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q, dataset_size=n, max_batch_size=b
    )
    got = ConnectDotsAccountant().compose(mech, steps).epsilon(delta)
    assert got.lower <= revealed_rdp_epsilon(n, q, b, sigma, steps, delta)


def test_kept_probability_against_mpmath_and_fast_at_huge_n():
    import time

    mp.mp.dps = 30
    for n, q, b in [(50, 0.2, 10), (7, 0.9, 3), (200, 0.05, 4), (33, 0.5, 33)]:
        ref = mp.mpf(q) * mp.fsum(p * min(1, mp.mpf(b) / (1 + k)) for k, p in enumerate(_binom(n - 1, q)))
        got = TruncatedPoissonSampled(mechanism=G, sampling_rate=q, dataset_size=n, max_batch_size=b).kept_probability()
        assert ref * (1 - 1e-8) <= got <= ref
    t0 = time.perf_counter()
    for n in (10**9, 10**12):
        m = TruncatedPoissonSampled(mechanism=G, sampling_rate=0.01, dataset_size=n, max_batch_size=15)
        assert 0 < m.kept_probability() <= 15 / n
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.peers
def test_truncated_event_import_has_an_attained_lower_end():
    """The dp_accounting route: the imported event's lower end is the attained pair's, below the mpmath value."""
    dp_accounting = pytest.importorskip("dp_accounting")
    mp.mp.dps = 20
    ev = dp_accounting.TruncatedSubsampledGaussianDpEvent(
        dataset_size=50, sampling_probability=0.2, truncated_batch_size=10, noise_multiplier=1.0
    )
    b = ConnectDotsAccountant().compose(tightdp.from_dp_event(ev)).epsilon(1e-5)
    truth_above = revealed_epsilon(50, 0.2, 10, 1.0, 1e-5)
    assert 0.0 < b.lower <= truth_above <= b.upper * (1 + 1e-9)
    assert "attained" in b.details["lower"]


def test_truncated_poisson_huge_dataset_answers_quickly():
    """Data sets up to 1e12 records: no array over the binomial's support, an answer in well under a second's
    work per pair (the historical failure: a MemoryError of 7.4 GiB at 1e9)."""
    import time

    from tightdp.schemes import truncated_poisson_epsilon

    t0 = time.perf_counter()
    for n in (10**9, 10**12):
        r = truncated_poisson_epsilon(
            noise_multiplier=1.0, sampling_rate=0.01, steps=100, delta=1e-5, dataset_size=n, max_batch_size=15
        )
        assert 0.0 <= r.lower <= r.upper < 1e-3 and "gap" in r.details
    assert time.perf_counter() - t0 < 20.0  # measured 0.1-0.5 s each under load


def _minus_one_pair_delta(n, q, b, sigma, eps):
    """Exact delta(eps) of one step on the concrete pair "every other gradient -1, the target's +1" (one
    dimension), both directions, by quadrature of the two Gaussian mixtures (a truth the upper pair must hold)."""
    px = [float(v) for v in _binom(n - 1, q)]
    p_comp, q_comp = [], []
    for x, w in enumerate(px):
        if x < b:
            p_comp += [(w * (1 - q), -x), (w * q, -x + 1)]
            q_comp.append((w, -x))
        else:
            r = q * b / (x + 1)
            p_comp += [(w * (1 - r), -b), (w * r, -b + 2)]
            q_comp.append((w, -b))
    merge = lambda comps: [(sum(w for w, m in comps if m == mm), mm) for mm in sorted({m for _, m in comps})]
    p_comp, q_comp = merge(p_comp), merge(q_comp)
    lp, lq = _log_mixture(p_comp, sigma), _log_mixture(q_comp, sigma)
    pts = sorted({float(m) for _, m in p_comp + q_comp})
    edges = [-math.inf] + pts + [math.inf]
    out = 0.0
    for a_, b_ in ((lp, lq), (lq, lp)):
        f = lambda x: max(math.exp(a_(x)) - math.exp(eps + b_(x)), 0.0)
        out = max(
            out,
            sum(
                integrate.quad(f, u, v, epsabs=1e-14, epsrel=1e-10, limit=200)[0] for u, v in itertools.pairwise(edges)
            ),
        )
    return out


@pytest.mark.parametrize("n,q,b,sigma", [(12, 0.3, 3, 1.0), (20, 0.5, 4, 0.8), (8, 0.9, 2, 1.5), (30, 0.2, 10, 0.7)])
def test_revealed_pair_holds_a_concrete_pair_exactly_enumerated(n, q, b, sigma):
    """The revealed-S bound is an upper bound: at every epsilon its delta is at least the exact delta of a
    concrete pair of neighbouring data sets (enumerated over the number of other sampled records)."""
    mp.mp.dps = 20
    for eps in (0.0, 0.25, 0.5, 1.0, 2.0):
        truth = _minus_one_pair_delta(n, q, b, sigma, eps)
        assert truth <= float(revealed_delta(n, q, b, sigma, eps)) * (1 + 1e-7) + 1e-12, (eps, truth)
