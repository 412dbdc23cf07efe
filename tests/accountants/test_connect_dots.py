"""The dominance-based accountant (connect-the-dots upper, merge-to-the-grid lower): truth and peers."""

import math

import numpy as np
import pytest
from _support import gdp_delta_mp, gdp_epsilon_mp

import tightdp
from tightdp import ConnectDotsAccountant, Gaussian, PoissonSampled, SampledWithoutReplacement


@pytest.mark.parametrize("sigma,k", [(1.0, 1), (1.0, 10), (2.0, 100), (4.0, 1000), (10.0, 10000)])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9, 1e-14])
def test_gaussian_contains_exact_gdp(sigma, k, delta):
    b = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=sigma), k).epsilon(delta)
    exact = gdp_epsilon_mp(delta, math.sqrt(k) / sigma)
    assert b.lower <= exact <= b.upper
    assert b.upper - b.lower <= 0.02


@pytest.mark.parametrize("sigma,k", [(1.0, 10), (3.0, 300)])
def test_gaussian_delta_contains_exact(sigma, k):
    eps = np.array([0.0, 0.5, 2.0, 5.0])
    b = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=sigma), k).delta(eps)
    for e, lo, up in zip(eps, b.lower, b.upper):
        assert lo <= gdp_delta_mp(e, math.sqrt(k) / sigma) <= up


@pytest.mark.parametrize(
    "sigma,q,k,delta", [(1.0, 0.01, 1000, 1e-5), (0.8, 0.004, 3000, 1e-7), (2.0, 0.1, 200, 1e-6), (0.7, 0.3, 50, 1e-9)]
)
def test_overlaps_the_prv_accountant(sigma, q, k, delta):
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q)
    cd = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    prv = tightdp.PRVAccountant().compose(mech, k).epsilon(delta)
    # both intervals contain the truth, so they intersect; connect-the-dots is the narrower
    assert cd.lower <= prv.upper and prv.lower <= cd.upper
    assert cd.upper - cd.lower <= 2 * max(1e-3 * cd.upper, 5e-5) * (1 + 1e-9)  # the default: relative


@pytest.mark.peers
@pytest.mark.parametrize("seed", range(6))
def test_random_dpsgd_contains_dp_accounting(seed):
    pl = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    rng = np.random.default_rng(seed)
    sigma, q = float(rng.uniform(0.6, 4.0)), float(10 ** rng.uniform(-3, math.log10(0.3)))
    k, delta = int(10 ** rng.uniform(1, 4)), float(10 ** rng.uniform(-9, -5))
    b = (
        ConnectDotsAccountant()
        .compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q), k)
        .epsilon(delta)
    )
    ref = (
        pl.from_gaussian_mechanism(
            standard_deviation=sigma, sampling_prob=q, value_discretization_interval=1e-4, use_connect_dots=True
        )
        .self_compose(k)
        .get_epsilon_for_delta(delta)
    )
    # dp-accounting's pessimistic estimate is at or slightly above the truth
    assert b.lower <= ref + 1e-4 and ref <= b.upper + 1e-3, (sigma, q, k, delta, b, ref)


def test_substitute_relation_and_heterogeneous():
    g = Gaussian(noise_multiplier=1.0)
    acc = (
        ConnectDotsAccountant()
        .compose(SampledWithoutReplacement(mechanism=g, sample_size=100, dataset_size=10000), 500)
        .compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=2.0), sampling_rate=0.05), 300)
    )
    prv = tightdp.PRVAccountant().compose(acc.ledger)
    a, b = acc.epsilon(1e-6), prv.epsilon(1e-6)
    assert a.lower <= b.upper and b.lower <= a.upper


def test_unsupported_and_bad_input():
    # Laplace has its own dominance discretisation: no PRV fallback, and the two
    # certified intervals meet
    lap = tightdp.Laplace(scale=1.0)
    b = ConnectDotsAccountant().compose(lap, 10).epsilon(1e-6)
    ref = tightdp.PRVAccountant().compose(lap, 10).epsilon(1e-6)
    assert "fallback" not in b.details and b.lower <= ref.upper and ref.lower <= b.upper
    d = ConnectDotsAccountant().compose(lap, 10).delta([1.0, 2.0])
    assert "fallback" not in d.details and np.all(d.lower <= d.upper)
    with pytest.raises(ValueError, match="eps_error"):
        ConnectDotsAccountant(eps_error=0)
    with pytest.raises(ValueError, match="delta"):
        ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0)).epsilon(0.0)


def test_round_trip_and_cli(capsys):
    import json

    from tightdp.cli import main

    acc = ConnectDotsAccountant(eps_error=0.005).compose(
        tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), 100
    )
    assert tightdp.accountant_from_dict(json.loads(acc.to_json())) == acc
    assert (
        main(
            [
                "epsilon",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--delta",
                "1e-5",
                "--accountant",
                "connect-dots",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["accountant"] == "connect-dots" and out["epsilon"]["lower"] <= out["epsilon"]["upper"]


def test_falls_back_to_the_prv_accountant_when_the_grid_cannot_resolve(monkeypatch):
    import tightdp.accountants.connect_dots as cd

    def boom(*args, **kwargs):
        raise ArithmeticError("forced")

    monkeypatch.setattr(cd, "dominating", boom)
    mech = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01)
    b = ConnectDotsAccountant(eps_error=0.01).compose(mech, 100).epsilon(1e-5)
    ref = tightdp.PRVAccountant(eps_error=0.01).compose(mech, 100).epsilon(1e-5)
    assert b.details["fallback"].startswith("prv") and (b.lower, b.upper) == (ref.lower, ref.upper)


def test_poisson_inverse_is_accurate_near_the_support_edge():
    # e^s - (1 - q) loses every digit near s = log(1 - q) unless written as (1 - q) expm1(s - log(1 - q))
    from tightdp.losses import poisson_gaussian_loss

    for direction in ("remove", "add"):
        loss = poisson_gaussian_loss(sigma=1.7, q=4e-4, direction=direction)
        lo, hi = loss.support()
        edge = lo if math.isfinite(lo) else hi
        s = np.linspace(edge - 0.01 * np.sign(edge), edge, 1001)[1:-1] if math.isfinite(edge) else None
        _, err = loss.outputs_at(s)
        assert err < 1e-13


def test_epsilon_in_the_thousands_is_answered_and_matches_a_saddle_point_reference():
    """Far out in the tail the curve is flat in epsilon: the accountant must spend less delta slack
    (it used to refine the mesh until memory ran out). The reference is independent of tightdp
    (mpmath saddle-point tails, ``tests/data/saddlepoint_reference.py``): it puts epsilon(1e-5) in
    (1207.19, 1207.35). dp-accounting 0.6.0 reports 1208.23 here, about one unit too pessimistic."""
    import json
    from pathlib import Path

    ref = json.loads((Path(__file__).parents[1] / "data" / "saddlepoint_reference.json").read_text())
    assert ref["delta_at"]["1207.19"] > 1e-5 > ref["delta_at"]["1207.35"]
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.6), sampling_rate=0.3, relation="remove")
    b = ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)
    assert b.kind == "bound" and "fallback" not in b.details
    assert b.upper - b.lower <= 0.02
    assert b.lower < 1207.35 and b.upper > 1207.19  # intersects the reference bracket
    assert 1207.19 < 0.5 * (b.lower + b.upper) < 1207.35
    both = tightdp.dpsgd_epsilon(noise_multiplier=0.6, sampling_rate=0.3, steps=5000, delta=1e-5, eps_error=0.01)
    assert (both.lower, both.upper) == (b.lower, b.upper)  # add-remove: the remove direction is the worse


def test_the_default_accountant_and_its_details():
    b = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    same = (
        ConnectDotsAccountant()
        .compose(tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01), 1000)
        .epsilon(1e-5)
    )
    assert (b.lower, b.upper) == (same.lower, same.upper)
    assert b.details["passes"] >= 1 and b.details["mesh"] > 0
    tightdp.clear_caches()  # memos only save time: the answer after clearing them is the same
    again = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    assert (again.lower, again.upper) == (b.lower, b.upper)


@pytest.mark.parametrize("sigma,q", [(1.0, 0.01), (0.6, 0.3), (4.0, 0.001), (0.8, 1.0)])
def test_loss_spread_matches_a_fine_discretisation(sigma, q):
    from tightdp.pld.dominance import dominating, loss_spread

    pair = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q).privacy_losses()
    for loss in (pair.remove, pair.add):
        h = loss_spread(loss) / 200
        u = dominating(loss, h, 1e-14)
        w = u.pmf / u.pmf.sum()
        sd = math.sqrt(float(np.dot(w, u.grid**2) - np.dot(w, u.grid) ** 2))
        # connect-the-dots adds at most h^2/4 of variance
        assert abs(loss_spread(loss) - sd) <= 1e-3 * sd + h


@pytest.mark.parametrize(
    "kw",
    [
        dict(
            noise_multiplier=1.1706723986699727,
            sampling_rate=0.0013097747077079433,
            steps=11,
            delta=3.067569362292493e-25,
        ),
        dict(
            noise_multiplier=2.1974891164397077,
            sampling_rate=0.0011066226884347055,
            steps=1,
            delta=2.4957984742342575e-27,
        ),
    ],
)
def test_tiny_delta_decided_by_rare_steps(kw):
    """q k ~ 0.014 and delta ~ 1e-25: epsilon is decided far out in the tail. The upward merge to the
    grid swallows that tail into the bulk, so the accountant adds the downward merge and, when the
    slack stops helping, shrinks the mesh: certified and narrow without the PRV fallback."""
    b = tightdp.dpsgd_epsilon(**kw)
    prv = tightdp.dpsgd_epsilon(accountant="prv", **kw)
    assert "fallback" not in b.details and b.upper - b.lower <= 0.02
    assert b.lower <= prv.upper and prv.lower <= b.upper


def test_unconverged_dominance_is_intersected_with_the_prv_interval(monkeypatch):
    """If the constructions stay wider than 2 eps_error, the answer is the intersection of the two
    certified intervals (dominance and coupling), with both recorded in details."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01)
    good = ConnectDotsAccountant(eps_error=0.01).compose(mech, 500).epsilon(1e-6)
    wide = tightdp.Bounds(good.lower - 0.5, good.estimate, good.upper, "epsilon", "bound", {"passes": 9})
    monkeypatch.setattr(ConnectDotsAccountant, "_epsilon_dominance", lambda self, delta: wide)
    b = ConnectDotsAccountant(eps_error=0.01).compose(mech, 500).epsilon(1e-6)
    prv = tightdp.PRVAccountant(eps_error=0.01).compose(mech, 500).epsilon(1e-6)
    assert "fallback" in b.details and b.details["dominance"] == {"passes": 9}
    assert (b.lower, b.upper) == (max(wide.lower, prv.lower), min(wide.upper, prv.upper))


def test_grid_cap_answers_with_the_last_certified_pass_or_refuses(monkeypatch):
    """When refining would exceed the grid cap, the last completed (wider) pass is the answer, with a
    note; when even the first pass exceeds it, GridTooLargeError (no PRV retry: it needs a finer grid)."""
    import tightdp.pld.composition as composition

    # a first mesh 4x too coarse (the model's is right here: one pass), so that a second, finer pass runs
    model = ConnectDotsAccountant._model_mesh
    monkeypatch.setattr(ConnectDotsAccountant, "_model_mesh", lambda self, *a, **k: 4.0 * model(self, *a, **k))
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.6), sampling_rate=0.3)
    import tightdp.accountants._two_level_plan as plan
    import tightdp.accountants.connect_dots as cd

    monkeypatch.setattr(plan, "_TWO_LEVEL_STEPS", 1 << 62)  # one level: its window grows with every pass
    sizes = []
    real_compose = cd.compose
    monkeypatch.setattr(cd, "compose", lambda *a, **k: sizes.append(real_compose(*a, **k)) or sizes[-1])
    full = ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)
    monkeypatch.setattr(cd, "compose", real_compose)
    first_pass = full.details["refinements"][0]
    assert full.details["passes"] == 2 and first_pass["width"] > 0.02
    # a cap between the first and the second pass's windows
    first, last = sizes[0].tilted.size, max(c.tilted.size for c in sizes)
    assert last > 2 * first
    monkeypatch.setattr(composition, "_MAX_POINTS", int((first * last) ** 0.5))
    b = ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)
    assert "grid_cap" in b.details and "grid cap" in b.details["note"] and "fallback" not in b.details
    assert b.lower <= full.lower <= full.upper <= b.upper  # both certified; the capped one is wider
    monkeypatch.setattr(composition, "_MAX_POINTS", 1000)
    with pytest.raises(tightdp.GridTooLargeError, match="grid points"):
        ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)


def test_tiny_delta_rare_steps_without_fallback():
    """delta = 1e-25 with q k ~ 0.16: the answer comes from cells ten standard deviations out, whose
    masses must be relative-accurate (8-point Gauss-Legendre) for the dominance bounds to certify it."""
    kw = dict(
        noise_multiplier=3.0135184086541775, sampling_rate=0.001888614984513166, steps=85, delta=9.800118568796581e-26
    )
    b = tightdp.dpsgd_epsilon(**kw)
    prv = tightdp.dpsgd_epsilon(accountant="prv", **kw)
    assert "fallback" not in b.details and b.upper - b.lower <= 0.02
    assert b.lower <= prv.upper and prv.lower <= b.upper


def test_swapped_pairs_are_recognised():
    from tightdp.pld.dominance import is_swapped_pair

    for mech in (
        tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01),
        tightdp.GroupPoissonSampled(noise_multiplier=1.0, sampling_rate=0.01, group_size=4),
    ):
        pair = mech.privacy_losses()
        assert is_swapped_pair(pair.remove, pair.add) and is_swapped_pair(pair.add, pair.remove)
        assert not is_swapped_pair(pair.remove, pair.remove)
    other = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.02).privacy_losses()
    mine = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01).privacy_losses()
    assert not is_swapped_pair(mine.remove, other.add)


@pytest.mark.parametrize("k,delta", [(100, 1e-5), (1000, 1e-6), (30, 1e-3)])
def test_add_direction_bounded_through_the_swap_identity(k, delta):
    """H_a(Q||P) = 1 - a + a H_{1/a}(P||Q): the add direction's delta at the remove direction's certified
    epsilon, read off the remove composition, is an upper bound on the add direction's certified lower
    delta there, and the add-remove answer is never below either direction's own certified answer."""
    from tightdp.accountants.connect_dots import _TINY
    from tightdp.pld import delta_bounds

    mk = lambda rel: PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01, relation=rel)
    both = ConnectDotsAccountant().compose(mk("add-remove"), k).epsilon(delta)
    add = ConnectDotsAccountant().compose(mk("add"), k)
    rem = ConnectDotsAccountant().compose(mk("remove"), k)
    assert both.upper >= add.epsilon(delta).lower and both.upper >= rem.epsilon(delta).lower
    # the identity itself, on the remove direction's dominating composition
    eps = both.upper
    h = rem.epsilon(delta).details["mesh"]
    comp = rem._composed(0, rem._directions()[0], h, 0.5e-3 * delta / k, True, None, min(1e-6, 0.05e-3 * delta))
    up = float(delta_bounds(comp, np.array([-eps]), _TINY)[2][0])
    swap_bound = math.exp(eps) * (up + math.expm1(-eps))
    assert swap_bound + 1e-12 >= float(add.delta(eps).lower)


def _subsampled_gaussian_single_delta_mp(eps: float, sigma: float, q: float) -> float:
    """One Poisson-subsampled Gaussian step, remove direction (the add direction's delta is 0 for
    eps >= -log(1 - q)): P = (1 - q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2); P > e^eps Q beyond
    x* = s^2 log((e^eps - 1 + q) / q) + 1/2, so delta = (1 - q - e^eps) sf(x*/s) + q sf((x* - 1)/s)."""
    import mpmath

    with mpmath.workdps(50):
        s, qq, e = mpmath.mpf(sigma), mpmath.mpf(q), mpmath.mpf(eps)
        x = s * s * mpmath.log((mpmath.exp(e) - 1 + qq) / qq) + mpmath.mpf(1) / 2
        sf = lambda z: mpmath.ncdf(-z)
        return float((1 - qq - mpmath.exp(e)) * sf(x / s) + qq * sf((x - 1) / s))


@pytest.mark.parametrize("k", [1, 10])
def test_delta_of_rare_large_steps_is_tight_without_fallback(k):
    """sigma = 0.1, q = 1.024e-5 (TF Privacy's test): a sampled step loses about 38 +- 10 nats, the others
    nothing. delta(eps) fell back to PRV at k = 1 (one step's grid was too fine) and took 85 s at k = 10:
    the upward merge swallowed the rare tail into the bulk (lower end 0 at every coarse mesh) and the mesh
    was halved eight times. The downward merge keeps it: one pass, tight."""
    m = tightdp.dpsgd_mechanism(noise_multiplier=0.1, sampling_rate=1.024e-5)
    eps = [1.0, 10.0, 30.0]
    b = ConnectDotsAccountant().compose(m, k).delta(eps)
    assert "fallback" not in b.details, b.details
    assert np.all(b.upper - b.lower <= 4e-3 * b.upper)
    if k == 1:
        exact = np.array([_subsampled_gaussian_single_delta_mp(e, 0.1, 1.024e-5) for e in eps])
        assert np.all(b.lower <= exact * (1 + 1e-12)) and np.all(exact <= b.upper * (1 + 1e-12)), (b, exact)


def test_tight_absolute_target_is_met_in_one_pass():
    """eps_error = 1e-3 at k = 1e5: the default delta slack (1e-3 delta) alone moved epsilon by about the
    target, so the first pass missed and a second one cut the slack; the slack is now sized from the target
    (``_slack_share``): one pass, within the target, and consistent with the default accountant's interval."""
    m = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01)
    b = ConnectDotsAccountant(eps_error=1e-3).compose(m, 10**5).epsilon(1e-5)
    assert b.details["passes"] == 1 and b.upper - b.lower <= 2e-3
    default = ConnectDotsAccountant().compose(m, 10**5).epsilon(1e-5)  # the relative default keeps 1e-3 delta
    assert default.details["delta_error"] == pytest.approx(1e-8)
    assert default.lower <= b.upper and b.lower <= default.upper


def test_out_of_memory_answers_with_the_last_pass_or_refuses_in_one_line(monkeypatch, capsys):
    """numpy's MemoryError is never what a user sees: a refinement that runs out of memory answers with the last
    certified pass (as at the grid cap); a first pass that does is refused as GridTooLargeError, and the CLI
    prints one line (exit 1). (A 12 GB address-space limit made a k = 1e7 call die with _ArrayMemoryError.)"""
    import tightdp.accountants._two_level_plan as plan
    import tightdp.accountants.connect_dots as cd
    from tightdp.cli import main

    model = ConnectDotsAccountant._model_mesh
    monkeypatch.setattr(ConnectDotsAccountant, "_model_mesh", lambda self, *a, **k: 4.0 * model(self, *a, **k))
    monkeypatch.setattr(plan, "_TWO_LEVEL_STEPS", 1 << 62)  # one level: its window grows with every pass
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.6), sampling_rate=0.3)
    full = ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)
    first_size = []
    real_compose = cd.compose

    def compose(*a, **k):  # the second pass's (larger) windows do not fit
        out = real_compose(*a, **k)
        if first_size and out.tilted.size > 2 * first_size[0]:
            raise MemoryError(f"Unable to allocate {out.tilted.size * 8} bytes")  # as numpy says it
        first_size.append(out.tilted.size)
        return out

    monkeypatch.setattr(cd, "compose", compose)
    b = ConnectDotsAccountant(eps_error=0.01).compose(mech, 5000).epsilon(1e-5)
    assert "out of memory" in b.details["grid_cap"] and "memory" in b.details["note"]
    assert b.lower <= full.lower <= full.upper <= b.upper

    def no_memory(*a, **k):
        raise MemoryError("Unable to allocate 424. MiB")

    monkeypatch.setattr(cd, "compose", no_memory)
    with pytest.raises(tightdp.GridTooLargeError, match="out of memory"):
        ConnectDotsAccountant().compose(mech, 5000).epsilon(1e-5)
    with pytest.raises(tightdp.GridTooLargeError, match="out of memory"):
        ConnectDotsAccountant().compose(mech, 5000).delta([1.0])
    assert (
        main(["epsilon", "--noise-multiplier", "0.6", "--sampling-rate", "0.3", "--steps", "5000", "--delta", "1e-5"])
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert "out of memory" in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize("ratio", [1e-12, 0.999999, 1.0, 1.0000001, 3.0, 1e6])
def test_snap_divides_the_common_lattice_at_every_mesh(ratio):
    """The mesh from the atoms' common lattice (unit g): g / ceil(g / h), never 0, never above h unless g itself
    is below h (then g), and always dividing g (here Laplace's 2r and pure DP's 2 eps on one lattice); except where
    g is more than 256 times finer than h (then h: the atoms sit within a cell, and g would multiply the cells)."""
    from tightdp import PureDP

    acc = ConnectDotsAccountant().compose([(tightdp.Laplace(scale=1.0 / 0.3), 10), (PureDP(epsilon=0.15), 5)])
    g = 0.3  # gaps 0.6 and 0.3
    h = g / ratio if ratio > 1e-9 else 1e12 * g
    mesh = acc._snap(h, acc._directions())
    if g < h / 256:
        assert mesh == h
        return
    assert 0 < mesh <= max(h, g) * (1 + 1e-12)
    assert abs(g / mesh - round(g / mesh)) <= 1e-9 * g / mesh


@pytest.mark.parametrize("eps0, delta0, count", [(1e-6, 1e-15, 1), (0.5, 1e-9, 1), (0.3, 1e-12, 4)])
def test_delta_at_the_mass_at_infinity_keeps_the_lower_end_below_the_truth(eps0, delta0, count):
    """``count`` (eps0, delta0)-DP steps asked at delta = their mass at infinity, ``1 - (1 - delta0)^count``: the
    curve meets delta at the top of the loss's support, so the truth is ``count * eps0``. The lower end was ``inf``
    (the curve ``>= delta`` everywhere was read as ``> delta``); it must stay at most the truth. The float ``delta``
    may fall a hair below the exact mass (in rationals from the float ``delta0``): epsilon is then infinite."""
    from fractions import Fraction

    from tightdp.mechanisms import ApproximateDP

    delta = -math.expm1(count * math.log1p(-delta0))
    b = ConnectDotsAccountant().compose(ApproximateDP(epsilon=eps0, delta=delta0), count).epsilon(delta)
    if Fraction(delta) < 1 - (1 - Fraction(delta0)) ** count:
        assert b.lower == b.upper == math.inf
    else:
        assert b.lower <= count * eps0 * (1 + 1e-9) and b.upper == pytest.approx(count * eps0, rel=1e-12)
    above = ConnectDotsAccountant().compose(ApproximateDP(epsilon=eps0, delta=delta0), count).epsilon(delta * 1.001)
    assert above.lower <= count * eps0 * (1 + 1e-9) and above.upper == pytest.approx(count * eps0, rel=1e-6)
    below = ConnectDotsAccountant().compose(ApproximateDP(epsilon=eps0, delta=delta0), count).epsilon(delta * 0.999)
    assert below.lower == below.upper == math.inf  # the mass at infinity alone exceeds delta


@pytest.mark.parametrize("sensitivity", [1e-300, 1e-200, 1e-150])
def test_a_gaussian_of_vanishing_mu_answers_without_nan(sensitivity):
    """Noise 1e12 at sensitivity 1e-300: mu = 1e-312, whose square underflowed to 0 in the ledger's mu and then
    0/0 gave a NaN delta. The ledger's mu is now scaled by its largest term, and below mu = 1e-290 the closed form
    bounds delta at 1e-290 (delta grows with mu); the interval holds the exact delta (mpmath)."""
    import mpmath

    acc = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1e12, sensitivity=sensitivity), 3)
    b = acc.delta([0.0, 1e-300, 1.0])
    assert np.all(np.isfinite(b.lower)) and np.all(np.isfinite(b.upper)) and np.all(np.isfinite(b.estimate))
    mpmath.mp.dps = 40
    mu = mpmath.sqrt(3) * mpmath.mpf(sensitivity) / mpmath.mpf(1e12)
    for e, lo, hi in zip([0.0, 1e-300, 1.0], b.lower, b.upper):
        e = mpmath.mpf(e)
        if e / mu > 1e6:  # delta below e^(-5e11): the lower end must be 0 (mpmath's erfc declines such arguments)
            assert lo == 0.0 and hi >= 0.0
            continue
        exact = mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)
        assert lo <= exact <= hi
    assert acc.epsilon(1e-6).upper == 0.0


@pytest.mark.parametrize("rel", [1e-9, 1e-6, 1e-3])
@pytest.mark.parametrize(
    "make, width",
    [(ConnectDotsAccountant, 2e-3), (tightdp.PRVAccountant, 1e-2), (tightdp.FourierAccountant, 2e-3)],
)
def test_delta_just_above_the_mass_at_infinity_is_answered(rel, make, width):
    """Two ``ApproximateDP(0.008, 1.08e-3)`` steps beside six Gaussians (noise 4.5182), asked at ``delta = M (1 +
    rel)`` with ``M = 1 - (1 - d)^2`` the mass at infinity: the finite losses decide epsilon at ``delta - M``. A
    slack of ``1e-3 delta`` swallowed that share (upper end inf at ``rel`` up to 1e-6, in all three PLD
    accountants: ``PLDAccountant._finite_share``). Reference: ``delta(eps)
    = M + (1 - d)^2 E_j[G(eps - a_j)]`` over the pure-DP steps' atoms ``a_j`` (mu-GDP's closed form ``G``),
    inverted by bisection in mpmath."""
    from fractions import Fraction

    import mpmath

    e0, d0, sg = 0.008, 0.0010846820657794806, 4.5182
    m = 1 - (1 - Fraction(d0)) ** 2
    delta = float(m) * (1 + rel)
    with mpmath.workdps(50):
        mu, big = mpmath.sqrt(6) / mpmath.mpf(sg), mpmath.mpf(e0)
        pp, pm = 1 / (1 + mpmath.exp(-big)), 1 / (1 + mpmath.exp(big))

        def fin(x):
            def g(t):
                return mpmath.ncdf(-t / mu + mu / 2) - mpmath.exp(t) * mpmath.ncdf(-t / mu - mu / 2)

            terms = (mpmath.binomial(2, j) * pp**j * pm ** (2 - j) * g(x - (2 * j - 2) * big) for j in range(3))
            return (1 - mpmath.mpf(d0)) ** 2 * mpmath.fsum(terms)

        rest = Fraction(delta) - m
        target = mpmath.mpf(rest.numerator) / rest.denominator
        lo, hi = mpmath.mpf(0), mpmath.mpf(64)
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if fin(mid) <= target else (mid, hi)
        exact = float(hi)
    acc = make().compose(tightdp.ApproximateDP(epsilon=e0, delta=d0), 2)
    b = acc.compose(tightdp.Gaussian(noise_multiplier=sg), 6).epsilon(delta)
    assert b.lower <= exact <= b.upper
    assert b.upper - b.lower <= width * exact


def test_snap_keeps_the_mesh_for_a_lattice_far_finer():
    """A subsampled Laplace at rate 8e-7 (its atoms 2.6e-6 apart) beside pure and approximate DP steps: snapping to
    its lattice asked for 23 million cells a step (150 s, 7 GB for one delta query, found by a fuzz); the mesh is
    kept, and the answers stay consistent with the fine mesh's certified ones (recorded from that run); the listing of
    the atoms beside the one bounded step narrows the top one (was [2.3e-9, 2.1e-3] at the kept mesh alone)."""
    acc = ConnectDotsAccountant()
    acc.compose(tightdp.PoissonSampled(mechanism=tightdp.Laplace(scale=0.7966843842869935), sampling_rate=8.095e-07))
    acc.compose(tightdp.PureDP(epsilon=3.568), 4)
    acc.compose(tightdp.ApproximateDP(epsilon=2.268, delta=7.740684382531207e-12), 3)
    acc.compose(tightdp.ApproximateDP(epsilon=2.059, delta=7.616727036722987e-10), 3)
    assert acc._snap(1e-3, acc._directions()) == 1e-3
    b = acc.delta(np.array([0.0, 8.357234982420113, 19.605339500813404, 26.134353007294624, 27.252999745411383]))
    fine_lower = [9.998945e-01, 9.956451e-01, 7.954920e-01, 3.126651e-01, 2.308152e-09]
    fine_upper = [9.998949e-01, 9.956455e-01, 7.954925e-01, 3.126660e-01, 2.966256e-07]
    for lo, up, f_lo, f_up in zip(b.lower, b.upper, fine_lower, fine_upper):
        assert lo <= f_up * (1 + 1e-6) and f_lo * (1 - 1e-6) <= up
    assert b.details["mesh"] > 1e-4
    assert b.upper[-1] < 2e-6 and b.lower[-1] > 1e-7  # the listing with the step beside the atoms
