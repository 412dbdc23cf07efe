"""Opacus drop-in: ``PrivacyEngine(accountant="tightdp")`` reports tightdp's certified epsilon."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

import tightdp
from tightdp.integrations import opacus as tdp_opacus
from tightdp.integrations.opacus import TightDPAccountant, get_noise_multiplier

pytestmark = pytest.mark.torch
DELTA = 1e-5


def test_registered_with_opacus():
    from opacus.accountants import create_accountant

    acc = create_accountant("tightdp")
    assert isinstance(acc, TightDPAccountant) and acc.mechanism() == "tightdp"
    assert isinstance(acc, opacus.accountants.IAccountant)
    tdp_opacus.register()  # idempotent


def test_history_and_epsilon_equal_dpsgd_epsilon():
    acc = TightDPAccountant()
    assert acc.get_epsilon(DELTA) == 0.0 and len(acc) == 0
    for _ in range(50):
        acc.step(noise_multiplier=1.0, sample_rate=0.02)
    assert acc.history == [(1.0, 0.02, 50)] and len(acc) == 1 and acc.steps == 50
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.02, steps=50, delta=DELTA)
    assert acc.get_epsilon(DELTA) == ref.upper
    b = acc.get_bounds(DELTA)
    assert b.lower <= b.upper and b.kind == "bound"


def test_heterogeneous_history_composes_segments():
    acc = TightDPAccountant()
    for _ in range(30):
        acc.step(noise_multiplier=1.0, sample_rate=0.02)
    for _ in range(20):
        acc.step(noise_multiplier=2.0, sample_rate=0.05)
    for _ in range(10):
        acc.step(noise_multiplier=1.0, sample_rate=0.02)
    assert acc.history == [(1.0, 0.02, 30), (2.0, 0.05, 20), (1.0, 0.02, 10)] and acc.steps == 60
    from tightdp.accountants import DEFAULT_ACCOUNTANT, create
    from tightdp.dpsgd import dpsgd_mechanism

    ref = (
        create(DEFAULT_ACCOUNTANT)
        .compose(
            [
                (dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.02), 40),
                (dpsgd_mechanism(noise_multiplier=2.0, sampling_rate=0.05), 20),
            ]
        )
        .epsilon(DELTA)
    )
    eps = acc.get_epsilon(DELTA)
    assert eps == ref.upper
    # more noise for some steps: between the all-sigma=1 and the first segment alone
    only_first = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.02, steps=40, delta=DELTA).upper
    assert only_first < eps


def test_state_dict_round_trip(tmp_path):
    acc = TightDPAccountant(eps_error=0.02)
    for _ in range(7):
        acc.step(noise_multiplier=1.3, sample_rate=0.1)
    acc.step(noise_multiplier=0.9, sample_rate=0.1)
    state = acc.state_dict()
    path = tmp_path / "acc.pt"
    torch.save(state, path)
    fresh = TightDPAccountant()
    fresh.load_state_dict(torch.load(path, weights_only=False))
    assert fresh.history == acc.history and fresh.eps_error == 0.02
    assert fresh.get_epsilon(DELTA) == acc.get_epsilon(DELTA)
    with pytest.raises(ValueError, match="mechanism"):
        fresh.load_state_dict({"history": [], "mechanism": "rdp"})
    with pytest.raises(ValueError, match="history"):
        fresh.load_state_dict({"history": [(1.0, 2.0, 3)], "mechanism": "tightdp"})
    assert fresh.history == acc.history  # a failed load changes nothing


def test_bad_input():
    acc = TightDPAccountant()
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.step(noise_multiplier=0.0, sample_rate=0.1)
    with pytest.raises(ValueError, match="sample_rate"):
        acc.step(noise_multiplier=1.0, sample_rate=float("nan"))
    assert acc.history == []
    acc.step(noise_multiplier=1.0, sample_rate=0.1)
    with pytest.raises(ValueError, match="delta"):
        acc.get_epsilon(1.5)


def _toy_training(engine, *, epochs=2, target_epsilon=None, noise_multiplier=1.0):
    torch.manual_seed(0)
    x = torch.randn(64, 5)
    y = (x[:, 0] > 0).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if target_epsilon is None:
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=noise_multiplier, max_grad_norm=1.0
        )
    else:
        model, opt, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=opt,
            data_loader=loader,
            target_epsilon=target_epsilon,
            target_delta=DELTA,
            epochs=epochs,
            max_grad_norm=1.0,
        )
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            opt.step()
    return opt


def test_short_training_run_reports_tightdp_epsilon():
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    assert isinstance(engine.accountant, TightDPAccountant)
    _toy_training(engine, epochs=2, noise_multiplier=1.0)
    hist = engine.accountant.history
    assert len(hist) == 1 and hist[0][0] == 1.0 and hist[0][1] == pytest.approx(0.25)
    steps = hist[0][2]
    assert steps == 8  # 2 epochs of 4 expected batches
    eps = engine.get_epsilon(DELTA)
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=hist[0][1], steps=steps, delta=DELTA)
    assert eps == ref.upper
    # a fresh engine restored from the accountant's state reports the same
    other = PrivacyEngine(accountant="tightdp")
    other.accountant.load_state_dict(engine.accountant.state_dict())
    assert other.get_epsilon(DELTA) == eps


def test_make_private_with_epsilon_calibrates_safely():
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    opt = _toy_training(engine, epochs=2, target_epsilon=3.0)
    sigma = opt.noise_multiplier
    spent = engine.get_epsilon(DELTA)
    assert spent <= 3.0  # certified: the run stays within the target
    assert spent >= 3.0 - 0.05  # and Opacus' bisection on our epsilon is close to it
    ours = get_noise_multiplier(target_epsilon=3.0, target_delta=DELTA, sample_rate=0.25, epochs=2)
    # tightdp's calibration is as tight as Opacus' loop on our epsilon, up to the jitter of the certified
    # upper bound in sigma (the accountant's mesh moves with sigma; the bound's width is <= 0.02)
    assert ours <= sigma * (1 + 1e-3)
    assert (
        tightdp.dpsgd_epsilon(noise_multiplier=ours, sampling_rate=0.25, steps=8, delta=DELTA, eps_error=0.01).upper
        <= 3.0 + 0.02
    )


def test_get_noise_multiplier_dropin():
    from opacus.accountants.utils import get_noise_multiplier as opacus_gnm

    s = get_noise_multiplier(target_epsilon=2.0, target_delta=DELTA, sample_rate=0.01, steps=500)
    cal = tightdp.calibrate_noise(target_epsilon=2.0, delta=DELTA, sampling_rate=0.01, steps=500)
    assert cal.noise_multiplier <= s <= cal.noise_multiplier * 1.01
    acc = TightDPAccountant()
    acc.history = [(s, 0.01, 500)]
    assert acc.get_epsilon(DELTA) <= 2.0
    # other accountant names go to Opacus' own function
    assert get_noise_multiplier(
        target_epsilon=2.0, target_delta=DELTA, sample_rate=0.01, steps=500, accountant="rdp"
    ) == opacus_gnm(target_epsilon=2.0, target_delta=DELTA, sample_rate=0.01, steps=500, accountant="rdp")
    with pytest.raises(ValueError, match="steps and epochs"):
        get_noise_multiplier(target_epsilon=2.0, target_delta=DELTA, sample_rate=0.01)


def test_install_calibration_makes_make_private_with_epsilon_tight(monkeypatch):
    import opacus.privacy_engine as pe
    from opacus import PrivacyEngine

    monkeypatch.setattr(pe, "get_noise_multiplier", pe.get_noise_multiplier)  # restored after the test
    tdp_opacus.install_calibration()
    assert pe.get_noise_multiplier is get_noise_multiplier
    engine = PrivacyEngine(accountant="tightdp")
    opt = _toy_training(engine, epochs=2, target_epsilon=3.0)
    cal = tightdp.calibrate_noise(target_epsilon=3.0, delta=DELTA, sampling_rate=0.25, steps=8)
    assert cal.noise_multiplier <= opt.noise_multiplier <= cal.noise_multiplier * 1.01
    assert engine.get_epsilon(DELTA) <= 3.0  # exactly what the engine reports is within the target
    # other accountants still go through Opacus' own calibration
    rdp_engine = PrivacyEngine(accountant="rdp")
    _toy_training(rdp_engine, epochs=1, target_epsilon=3.0)
    assert rdp_engine.get_epsilon(DELTA) <= 3.0


# ---------------------------------------------------------------------- which sampling the DataLoader performs
def _loader(**kw):
    torch.manual_seed(0)
    x = torch.randn(64, 5)
    y = (x[:, 0] > 0).long()
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, **kw)


def _train(engine, loader, *, epochs=2, poisson_sampling=True):
    model = torch.nn.Sequential(torch.nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        poisson_sampling=poisson_sampling,
    )
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    return loader


@pytest.mark.filterwarnings("ignore:Full backward hook", "ignore:Secure RNG")
def test_shuffled_loader_is_accounted_as_shuffling_not_poisson():
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    with pytest.warns(UserWarning, match="not Poisson-sampled"):
        _train(engine, _loader(shuffle=True), poisson_sampling=False)
    acc = engine.accountant
    assert acc.sampling == "shuffle" and acc.history == [(1.0, 0.25, 8)]
    ref = tightdp.shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=4, epochs=2, delta=DELTA)
    poisson = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.25, steps=8, delta=DELTA)
    with pytest.warns(UserWarning, match="Poisson accounting would claim"):
        eps = engine.get_epsilon(DELTA)
    assert eps == ref.upper and acc.get_bounds(DELTA).lower == ref.lower
    assert ref.lower > poisson.upper  # here Poisson's figure is certifiably an under-report
    # the state carries the sampling; a fresh accountant restored from it reports the same
    fresh = TightDPAccountant()
    fresh.load_state_dict(acc.state_dict())
    assert fresh.sampling == "shuffle" and fresh.get_bounds(DELTA).upper == eps
    with pytest.raises(ValueError, match="sampling"):
        fresh.load_state_dict({"history": [], "mechanism": "tightdp", "tightdp": {"sampling": "bins"}})


@pytest.mark.filterwarnings("ignore:Full backward hook", "ignore:Secure RNG")
def test_poisson_loader_and_other_accountants_are_unchanged():
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    _train(engine, _loader(shuffle=True))  # Opacus replaces it by its DPDataLoader
    assert engine.accountant.sampling == "poisson"
    steps = engine.accountant.steps
    assert (
        engine.get_epsilon(DELTA)
        == tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.25, steps=steps, delta=DELTA).upper
    )
    other = PrivacyEngine(accountant="prv")
    _train(other, _loader(shuffle=True), poisson_sampling=False)  # no tightdp accountant: nothing observed
    assert other.get_epsilon(DELTA) > 0


@pytest.mark.filterwarnings("ignore:tightdp")
def test_fixed_order_mid_epoch_and_unknown_samplers():
    # fixed order: each example in one known step per epoch, so the no-amplification bound is exact
    acc = TightDPAccountant()
    assert acc.observe_data_loader(_loader(shuffle=False)) == "fixed-order"
    for _ in range(8):
        acc.step(noise_multiplier=2.0, sample_rate=0.25)
    b = acc.get_bounds(DELTA)
    gauss = tightdp.ConnectDotsAccountant().compose(tightdp.Gaussian(noise_multiplier=2.0), 2).epsilon(DELTA)
    assert b.upper == gauss.upper and b.lower == gauss.lower
    # mid-epoch (5 steps of 4 per epoch): epochs counted up for the upper end, down for the lower end
    shuf = TightDPAccountant()
    shuf.observe_data_loader(_loader(shuffle=True))
    for _ in range(5):
        shuf.step(noise_multiplier=1.0, sample_rate=0.25)
    b = shuf.get_bounds(DELTA)
    assert b.upper == tightdp.shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=4, epochs=2, delta=DELTA).upper
    assert b.lower == tightdp.shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=4, epochs=1, delta=DELTA).lower
    # a sampler no analysis describes: refused, never the Poisson figure
    weird = TightDPAccountant()
    sampler = torch.utils.data.WeightedRandomSampler([1.0] * 64, 64)
    assert weird.observe_data_loader(_loader(sampler=sampler)) == "unknown"
    weird.step(noise_multiplier=1.0, sample_rate=0.25)
    with pytest.raises(ValueError, match="data_loader"):
        weird.get_epsilon(DELTA)


@pytest.mark.filterwarnings("ignore:Full backward hook", "ignore:Secure RNG")
def test_make_private_with_epsilon_calibrates_for_shuffled_batches():
    """poisson_sampling=False keeps a shuffled loader: the noise is calibrated for shuffled batches, so the
    epsilon the accountant reports after the planned epochs meets the target (Opacus' Poisson calibration
    picked a noise whose shuffle epsilon was far above it)."""
    from opacus import PrivacyEngine

    from tightdp.integrations.opacus import shuffle_noise_multiplier

    target, epochs = 1.0, 2
    engine = PrivacyEngine(accountant="tightdp")
    model = torch.nn.Sequential(torch.nn.Linear(5, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="not Poisson-sampled"):
        model, opt, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=opt,
            data_loader=_loader(shuffle=True),
            target_epsilon=target,
            target_delta=DELTA,
            epochs=epochs,
            max_grad_norm=1.0,
            poisson_sampling=False,
        )
    sigma = opt.noise_multiplier
    assert sigma == shuffle_noise_multiplier(
        target_epsilon=target, target_delta=DELTA, steps_per_epoch=4, epochs=epochs
    )
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    with pytest.warns(UserWarning, match="Poisson accounting would claim"):
        eps = engine.get_epsilon(DELTA)
    assert eps <= target
    # the smallest such noise, to 0.1 %: a little less noise misses the target
    below = tightdp.shuffle_epsilon(noise_multiplier=sigma / 1.003, steps_per_epoch=4, epochs=epochs, delta=DELTA)
    assert below.upper > target
    # Poisson calibration for the same run, as Opacus does: its shuffle epsilon is far above the target
    poisson_sigma = tightdp.calibrate_noise(
        target_epsilon=target, delta=DELTA, sampling_rate=0.25, steps=4 * epochs
    ).noise_multiplier
    assert (
        tightdp.shuffle_epsilon(noise_multiplier=poisson_sigma, steps_per_epoch=4, epochs=epochs, delta=DELTA).upper
        > 1.5 * target
    )
    # a sampler no analysis describes is refused before training
    weird = PrivacyEngine(accountant="tightdp")
    sampler = torch.utils.data.WeightedRandomSampler([1.0] * 64, 64)
    with pytest.raises(ValueError, match="data_loader"):
        weird.make_private_with_epsilon(
            module=torch.nn.Sequential(torch.nn.Linear(5, 2)),
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=_loader(sampler=sampler),
            target_epsilon=target,
            target_delta=DELTA,
            epochs=epochs,
            max_grad_norm=1.0,
            poisson_sampling=False,
        )


def test_calibration_never_returns_a_noise_whose_reported_epsilon_misses_the_target():
    """The 0.1 % steps after the calibration stop at twenty; then it refuses instead of returning the noise."""
    from types import SimpleNamespace

    from tightdp.calibration import CalibrationError
    from tightdp.integrations._opacus_calibration import _as_reported

    assert _as_reported(1.0, 2.0, lambda s: SimpleNamespace(upper=2.0 / s * 1.0005)) == pytest.approx(1.001)
    with pytest.raises(CalibrationError, match="still reports"):
        _as_reported(1.0, 2.0, lambda s: SimpleNamespace(upper=3.0))
