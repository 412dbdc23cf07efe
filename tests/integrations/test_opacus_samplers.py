"""Opacus with a real PrivacyEngine: samplers no analysis describes are refused, accumulated batches are counted as
logical steps, and the statement names the mechanism that ran (a noisy sum divided by a constant)."""

from __future__ import annotations

import pytest
from _support import scaled

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

import tightdp
from tightdp.errors import TightDPError
from tightdp.integrations.opacus import UnsupportedSamplerError, check_data_loader

pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:Full backward hook", "ignore:Secure RNG", "ignore:Optimal order"),
]
DELTA = 1e-5
N = 64


def _data():
    torch.manual_seed(0)
    x = torch.randn(N, 5)
    return torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long())


def _private(loader, *, engine=None, poisson_sampling=True, sigma=1.0):
    from opacus import PrivacyEngine

    engine = engine or PrivacyEngine(accountant="tightdp")
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=1.0,
        poisson_sampling=poisson_sampling,
    )
    return engine, model, opt, loader


def _loss(model, xb, yb):
    return torch.nn.functional.cross_entropy(model(xb), yb)


# ------------------------------------------------------------------------------------------- refused samplers
@pytest.mark.parametrize("poisson_sampling", [True, False])
def test_weighted_random_sampler_training_run_is_refused(poisson_sampling):
    sampler = torch.utils.data.WeightedRandomSampler(torch.linspace(1.0, 2.0, N), num_samples=16, replacement=True)
    loader = torch.utils.data.DataLoader(_data(), batch_size=4, sampler=sampler)
    with pytest.raises(UnsupportedSamplerError, match=r"WeightedRandomSampler.*non-uniform") as info:
        _private(loader, poisson_sampling=poisson_sampling)
    assert isinstance(info.value, TightDPError) and isinstance(info.value, ValueError)
    assert "data_loader" in str(info.value) and "#813" in str(info.value)
    # make_private_with_epsilon refuses before calibrating
    from opacus import PrivacyEngine

    model = torch.nn.Linear(5, 2)
    with pytest.raises(UnsupportedSamplerError, match="WeightedRandomSampler"):
        PrivacyEngine(accountant="tightdp").make_private_with_epsilon(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=loader,
            target_epsilon=3.0,
            target_delta=DELTA,
            epochs=1,
            max_grad_norm=1.0,
            poisson_sampling=poisson_sampling,
        )


def test_the_refusal_reason_is_what_opacus_does_with_a_weighted_sampler():
    """Without tightdp, Opacus silently replaces the weighted sampler by uniform Poisson sampling at rate
    1 / len(data_loader) = batch_size / num_samples (here 4 / 16), not batch_size / N (4 / 64)."""
    from opacus import PrivacyEngine

    sampler = torch.utils.data.WeightedRandomSampler(torch.linspace(1.0, 2.0, N), num_samples=16, replacement=True)
    loader = torch.utils.data.DataLoader(_data(), batch_size=4, sampler=sampler)
    _, _, opt, dp_loader = _private(loader, engine=PrivacyEngine(accountant="rdp"))
    assert dp_loader.sample_rate == pytest.approx(0.25) and pytest.approx(0.0625) == 4 / N
    assert (
        type(
            dp_loader.batch_sampler.sampler if hasattr(dp_loader.batch_sampler, "sampler") else dp_loader.batch_sampler
        ).__name__
        != "WeightedRandomSampler"
    )  # the weights are gone
    assert opt.expected_batch_size == 16  # N * 1/4: not the batch of 4 the user asked for


def test_custom_samplers_are_refused_naming_the_class():
    class EveryOther(torch.utils.data.Sampler):
        def __iter__(self):
            return iter(range(0, N, 2))

        def __len__(self):
            return N // 2

    class Pairs:
        def __iter__(self):
            return iter([[i, i + 1] for i in range(0, N, 2)])

        def __len__(self):
            return N // 2

    data = _data()
    for loader, name in [
        (torch.utils.data.DataLoader(data, batch_size=4, sampler=EveryOther()), "EveryOther"),
        (torch.utils.data.DataLoader(data, batch_sampler=Pairs()), "Pairs"),
        (
            torch.utils.data.DataLoader(
                data, batch_size=4, sampler=torch.utils.data.RandomSampler(data, replacement=True)
            ),
            "replacement=True",
        ),
    ]:
        for poisson in (True, False):
            with pytest.raises(UnsupportedSamplerError, match=name):
                check_data_loader(loader, poisson_sampling=poisson)
            with pytest.raises(UnsupportedSamplerError, match=name):
                _private(loader, poisson_sampling=poisson)
    # the loaders every analysis describes still pass
    assert (
        check_data_loader(torch.utils.data.DataLoader(data, batch_size=4, shuffle=True), poisson_sampling=False)
        == "shuffle"
    )
    assert check_data_loader(torch.utils.data.DataLoader(data, batch_size=4), poisson_sampling=True) == "fixed-order"


# ------------------------------------------------------------------------------------ gradient accumulation
def _count_updates(opt):
    """Count the parameter updates (noise additions) independently of the accountant."""
    calls = {"n": 0}
    inner = opt.original_optimizer.step

    def step(*a, **k):
        calls["n"] += 1
        return inner(*a, **k)

    opt.original_optimizer.step = step
    return calls


def test_batch_memory_manager_counts_logical_steps_at_the_logical_rate():
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    loader = torch.utils.data.DataLoader(_data(), batch_size=16)  # Poisson at rate 16 / 64 after make_private
    engine, model, opt, dp_loader = _private(loader)
    updates, physical = _count_updates(opt), 0
    for _ in range(2):
        with BatchMemoryManager(data_loader=dp_loader, max_physical_batch_size=4, optimizer=opt) as mem_loader:
            for xb, yb in mem_loader:
                physical += 1
                opt.zero_grad()
                _loss(model, xb, yb).backward()
                opt.step()
    logical = updates["n"]
    assert logical >= 8 and physical > logical  # each logical batch of ~16 came in physical batches of <= 4
    assert engine.accountant.history == [(1.0, 0.25, logical)]
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.25, steps=logical, delta=DELTA)
    assert engine.get_epsilon(DELTA) == ref.upper
    assert engine.accountant.get_bounds(DELTA).details["mechanism"].startswith("Poisson-subsampled Gaussian")


@pytest.mark.parametrize("how", ["backward", "skip"])
def test_accumulated_shuffled_batches_are_logical_steps(how):
    """k = 2 physical shuffled batches of 8 per optimizer step: 4 logical batches of 16 per epoch."""
    loader = torch.utils.data.DataLoader(_data(), batch_size=8, shuffle=True)
    with pytest.warns(UserWarning, match="not Poisson-sampled"):
        engine, model, opt, loader = _private(loader, poisson_sampling=False)
    updates = _count_updates(opt)
    for _ in range(2):
        for i, (xb, yb) in enumerate(loader):
            if how == "skip":
                opt.zero_grad()
                if i % 2 == 0:
                    opt.signal_skip_step(do_skip=True)
            _loss(model, xb, yb).backward()
            if how == "skip" or i % 2 == 1:
                opt.step()
                if how == "backward":
                    opt.zero_grad()
    assert updates["n"] == 8
    assert engine.accountant.history == [(1.0, 0.25, 8)]
    ref = tightdp.shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=4, epochs=2, delta=DELTA)
    with pytest.warns(UserWarning, match="Poisson accounting would claim"):
        assert engine.get_epsilon(DELTA) == ref.upper
    b = engine.accountant.get_bounds(DELTA)
    assert b.lower == ref.lower and "accumulated from 2 physical batches" in b.details["mechanism"]
    # counting physical batches as steps (8 per epoch, 16 steps) would have claimed 4 epochs, not 2
    assert tightdp.shuffle_epsilon(noise_multiplier=1.0, steps_per_epoch=8, epochs=4, delta=DELTA).upper > ref.upper


def test_accumulation_that_straddles_epochs_is_refused():
    loader = torch.utils.data.DataLoader(_data(), batch_size=8, shuffle=True)  # 8 batches per epoch
    with pytest.warns(UserWarning, match="not Poisson-sampled"):
        engine, model, opt, loader = _private(loader, poisson_sampling=False)
    for i, (xb, yb) in enumerate(loader):
        _loss(model, xb, yb).backward()
        if i % 3 == 2:  # 3 does not divide 8
            opt.step()
            opt.zero_grad()
    with pytest.raises(UnsupportedSamplerError, match="straddles"):
        engine.get_epsilon(DELTA)


def test_skipped_steps_over_poisson_batches_are_refused():
    """Two independent Poisson batches summed into one noise addition: not a Poisson batch at any rate."""
    loader = torch.utils.data.DataLoader(_data(), batch_size=16)
    engine, model, opt, dp_loader = _private(loader)
    for i, (xb, yb) in enumerate(dp_loader):
        opt.zero_grad()
        if i % 2 == 0:
            opt.signal_skip_step(do_skip=True)
        _loss(model, xb, yb).backward()
        opt.step()
    with pytest.raises(UnsupportedSamplerError, match="signal_skip_step"):
        engine.get_epsilon(DELTA)
    fresh = type(engine.accountant)()
    fresh.load_state_dict(engine.accountant.state_dict())  # the refusal survives a checkpoint
    with pytest.raises(UnsupportedSamplerError, match="signal_skip_step"):
        fresh.get_epsilon(DELTA)


# ------------------------------------------------------------------------------------ the mechanism that ran
def test_the_noisy_sum_is_divided_by_the_constant_expected_batch_size():
    """Reproduce one DPOptimizer step: grad = (sum of clipped per-example gradients + N(0, (sigma C)^2)) / B with
    B = expected_batch_size fixed before training, whatever the realised Poisson batch size; the statement says
    so, and its interval is dpsgd_epsilon's."""
    from opacus.optimizers.optimizer import _generate_noise

    loader = torch.utils.data.DataLoader(_data(), batch_size=16)
    engine, model, opt, dp_loader = _private(loader, sigma=1.3)
    assert opt.expected_batch_size == 16 and opt.loss_reduction == "mean"
    sizes = set()
    for xb, yb in dp_loader:
        if len(xb) == 0:
            continue
        sizes.add(len(xb))
        opt.zero_grad()
        _loss(model, xb, yb).backward()
        params = opt.params
        norms = torch.stack([p.grad_sample.reshape(len(xb), -1).norm(dim=1) for p in params]).norm(dim=0)
        factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        clipped = [torch.einsum("i,i...->...", factor, p.grad_sample) for p in params]
        gen = torch.Generator().manual_seed(7)
        opt.generator = torch.Generator().manual_seed(7)
        noise = [_generate_noise(std=1.3, reference=c, generator=gen) for c in clipped]
        assert opt.pre_step()
        for p, c, z in zip(params, clipped, noise):
            torch.testing.assert_close(p.grad * 16, c + z, rtol=1e-5, atol=1e-5)
        opt.original_optimizer.step()
    assert len(sizes) > 1  # the realised Poisson batch sizes vary; the divisor stayed 16 in every step
    steps = engine.accountant.steps
    b = engine.accountant.get_bounds(DELTA)
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.3, sampling_rate=0.25, steps=steps, delta=DELTA)
    assert (b.lower, b.upper) == (ref.lower, ref.upper)
    text = b.details["mechanism"]
    assert "Poisson-subsampled Gaussian" in text and "rate 0.25" in text
    assert "expected_batch_size * accumulated_iterations (16 * 1)" in text and "post-processing" in text


def test_adaptive_clipping_is_refused():
    """AdaClip adapts the clipping norm to the data: not the subsampled Gaussian on a fixed-norm sum."""
    from opacus import PrivacyEngine

    engine = PrivacyEngine(accountant="tightdp")
    model = torch.nn.Linear(5, 2)
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=torch.utils.data.DataLoader(_data(), batch_size=16),
        noise_multiplier=1.0,
        max_grad_norm=1.0,
        clipping="adaptive",
        target_unclipped_quantile=0.5,
        clipbound_learning_rate=0.2,
        max_clipbound=10.0,
        min_clipbound=0.1,
        unclipped_num_std=5.0,
    )
    assert type(opt).__name__.startswith("AdaClip")
    for xb, yb in loader:
        opt.zero_grad()
        _loss(model, xb, yb).backward()
        opt.step()
    with pytest.raises(UnsupportedSamplerError, match="AdaClip"):
        engine.get_epsilon(DELTA)


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(deadline=None, max_examples=scaled(8))  # each example runs several certified shuffle bounds
@given(logical=st.integers(1, 12), k=st.integers(1, 5), steps=st.integers(1, 40), sigma=st.floats(0.8, 8.0))
def test_accumulated_steps_are_shuffled_batches_of_k_times_the_size(logical, k, steps, sigma):
    """At random parameters: k of the t = logical * k physical shuffled batches per optimizer step make `logical`
    shuffled batches per epoch: the interval is shuffle_epsilon's for them, the epochs counted up (upper) and
    down (lower); a k that does not divide t is refused."""
    from tightdp.integrations.opacus import TightDPAccountant

    t = logical * k
    acc = TightDPAccountant()
    acc.sampling, acc.loader_facts = "shuffle", {"batches": t, "dataset_size": 4 * t, "batch_size": 4}
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=k / t)
    b = acc.get_bounds(DELTA)
    up = tightdp.shuffle_epsilon(
        noise_multiplier=sigma, steps_per_epoch=logical, epochs=-(-steps // logical), delta=DELTA
    )
    assert b.upper == up.upper
    if steps >= logical:
        down = tightdp.shuffle_epsilon(
            noise_multiplier=sigma, steps_per_epoch=logical, epochs=steps // logical, delta=DELTA
        )
        assert b.lower == down.lower
    else:
        assert b.lower == 0.0
    if k > 1:
        straddling = TightDPAccountant()
        straddling.sampling, straddling.loader_facts = "shuffle", {"batches": t + 1}
        straddling.step(noise_multiplier=sigma, sample_rate=k / (t + 1))
        with pytest.raises(UnsupportedSamplerError, match="straddles"):
            straddling.get_epsilon(DELTA)
