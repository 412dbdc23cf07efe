"""tightdp.integrations.torch: per-sample norms, the filtered training loop, and the digits example."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from tightdp.individual import IndividualAccountant, gdp_mu
from tightdp.integrations.torch import IndividualDPTrainer, per_sample_grad_norms

ROOT = Path(__file__).resolve().parents[2]


def _setup(n=40, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    x = torch.randn(n, 5)
    y = torch.randint(0, 3, (n,))
    return model, x, y


def test_per_sample_norms_match_autograd_loop():
    model, x, y = _setup(12)
    f = torch.nn.functional.cross_entropy
    norms = per_sample_grad_norms(model, f, x, y, chunk=5)
    for i in range(12):
        model.zero_grad()
        f(model(x[i : i + 1]), y[i : i + 1]).backward()
        ref = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters())).item()
        assert norms[i] == pytest.approx(ref, rel=1e-5)


def test_trainer_records_norms_and_applies_filter():
    model, x, y = _setup(30)
    f = torch.nn.functional.cross_entropy
    sigma, C, delta = 10.0, 0.5, 1e-5
    acc = IndividualAccountant(num_examples=30, noise_multiplier=sigma, clip_norm=C, sampling_rate=1.0)
    budget = (1.0, delta)
    tr = IndividualDPTrainer(model, f, torch.optim.SGD(model.parameters(), lr=0.1), acc, budget=budget, seed=1)
    actives = []
    for _ in range(40):
        norms_before = per_sample_grad_norms(model, f, x, y)
        info = tr.step(x, y)
        np.testing.assert_allclose(info["norms"], norms_before, rtol=1e-6)
        actives.append(info["active"])
    assert acc.steps == 40
    assert actives[0] == 30 and actives[-1] < 30  # the filter kicked in
    assert np.all(acc.mus() <= gdp_mu(epsilon=budget[0], delta=budget[1]) * (1 + 1e-12))
    assert np.all(acc.epsilons(delta).upper <= budget[0] * (1 + 1e-9))


def test_trainer_dpsgd_poisson_and_bad_input():
    model, x, y = _setup(25)
    f = torch.nn.functional.cross_entropy
    acc = IndividualAccountant(num_examples=25, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.2)
    tr = IndividualDPTrainer(model, f, torch.optim.SGD(model.parameters(), lr=0.1), acc, seed=3)
    batches = [tr.step(x, y)["batch"] for _ in range(20)]
    assert 0 < np.mean(batches) < 25
    e = acc.epsilons(1e-5).upper
    assert np.all(e <= acc.worst_case_epsilon(1e-5).upper * (1 + 1e-9))
    with pytest.raises(ValueError, match="all 25"):
        tr.step(x[:10], y[:10])
    with pytest.raises(ValueError, match="budget"):
        IndividualDPTrainer(model, f, torch.optim.SGD(model.parameters(), lr=0.1), acc, budget=(1.0, 2.0))


def test_example_runs_with_tiny_settings(tmp_path):
    out = tmp_path / "ex"
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "individual_dpsgd.py"),
            "--out",
            str(out),
            "--epochs",
            "1",
            "--gd-steps",
            "3",
            "--batch-size",
            "128",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert set(s["dpsgd"]["per_class"]) == {str(c) for c in range(10)}
    for c in s["dpsgd"]["per_class"].values():
        assert 0 <= c["mean_epsilon"] <= s["dpsgd"]["worst_case_epsilon"] * (1 + 1e-9)
        assert 0 <= c["test_accuracy"] <= 1
    assert s["filtered_dpgd"]["max_epsilon"] <= s["filtered_dpgd"]["budget_epsilon"] * (1 + 1e-9)
    assert (out / "epsilon_histogram.png").stat().st_size > 1000
    assert (out / "filtered_dpgd.png").stat().st_size > 1000
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "individual_dpsgd.py"), "--out", str(out), "--epochs", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "epochs" in r.stderr
