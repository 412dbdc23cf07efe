"""The sharded per-example ledger (routing, bit-identical queries on a dask
LocalCluster from the sorted cluster copy, shards saved by workers, crash-safe save / load / resume)."""

import os

import numpy as np
import pytest

from tightdp.individual import IndividualAccountant
from tightdp.individual.sharded import ShardedLedger

N, SHARD, Q, B = 3000, 1100, 0.02, 8


def _record_both(steps=300, policy="worst-case", seed=0):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.05, 1.5, size=N)
    one = IndividualAccountant(
        num_examples=N, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=Q, num_buckets=B, missing_norms=policy
    )
    sh = ShardedLedger(
        num_examples=N,
        noise_multiplier=1.0,
        clip_norm=1.0,
        sampling_rate=Q,
        shard_size=SHARD,
        num_buckets=B,
        missing_norms=policy,
    )
    for t in range(steps):
        if t % 3 == 2:  # a sparse step: Poisson batch, global indices in any order
            idx = rng.permutation(np.nonzero(rng.random(N) < 0.1)[0])
            g = scale[idx] * rng.lognormal(0, 0.3, size=idx.size)
            one.record_step(g, indices=idx)
            sh.record_step(g, indices=idx)
        else:
            g = scale * rng.lognormal(0, 0.3, size=N)
            one.record_step(g)
            sh.record_step(g)
    return one, sh


def test_routing_reproduces_the_in_memory_ledger():
    one, sh = _record_both(policy="last-seen")
    assert sh.shard_ranges == [(0, 1100), (1100, 2200), (2200, 3000)] and sh.steps == one.steps
    np.testing.assert_array_equal(sh.counts(), one.bucket_counts)
    assert sh.to_accountant() == one
    np.testing.assert_array_equal(
        np.concatenate([sh.shard(k).approximated_steps for k in range(3)]), one.approximated_steps
    )
    with pytest.raises(ValueError, match="indices"):
        sh.record_step([0.1, 0.2], indices=[5, N])
    with pytest.raises(ValueError, match="k must"):
        sh.shard(3)
    assert sh.steps == one.steps  # the refused step recorded nothing in any shard


def test_in_memory_queries_identical():
    one, sh = _record_both()
    a, b = one.epsilons(1e-5), sh.epsilons(1e-5)
    assert np.array_equal(a.upper, b.upper) and np.array_equal(a.lower, b.lower)
    assert np.array_equal(one.deltas(1.0).upper, sh.deltas(1.0).upper)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.mark.slow  # a few seconds on a quiet 2-core machine; ~25 s at load average 7
def test_dask_cluster_bit_identical(client, tmp_path):
    one, sh = _record_both()
    ref = one.epsilons(1e-5)
    got = sh.epsilons(1e-5, use_dask=True)
    assert np.array_equal(ref.upper, got.upper) and np.array_equal(ref.lower, got.lower)
    # out of core: the shards stay in their files, the workers read them
    # the sorted copy stays in the workers' memory: a second query reuses it, recording replaces it
    copy = sh._cluster
    assert copy is not None and not np.array_equal(copy[2], np.arange(N))  # really permuted
    assert np.array_equal(one.deltas(0.8).upper, sh.deltas(0.8, use_dask=True).upper)
    assert sh._cluster is copy
    sh.release()
    assert sh._cluster is None
    # out of core: the shards stay in their files, the workers read them
    sh.save(tmp_path)
    lazy = ShardedLedger.load(tmp_path, lazy=True).persist()
    assert all(a is None for a in lazy._shards)  # nothing of the ledger came into this process
    got = lazy.epsilons(1e-5, use_dask=True)
    assert np.array_equal(ref.upper, got.upper) and np.array_equal(ref.lower, got.lower)
    g = np.random.default_rng(5).gamma(2.0, 0.3, size=N)
    one.record_step(g)
    lazy.record_step(g)
    assert np.array_equal(one.deltas(0.8).upper, lazy.deltas(0.8, use_dask=True).upper)
    assert lazy._cluster is not copy and lazy._cluster[0][3] == one.steps


@pytest.mark.slow
def test_chunks_follow_row_contents_not_positions():
    """The property the sorted cluster copy relies on: permuting the examples (identical rows kept in
    their order) permutes every answer bit for bit, including rows whose variance keys tie."""
    rng = np.random.default_rng(3)
    n, steps = 300, 300
    norms = rng.uniform(0.02, 1.3, size=N)[None, :n] * rng.lognormal(0, 0.3, size=(steps, n))
    norms[:, n // 2 :] = norms[:, : n - n // 2]  # half the examples are copies of the other half
    norms[:, :50] = np.where(rng.random((steps, 50)) < 0.5, 0.01, 0.9)  # rows tying on a zero-weight bucket
    uniq, inv = np.unique(norms.T, axis=0, return_inverse=True)
    perm = np.argsort(rng.random(len(uniq))[inv.reshape(-1)], kind="stable")  # copies keep their order
    a = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=Q, num_buckets=B)
    b = IndividualAccountant(num_examples=n, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=Q, num_buckets=B)
    a.record_steps(norms)
    b.record_steps(norms[:, perm])
    ra, rb = a.epsilons(1e-5), b.epsilons(1e-5)
    assert np.array_equal(ra.upper[perm], rb.upper) and np.array_equal(ra.lower[perm], rb.lower)
    assert np.array_equal(a.deltas(0.5).upper[perm], b.deltas(0.5).upper)


def test_from_shards_assembles_shards_saved_elsewhere(tmp_path):
    one, sh = _record_both(steps=20)
    files = []
    for k, (_s, _e) in enumerate(sh.shard_ranges):  # as data-parallel ranks / dask workers would
        sh.shard(k).save(tmp_path / f"rank{k}.npz")
        files.append(f"rank{k}.npz")
    got = ShardedLedger.from_shards(tmp_path, files, generation=4)
    assert all(a is None for a in got._shards) and got.shard_ranges == sh.shard_ranges and got.steps == 20
    assert got.to_accountant() == one
    again = ShardedLedger.load(tmp_path)
    assert again == sh and again._generation == 4
    other = IndividualAccountant(num_examples=10, noise_multiplier=2.0, clip_norm=1.0, sampling_rate=Q, num_buckets=B)
    other.save(tmp_path / "odd.npz")
    with pytest.raises(ValueError, match="differs from the first shard"):
        ShardedLedger.from_shards(tmp_path, files + ["odd.npz"])
    with pytest.raises(ValueError, match="not a saved IndividualAccountant"):
        ShardedLedger.from_shards(tmp_path, ["manifest.json"])
    with pytest.raises(ValueError, match="files must name"):
        ShardedLedger.from_shards(tmp_path, [])
    assert ShardedLedger.load(tmp_path) == sh  # the refused calls left the manifest as it was


def test_crash_mid_save_keeps_previous_ledger_and_resume_works(tmp_path, monkeypatch):
    one, sh = _record_both(steps=12)
    sh.save(tmp_path)
    saved = ShardedLedger.load(tmp_path)
    assert saved == sh
    rng = np.random.default_rng(9)
    g = rng.gamma(2.0, 0.3, size=N)
    sh.record_step(g)
    one.record_step(g)
    real = IndividualAccountant.save
    calls = {"n": 0}

    def crash_on_second(self, path):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("simulated crash")
        return real(self, path)

    monkeypatch.setattr(IndividualAccountant, "save", crash_on_second)
    with pytest.raises(OSError, match="simulated"):
        sh.save(tmp_path)
    monkeypatch.setattr(IndividualAccountant, "save", real)
    back = ShardedLedger.load(tmp_path)
    assert back == saved and back.steps == 12  # the previous generation, intact
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # resume from the loaded ledger: record the lost step again, save, load
    back.record_step(g)
    back.save(tmp_path)
    again = ShardedLedger.load(tmp_path)
    assert again.steps == 13 and again.to_accountant() == one
    assert sorted(f for f in os.listdir(tmp_path) if f.startswith("shard-")) == [
        f"shard-{k:05d}-g2.npz" for k in range(3)
    ]  # the crashed save's generation, redone


def test_load_rejects_broken_manifest(tmp_path):
    _, sh = _record_both(steps=3)
    sh.save(tmp_path)
    os.unlink(tmp_path / "shard-00001-g1.npz")
    with pytest.raises(ValueError, match="missing"):
        ShardedLedger.load(tmp_path)
    with pytest.raises(ValueError, match="manifest"):
        ShardedLedger.load(tmp_path / "nowhere")
