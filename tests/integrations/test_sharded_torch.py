"""Data-parallel DP-SGD with torch.distributed (gloo, CPU, 2 processes), each rank
recording its own examples into its shard of a ShardedLedger, saved per shard + manifest."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from tightdp.individual import ShardedLedger

N, STEPS, SIGMA, C, Q = 24, 6, 1.0, 0.5, 0.3


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(N, 5, generator=g), torch.randint(0, 3, (N,), generator=g)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))


def _rank(rank: int, world: int, root: str) -> None:
    import torch.distributed as dist

    from tightdp.integrations.torch import IndividualDPTrainer

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{root}/pg", rank=rank, world_size=world)
    try:
        x, y = _data()
        ledger = ShardedLedger(
            num_examples=N, noise_multiplier=SIGMA, clip_norm=C, sampling_rate=Q, shard_size=N // world, num_buckets=20
        )
        s, e = ledger.shard_ranges[rank]
        model = _model()
        tr = IndividualDPTrainer(
            model,
            torch.nn.functional.cross_entropy,
            torch.optim.SGD(model.parameters(), lr=0.1),
            ledger.shard(rank),
            seed=100 + rank,
            data_parallel=True,
        )
        for _ in range(STEPS):
            tr.step(x[s:e], y[s:e])
        name = ledger.save_shard(root, rank, generation=1)
        names = [None] * world
        dist.all_gather_object(names, name)
        dist.barrier()
        if rank == 0:
            ledger.write_manifest(root, names, generation=1)
        torch.save([p.detach().clone() for p in model.parameters()], os.path.join(root, f"params-{rank}.pt"))
        dist.barrier()  # both ranks leave together: a rank tearing gloo down while its peer still works can abort
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two processes importing torch: ~10 s on 2 busy cores
def test_two_rank_gloo_training_records_into_the_sharded_ledger(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(2, str(tmp_path)), nprocs=2, join=True)
    ledger = ShardedLedger.load(tmp_path)
    assert ledger.steps == STEPS and ledger.shard_ranges == [(0, 12), (12, 24)]
    counts = ledger.counts()
    assert np.all(counts.sum(axis=1) == STEPS)
    # every example was recorded with its own (positive) norm at every step
    assert np.all(counts[:, 0] == 0)
    eps = ledger.epsilons(1e-5)
    assert np.all(np.isfinite(eps.upper)) and np.all(eps.lower <= eps.upper)
    # both ranks applied the same all-reduced noisy gradient: identical models
    p0 = torch.load(tmp_path / "params-0.pt")
    p1 = torch.load(tmp_path / "params-1.pt")
    assert all(torch.equal(a, b) for a, b in zip(p0, p1))
    assert not all(torch.equal(a, b) for a, b in zip(p0, list(_model().parameters())))  # it trained
    with pytest.raises(ValueError, match="data_parallel"):
        from tightdp.integrations.torch import IndividualDPTrainer

        m = _model()
        IndividualDPTrainer(
            m,
            torch.nn.functional.cross_entropy,
            torch.optim.SGD(m.parameters(), lr=0.1),
            ShardedLedger(num_examples=4, noise_multiplier=SIGMA, clip_norm=C, sampling_rate=Q).shard(0),
            data_parallel=True,
        )
