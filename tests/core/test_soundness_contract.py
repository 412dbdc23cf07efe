"""The contract every accountant signs, checked against truth and with bad input.

* Every answer is ``lower <= estimate <= upper``, never NaN, never negative,
  and an infinite end carries a note (``Bounds`` docstring).
* ``lower <= truth <= upper`` against closed forms: a composition of Gaussian
  mechanisms is exactly ``mu``-GDP (Dong, Roth, Su 2022, Cor. 3.3), evaluated
  here with mpmath at 60 digits; Poisson-subsampled Gaussians against
  dp-accounting's pessimistic (connect-the-dots) and optimistic estimates.
* Every public entry refuses bad input (non-numbers, bools, strings, NaN,
  overflowing magnitudes, subnormal deltas) with a ``ValueError`` naming the
  argument, or a ``TightDPError`` saying why it cannot answer; never another
  exception type. The CLI prints one line and exits 2.

``HYPOTHESIS_PROFILE=explore`` draws ten times as many hypothesis examples, fresh ones.
"""

from __future__ import annotations

import logging
import math

import mpmath
import numpy as np
import pytest
from _support import gdp_delta_mp, scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tightdp
from tightdp import Bounds, Gaussian, PoissonSampled
from tightdp.accountants import ACCOUNTANTS, create
from tightdp.errors import TightDPError

SETTINGS = settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
CERTIFIED = ("connect-dots", "prv", "gdp")  # accountants whose Gaussian answers are bounds


def gdp_epsilon_mp(delta: float, mu: float) -> float:
    """Exact epsilon of mu-GDP at delta: 80-digit mpmath curve, bisection to 1e-22 relative (0 when
    delta(0) <= delta). Independent of tightdp's float error model."""
    mpmath.mp.dps = 80
    m, target = mpmath.mpf(mu), mpmath.mpf(delta)
    curve = lambda e: mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
    if curve(mpmath.mpf(0)) <= target:
        return 0.0
    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    while curve(hi) > target:
        lo, hi = hi, 2 * hi
    while hi - lo > mpmath.mpf(10) ** -22 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if curve(mid) > target else (lo, mid)
    return float((lo + hi) / 2)


def _check_shape(b: Bounds) -> None:
    """The ``Bounds`` contract: ordered, no NaN, no negative value, no silent infinity."""
    ends = [np.atleast_1d(np.asarray(v, float)) for v in (b.lower, b.estimate, b.upper) if v is not None]
    for v in ends:
        assert not np.isnan(v).any(), b
        assert (v >= 0).all(), b
    if b.lower is not None and b.upper is not None:
        assert np.all(np.asarray(b.lower) <= np.asarray(b.upper)), b
        assert np.all(np.asarray(b.lower) <= np.asarray(b.estimate) + 1e-15), b
        assert np.all(np.asarray(b.estimate) <= np.asarray(b.upper) + 1e-15), b
    if any(np.isinf(v).any() for v in ends):
        assert b.details.get("note"), f"infinite answer without a note: {b}"
    if b.quantity == "delta":
        assert all((v <= 1.0).all() for v in ends)


# ------------------------------------------------------------------ closed forms: Gaussian compositions


@SETTINGS
@given(
    sigma=st.floats(0.02, 50.0), k=st.integers(1, 10**6), delta=st.floats(1e-20, 0.5), name=st.sampled_from(CERTIFIED)
)
def test_gaussian_epsilon_contains_the_exact_value(sigma, k, delta, name):
    mu = math.sqrt(k) / sigma
    if name == "prv" and (mu > 30 or k > 10**4):
        k, mu = 10, math.sqrt(10) / sigma  # PRV has no closed-form path: keep its grid small
        if mu > 30:
            return
    b = create(name).compose(Gaussian(noise_multiplier=sigma), k).epsilon(delta)
    _check_shape(b)
    exact = gdp_epsilon_mp(delta, mu)
    # the reference is good to 1e-22 relative
    assert b.lower <= exact <= b.upper, (b, exact)


@SETTINGS
@given(mu=st.floats(1e-3, 200.0), eps=st.floats(0.0, 2e4))
def test_gaussian_delta_contains_the_exact_value(mu, eps):
    b = tightdp.ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0 / mu)).delta(eps)
    _check_shape(b)
    exact = gdp_delta_mp(eps, mu)
    assert b.lower <= exact <= b.upper or math.isclose(exact, b.upper, rel_tol=1e-12), (b, exact)


def test_huge_mu_single_step_is_answered_exactly():
    """Sigma 0.02, q 1, one step crashed in saddle_tilt; it is 50-GDP."""
    b = tightdp.dpsgd_epsilon(noise_multiplier=0.02, sampling_rate=1.0, steps=1, delta=1e-10)
    exact = gdp_epsilon_mp(1e-10, 50.0)
    assert b.lower <= exact <= b.upper and b.upper - b.lower < 1e-9 * exact
    b = tightdp.dpsgd_epsilon(noise_multiplier=0.01, sampling_rate=1.0, steps=4, delta=1e-20)
    assert b.lower <= gdp_epsilon_mp(1e-20, 200.0) <= b.upper


def test_long_full_batch_run_is_closed_form_and_fast():
    """Sigma 0.6865, q 1, 553 776 steps took 61 s with a 0.27-wide interval."""
    b = tightdp.dpsgd_epsilon(noise_multiplier=0.6865, sampling_rate=1.0, steps=553776, delta=3.1e-3)
    assert "closed form" in b.details["method"]
    assert b.upper - b.lower < 1e-6 * b.upper
    assert b.lower <= gdp_epsilon_mp(3.1e-3, math.sqrt(553776) / 0.6865) <= b.upper


def test_mixed_ledger_folds_the_gaussians():
    """Plain Gaussians in a mixed ledger fold into one exact Gaussian step."""
    acc = tightdp.ConnectDotsAccountant()
    acc.compose(Gaussian(noise_multiplier=4.0), 50)
    acc.compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01), 500)
    folded = [loss for loss, _ in acc._directions()[0] if type(loss).__name__ == "GaussianLoss"]
    assert len(folded) == 1 and folded[0].mu == pytest.approx(math.sqrt(50) / 4.0)
    b = acc.epsilon(1e-6)
    prv = tightdp.PRVAccountant().compose(acc.ledger).epsilon(1e-6)
    assert b.lower <= prv.upper and prv.lower <= b.upper


def test_subsampled_step_beyond_double_range_refuses_with_a_bound():
    """A subsampled step with loss beyond e^700 cannot be discretised: a clear refusal that names a
    certified upper bound (the unsubsampled Gaussian), not a scipy NaN error."""
    with pytest.raises(tightdp.PrecisionError, match="certified upper bound without subsampling"):
        tightdp.dpsgd_epsilon(noise_multiplier=0.02, sampling_rate=0.5, steps=1, delta=1e-10)


def test_gdp_delta_at_huge_epsilon_is_not_nan():
    """Delta(1e308) was NaN labelled a bound; 1e308 is now refused, 1e12 answered."""
    acc = tightdp.GDPAccountant().compose(Gaussian(noise_multiplier=2.0), 100)
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(1e308)
    b = acc.delta(1e12)
    _check_shape(b)
    assert b.lower == 0.0 and 0.0 < b.upper <= 1e-300


# ------------------------------------------------------------------ subsampled: against dp-accounting


def _dpa_bracket(sigma, q, k, delta):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    logging.getLogger().setLevel(logging.ERROR)
    out = []
    for pessimistic in (False, True):
        p = pld.from_gaussian_mechanism(
            standard_deviation=sigma,
            sampling_prob=q,
            pessimistic_estimate=pessimistic,
            value_discretization_interval=1e-3,
            use_connect_dots=pessimistic,
        )
        out.append(float(p.self_compose(k).get_epsilon_for_delta(delta)))
    return out


@pytest.mark.peers
@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.floats(0.5, 8.0),
    q=st.floats(1e-3, 1.0),
    k=st.integers(1, 1000),
    delta=st.sampled_from([1e-3, 1e-6, 1e-9, 1e-12]),
)
def test_subsampled_interval_meets_dp_accounting(sigma, q, k, delta):
    b = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k, delta=delta)
    _check_shape(b)
    # dp-accounting's truncation makes its pessimistic value unreliable at large epsilon (sigma 1,
    # q 0.25, k 2245, delta 1e-12: 196.93, below the truth, which PRV [196.981, 197.001] and an
    # mpmath saddle-point tail (delta(196.98) = 1.005e-12) put near 196.99): compare up to 50
    assume(b.upper <= 50.0)
    opt, pess = _dpa_bracket(sigma, q, k, delta)
    # dp-accounting's optimistic value is below the truth, its pessimistic one above (up to its
    # mass truncation): the certified interval must meet [optimistic, pessimistic]
    assert b.lower <= pess + 1e-3 and opt - 1e-3 <= b.upper, (b, opt, pess)


# ------------------------------------------------------------------ delta(eps): relative and fast


@pytest.mark.parametrize("sigma,q,k,delta", [(1.0, 0.01, 1000, 1e-12), (2.0, 0.1, 1, 1e-20), (1.0, 0.5, 4, 1e-15)])
def test_delta_of_epsilon_is_relative_at_tiny_delta(sigma, q, k, delta):
    """Delta(eps) at tiny deltas came back as [0, 4e-10] after seconds of refinement."""
    acc = tightdp.ConnectDotsAccountant().compose(tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q), k)
    e = acc.epsilon(delta)
    d = acc.delta(e.upper)
    _check_shape(d)
    assert d.lower <= delta and d.upper <= delta * 1.05  # consistent with the certified epsilon
    assert d.lower > 0.5 * delta * math.exp(-(e.upper - e.lower) * 50)  # informative, not [0, x]
    assert d.upper - d.lower <= 0.1 * d.upper


# ------------------------------------------------------------------ bad input: one clear error

BAD_NUMBERS = [1e308, 10**400, -1.0, float("nan"), float("inf"), True, "1", None, [1.0], {"a": 1}]


def _refuses(call):
    try:
        out = call()
    except (ValueError, TightDPError):
        return
    if isinstance(out, Bounds):
        _check_shape(out)


@pytest.mark.parametrize(
    "arg", ["noise_multiplier", "sampling_rate", "steps", "delta", "eps_error", "rel_error", "accountant"]
)
@pytest.mark.parametrize("value", BAD_NUMBERS + [1e-320, 0.0])
def test_dpsgd_epsilon_bad_input(arg, value):
    if value is None and arg in ("eps_error", "rel_error"):
        return  # None is the default accuracy
    kw = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=100, delta=1e-5)
    with pytest.raises(ValueError) as info:
        tightdp.dpsgd_epsilon(**{**kw, arg: value})
    assert arg in str(info.value)


@pytest.mark.parametrize("name", sorted(ACCOUNTANTS))
@pytest.mark.parametrize("value", BAD_NUMBERS + [1e-320, 5e-324])
def test_every_accountant_refuses_bad_queries(name, value):
    acc = create(name).compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), 10)
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(value)
    if value in (1e-320, 5e-324) or isinstance(value, list):
        _refuses(lambda: acc.delta(value))  # a tiny epsilon, or a list of them, is a valid query
        if isinstance(value, list):
            with pytest.raises(ValueError, match="count"):
                create(name).compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), value)
        return
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(value)
    with pytest.raises(ValueError, match="count"):
        create(name).compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), value)


@pytest.mark.parametrize(
    "cls,kw",
    [
        (tightdp.Gaussian, {"noise_multiplier": 1.0}),
        (tightdp.Laplace, {"scale": 1.0}),
        (tightdp.PureDP, {"epsilon": 1.0}),
        (tightdp.ApproximateDP, {"epsilon": 1.0, "delta": 1e-6}),
        (tightdp.RandomizedResponse, {"noise_parameter": 0.5, "num_buckets": 2}),
    ],
)
@pytest.mark.parametrize("value", BAD_NUMBERS + [1e-320])
def test_mechanisms_refuse_bad_parameters(cls, kw, value):
    for arg in kw:
        try:
            mech = cls(**{**kw, arg: value})
        except ValueError as exc:
            assert arg in str(exc)
            continue
        _refuses(lambda: tightdp.ConnectDotsAccountant().compose(mech, 3).epsilon(1e-6))


@SETTINGS
@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**30), 10**30),
        st.booleans(),
        st.text(max_size=3),
    ),
    arg=st.sampled_from(["noise_multiplier", "sampling_rate", "steps", "delta"]),
)
def test_dpsgd_epsilon_never_crashes(value, arg):
    kw = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=100, delta=1e-5)
    _refuses(lambda: tightdp.dpsgd_epsilon(**{**kw, arg: value}))


@pytest.mark.parametrize(
    "argv",
    [
        ["epsilon", "--noise-multiplier", "1e308", "--sampling-rate", "0.01", "--steps", "100", "--delta", "1e-5"],
        ["epsilon", "--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "1e308", "--delta", "1e-5"],
        ["epsilon", "--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "100", "--delta", "1e-320"],
        ["epsilon", "--noise-multiplier", "nan", "--sampling-rate", "0.01", "--steps", "100", "--delta", "1e-5"],
    ],
)
def test_cli_bad_magnitudes_exit_2(argv, capsys):
    from tightdp.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err


# ------------------------------------------------------------------ exact answers at the loss support


@pytest.mark.parametrize("name", ["connect-dots", "prv"])
def test_delta_is_exactly_zero_beyond_the_loss_support(name):
    """Randomized response that is 1-DP up to its float parameter answered delta(1) in [0, 1.0]. The float
    ``2 / (1 + e)`` lies below the real one, so the exact top is ``1 + 8.5e-17`` and ``delta(1) = 6.2e-17``
    (mpmath): the upper end must count it, and beyond the top delta is exactly 0."""
    import mpmath

    p = 2 / (1 + math.e)
    rr = tightdp.RandomizedResponse(noise_parameter=p, num_buckets=2)
    b = create(name).compose(rr).delta([1.0, 2.0])
    with mpmath.workdps(50):
        hi, lo = 1 - mpmath.mpf(p) / 2, mpmath.mpf(p) / 2
        exact = hi * (1 - mpmath.e / (hi / lo))
    assert b.lower[0] <= exact <= b.upper[0] <= 1e-14
    assert b.upper[1] == 0.0 and b.lower[1] == 0.0
    pure = create(name).compose(tightdp.PureDP(epsilon=1.0), 3)
    assert pure.delta(3.0).upper == 0.0 and pure.epsilon(1e-9).upper <= 3.0


@pytest.mark.parametrize("name", ["connect-dots", "prv"])
def test_approximate_dp_beyond_the_support_is_the_infinite_atom(name):
    acc = create(name).compose(tightdp.ApproximateDP(epsilon=0.5, delta=1e-6), 4)
    b = acc.delta(2.0)
    exact = -math.expm1(4 * math.log1p(-1e-6))
    assert b.lower <= exact <= b.upper and b.upper - b.lower < 1e-15


@pytest.mark.parametrize("name", ["connect-dots", "prv"])
def test_laplace_at_tiny_delta_is_never_unbounded(name):
    """3 x Laplace(1) + 2 x Laplace(2) at delta 1e-14 answered [0, inf]; the loss never
    exceeds 4, so epsilon <= 4 is certified whatever the discretisation manages."""
    acc = create(name).compose(tightdp.Laplace(scale=1.0), 3).compose(tightdp.Laplace(scale=2.0), 2)
    b = acc.epsilon(1e-14)
    _check_shape(b)
    assert b.upper <= 4.0 and math.isfinite(b.upper)


@SETTINGS
@given(
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**30), 10**30),
        st.booleans(),
        st.text(max_size=12),
        st.just([]),
        st.just({}),
        st.just(np.zeros(2)),
    ),
    arg=st.sampled_from(
        ["noise_multiplier", "sampling_rate", "steps", "delta", "group_size", "sampling", "dataset_size", "batch_size"]
    ),
)
def test_group_epsilon_never_crashes(value, arg):
    """Any value of any argument of group_epsilon: an answer of the right shape or a refusal naming it."""
    kw = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=50, delta=1e-5, group_size=2)
    _refuses(lambda: tightdp.group_epsilon(**{**kw, arg: value}))


@settings(SETTINGS, max_examples=scaled(6))  # a few seconds each
@given(
    n=st.integers(10**3, 10**12),
    q=st.floats(1e-6, 0.5),
    b=st.integers(1, 10**4),
    sigma=st.floats(0.5, 5.0),
    steps=st.integers(1, 20),
)
def test_truncated_poisson_never_crashes_at_any_dataset_size(n, q, b, sigma, steps):
    """Data-set sizes to 10^12 are in the declared domain: truncated Poisson answers (or refuses) without an
    array of the data set's size."""
    _refuses(
        lambda: tightdp.dpsgd_epsilon(
            noise_multiplier=sigma,
            sampling_rate=q,
            steps=steps,
            delta=1e-6,
            sampling="truncated-poisson",
            dataset_size=n,
            max_batch_size=min(b, n),
        )
    )
