"""Exact ends near the top of an atoms-only composition (``accountants._top_atoms``), against an enumeration in
mpmath built from the mechanisms' definitions (randomized response, pure and approximate DP as output
distributions: no tightdp loss is read), at random ledgers, epsilons and deltas; and the accountants' answers on
the corner an independent fuzz found (connect-dots gave ``[0, 8.8e-5]`` against an exact 4.25e-8)."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ApproximateDP, PureDP, RandomizedResponse
from tightdp.accountants import ConnectDotsAccountant, FourierAccountant, PRVAccountant
from tightdp.accountants._pld import PLDAccountant
from tightdp.accountants._top_atoms import delta_bounds, epsilon_bounds, top_atoms

M = mpmath.mpf


def _atoms(mech: object) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """``(loss, P-mass)`` of one step's worst pair, from the mechanism's definition (``inf`` for outputs Q never
    gives), at 50 digits from the parameters as given (floats, exactly)."""
    if isinstance(mech, RandomizedResponse):  # P answers the true bucket x, Q the bucket y
        lam, b = M(mech.noise_parameter), mech.num_buckets
        keep, other = 1 - lam + lam / b, lam / b
        out = [(mpmath.log(keep / other), keep), (mpmath.log(other / keep), other)]
        return out + ([(M(0), (b - 2) * other)] if b > 2 else [])
    eps = M(mech.epsilon)  # type: ignore[attr-defined]
    delta = M(getattr(mech, "delta", 0.0))
    hi = (1 - delta) * mpmath.exp(eps) / (1 + mpmath.exp(eps))
    out = [(eps, hi), (-eps, (1 - delta) - hi)]
    return out + ([(mpmath.inf, delta)] if delta > 0 else [])


def _exact_delta(ledger: list[tuple[object, int]], eps: float) -> mpmath.mpf:
    """``E_P[(1 - e^(eps - L))_+]`` over every composed output, in mpmath."""
    with mpmath.workdps(50):
        steps = [a for mech, c in ledger for a in [_atoms(mech)] * c]
        total = M(0)
        for combo in itertools.product(*steps):
            loss = sum(v for v, _ in combo)
            mass = mpmath.fprod(p for _, p in combo)
            if loss == mpmath.inf:
                total += mass
            elif loss > eps:
                total += mass * -mpmath.expm1(M(eps) - loss)
        return total


_MECHS = st.one_of(
    st.builds(
        RandomizedResponse,
        noise_parameter=st.floats(0.05, 0.95),
        num_buckets=st.integers(2, 5),
    ),
    st.builds(PureDP, epsilon=st.floats(0.05, 3.0)),
    st.builds(ApproximateDP, epsilon=st.floats(0.05, 3.0), delta=st.floats(1e-9, 1e-3)),
)


def _top(ledger: list[tuple[object, int]]) -> float:
    return sum(c * max(float(v) for v, _ in _atoms(m) if v != mpmath.inf) for m, c in ledger)


@settings(max_examples=25, deadline=None)
@given(
    ledger=st.lists(st.tuples(_MECHS, st.integers(1, 3)), min_size=1, max_size=3),
    fracs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    below=st.floats(1e-9, 1e-3),
)
def test_delta_brackets_the_enumeration(ledger, fracs, below):
    """At random ledgers and epsilons (spread over the support, and just below its top, where a grid's mesh
    blurs the answer), the listed atoms' ends bracket the exact delta."""
    acc = ConnectDotsAccountant()
    for m, c in ledger:
        acc = acc.compose(m, c)
    top = _top(ledger)
    eps = sorted({round(f * top, 12) for f in fracs} | {max(0.0, top - below)})
    (terms,) = PLDAccountant._directions(acc)
    listing = top_atoms(terms, eps[0])
    assert listing is not None
    low, high = delta_bounds(listing, np.array(eps))
    for e, lo, hi in zip(eps, low, high):
        exact = _exact_delta(ledger, e)
        assert lo <= exact <= hi, (ledger, e, lo, float(exact), hi)
        # exact up to rounding, not just valid: at most the losses' margin (mass at most 1) beside the masses'
        spread = float(np.max(listing.loss_high - listing.loss_low))
        assert spread <= 1e-12 and hi - lo <= 1e-6 * float(exact) + spread


@settings(max_examples=20, deadline=None)
@given(
    ledger=st.lists(st.tuples(_MECHS, st.integers(1, 3)), min_size=1, max_size=3),
    log_delta=st.floats(-12.0, -1.0),
)
def test_epsilon_ends_meet_delta(ledger, log_delta):
    """The epsilon ends from the listing: the exact delta at the lower end is above the target, at the upper end
    at most the target (the definition of ``eps(delta)``), and the accountant returns them."""
    delta = 10.0**log_delta
    acc = ConnectDotsAccountant()
    for m, c in ledger:
        acc = acc.compose(m, c)
    (terms,) = PLDAccountant._directions(acc)
    listing = top_atoms(terms, 0.0)
    assert listing is not None
    lower, upper = epsilon_bounds(listing, delta)
    if upper is None:  # the mass at +inf alone exceeds delta
        assert _exact_delta(ledger, _top(ledger)) >= delta * (1 - 1e-9)
        return
    assert _exact_delta(ledger, upper) <= delta
    if lower is not None:
        assert _exact_delta(ledger, lower) > delta
        assert upper - lower <= 1e-6 * (1.0 + upper)


@pytest.mark.parametrize("accountant", [ConnectDotsAccountant, PRVAccountant, FourierAccountant])
def test_accountants_answer_the_fuzz_corner_exactly(accountant):
    """Two randomized responses, delta asked 3.8e-7 below the composed top (connect-dots gave ``[0, 8.8e-5]``),
    and epsilon at small deltas, where the numerics' lower ends sat 0.01 below the truth."""
    ledger = [
        (RandomizedResponse(noise_parameter=0.9181, num_buckets=3), 2),
        (RandomizedResponse(noise_parameter=0.1865, num_buckets=4), 2),
    ]
    acc = accountant()
    for m, c in ledger:
        acc = acc.compose(m, c)
    eps = np.array([0.0, 2.0, 6.304160267388744])
    b = acc.delta(eps)
    for e, lo, hi in zip(eps, b.lower, b.upper):
        exact = _exact_delta(ledger, e)
        assert lo <= exact <= hi and hi - lo <= 1e-6 * float(exact)
    for delta in (1e-6, 1e-8, 1e-10):
        e = acc.epsilon(delta)
        assert e.details["method"] == "exact composed atoms near the top"
        assert _exact_delta(ledger, e.lower) > delta >= _exact_delta(ledger, e.upper)
        assert e.upper - e.lower <= 1e-9


def test_too_many_atoms_falls_back_to_the_numerics():
    """Past the listing's limit ``top_atoms`` gives ``None`` (counted before any array is built) and the
    accountant answers by its numerics, as before."""
    acc = (
        ConnectDotsAccountant()
        .compose(PureDP(epsilon=0.3), 400)
        .compose(RandomizedResponse(noise_parameter=0.5, num_buckets=3), 400)
    )
    (terms,) = PLDAccountant._directions(acc)
    assert top_atoms(terms, 0.0, limit=10_000) is None
    assert top_atoms(terms, 660.0, limit=10_000) is not None  # near the top (674.5) few atoms remain
    b = acc.epsilon(1e-6)
    assert b.details.get("method") != "exact composed atoms near the top"
    assert 0.0 < b.lower <= b.upper < math.inf


def test_bad_floor_is_refused():
    """``delta_bounds`` below the listing's floor would miss atoms: a ``ValueError`` naming it."""
    (terms,) = PLDAccountant._directions(ConnectDotsAccountant().compose(PureDP(epsilon=1.0), 3))
    listing = top_atoms(terms, 1.0)
    assert listing is not None
    with pytest.raises(ValueError, match="floor"):
        delta_bounds(listing, np.array([0.5]))


@pytest.mark.parametrize("delta", [1e-3, 1e-8])
def test_a_tighter_request_is_never_wider(delta):
    """The listing answers whatever accuracy was asked, so a tighter request (whose numerics alone would be
    narrow) keeps its exact ends too."""
    ledger = [(RandomizedResponse(noise_parameter=0.4, num_buckets=3), 3), (PureDP(epsilon=0.7), 4)]
    widths = []
    for acc in (ConnectDotsAccountant(), ConnectDotsAccountant(eps_error=1e-9)):
        for m, c in ledger:
            acc = acc.compose(m, c)
        b = acc.epsilon(delta)
        assert _exact_delta(ledger, b.lower) > delta >= _exact_delta(ledger, b.upper)
        widths.append(b.upper - b.lower)
    assert widths[1] <= widths[0] <= 1e-9


def _laplace_delta(eps0: mpmath.mpf, x: mpmath.mpf) -> mpmath.mpf:
    """One Laplace step of ``eps0 = sensitivity / scale``: ``delta(x) = 1 - e^((x - eps0) / 2)`` on ``|x| <= eps0``,
    0 above, ``1 - e^x`` below (its pair is symmetric: ``delta(-x) = 1 - e^-x + e^-x delta(x)``)."""
    if x >= eps0:
        return M(0)
    if x <= -eps0:
        return -mpmath.expm1(x)
    return -mpmath.expm1((x - eps0) / 2)


@settings(max_examples=20, deadline=None)
@given(
    eps0=st.floats(0.05, 2.0),
    pure=st.lists(st.tuples(st.floats(0.1, 3.0), st.integers(1, 3)), min_size=1, max_size=2),
    fracs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3),
    below=st.floats(1e-9, 1e-2),
)
def test_one_laplace_beside_the_atoms(eps0, pure, fracs, below):
    """Pure-DP steps and one Laplace step (whose loss is not made of atoms): the listing narrows the numerics and
    its ends bracket the exact delta, ``sum_a p_a delta_Laplace(eps - s_a)`` in mpmath, near the top as well."""
    from tightdp import Laplace

    acc = ConnectDotsAccountant().compose(Laplace(scale=1.0 / eps0))
    for e, c in pure:
        acc = acc.compose(PureDP(epsilon=e), c)
    top = eps0 + sum(e * c for e, c in pure)
    eps = np.array(sorted({round(f * top, 12) for f in fracs} | {max(0.0, top - below)}))
    b = acc.delta(eps)
    with mpmath.workdps(50):
        atoms = [a for e, c in pure for a in [_atoms(PureDP(epsilon=e))] * c]
        for e, lo, hi in zip(eps, b.lower, b.upper):
            exact = M(0)
            for combo in itertools.product(*atoms):
                exact += mpmath.fprod(p for _, p in combo) * _laplace_delta(M(eps0), M(e) - sum(v for v, _ in combo))
            assert lo <= exact <= hi, (e, lo, float(exact), hi)


@pytest.mark.parametrize(
    "ledger",
    [
        [(RandomizedResponse(noise_parameter=0.6081969490762484, num_buckets=3), 6)],
        [
            (ApproximateDP(epsilon=1.8058801638556683, delta=1.8911057023004066e-12), 3),
            (RandomizedResponse(noise_parameter=0.5818274749946617, num_buckets=4), 3),
        ],
    ],
)
def test_delta_at_the_float_top_counts_the_exact_top(ledger):
    """At the float sum of the steps' tops, the mechanism's exact top (from its parameters) can lie a hair above:
    delta there is not just the mass at +inf (an independent fuzz found ``[0, 0]`` against an exact 9.3e-18)."""
    acc = ConnectDotsAccountant()
    for m, c in ledger:
        acc = acc.compose(m, c)
    float_top = math.fsum(c * float(max(v for v, _ in _atoms(m) if v != mpmath.inf)) for m, c in ledger)
    for e in (float_top, float(np.nextafter(float_top, 0.0)), float(np.nextafter(float_top, math.inf))):
        b = acc.delta(np.array([e]))
        exact = _exact_delta(ledger, e)
        assert b.lower[0] <= exact <= b.upper[0], (e, b.lower[0], float(exact), b.upper[0])


@settings(max_examples=scaled(25), deadline=None)
@given(
    ledger=st.lists(st.tuples(_MECHS, st.integers(1, 3)), min_size=1, max_size=3),
    name=st.sampled_from(["connect-dots", "prv", "fourier"]),
)
def test_delta_at_and_beyond_the_float_top_brackets_the_enumeration(ledger, name):
    """Random ledgers of randomized response, pure and approximate DP, in every accountant: at the float sum of
    the steps' tops, an ulp either side, and beyond (where delta is the mass at +inf alone), the ends bracket the
    exact delta enumerated in mpmath from the mechanisms' parameters."""
    from tightdp.accountants import create

    acc = create(name)
    for m, c in ledger:
        acc = acc.compose(m, c)
    float_top = math.fsum(c * float(max(v for v, _ in _atoms(m) if v != mpmath.inf)) for m, c in ledger)
    eps = sorted({float_top, float(np.nextafter(float_top, 0.0)), float(np.nextafter(float_top, math.inf))})
    eps.append(float_top * (1 + 1e-9) + 1e-9)
    b = acc.delta(np.array(eps))
    for e, lo, hi in zip(eps, b.lower, b.upper):
        exact = _exact_delta(ledger, e)
        assert lo <= exact <= hi, (e, lo, float(exact), hi)
