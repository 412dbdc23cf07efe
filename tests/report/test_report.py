"""``tightdp report``: config parsing, the report's content, its files, progress, and the CLI."""

from __future__ import annotations

import io
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import tightdp
from tightdp.cli import main
from tightdp.report import ReportConfig, build_report, load_config
from tightdp.report.compute import _Progress

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "report_config.toml"

SMALL = """
title = "small run"
[training]
dataset_size = 1000
batch_size = 100
epochs = 3
noise_multiplier = 2.0
[privacy]
deltas = [1e-5, 1e-6]
target_epsilons = [2.0]
[report]
accountants = ["prv", "rdp", "gdp"]
formats = ["markdown", "html"]
"""


def small_config(tmp_path, text=SMALL, name="run.toml") -> ReportConfig:
    p = tmp_path / name
    p.write_text(text)
    return load_config(p)


# ------------------------------------------------------------------------ config
def test_example_config_parses():
    c = load_config(EXAMPLE)
    assert c.is_training and len(c.segments) == 1
    s = c.segments[0]
    assert (s.noise_multiplier, s.sampling_rate) == (1.1, 256 / 50000)
    assert c.steps_per_epoch == 196 and s.steps == 19600  # ceil(50000/256) = 196 per epoch
    assert c.deltas == (1e-5, 1e-6)


def test_json_config_equals_toml(tmp_path):
    toml_cfg = small_config(tmp_path)
    import tomllib

    data = tomllib.loads(SMALL)
    p = tmp_path / "run.json"
    p.write_text(json.dumps(data))
    assert load_config(p).segments == toml_cfg.segments
    assert load_config(p).deltas == toml_cfg.deltas


def test_schedule_and_events(tmp_path):
    c = small_config(
        tmp_path,
        """
[training]
dataset_size = 1000
batch_size = 100
[[training.schedule]]
noise_multiplier = 2.0
epochs = 2
[[training.schedule]]
noise_multiplier = 1.0
steps = 5
sampling_rate = 0.05
""",
    )
    assert [(s.noise_multiplier, s.sampling_rate, s.steps) for s in c.segments] == [(2.0, 0.1, 20), (1.0, 0.05, 5)]
    assert c.total_steps == 25
    assert [n for _, n in c.ledger(upto=22)] == [20, 2]
    e = small_config(
        tmp_path,
        """
[[events]]
mechanism = { type = "gaussian", noise_multiplier = 3.0 }
count = 4
[[events]]
mechanism = { type = "laplace", scale = 10.0 }
""",
        name="ev.toml",
    )
    assert [(m, n) for m, n in e.events] == [
        (tightdp.Gaussian(noise_multiplier=3.0), 4),
        (tightdp.Laplace(scale=10.0), 1),
    ]


@pytest.mark.parametrize(
    "text, name",
    [
        ("[training]\ndataset_size = 10\nbatch_size = 20\nepochs = 1\nnoise_multiplier = 1.0", "batch_size"),
        ("[training]\nsampling_rate = 0.1\nepochs = 1\nnoise_multiplier = -1.0", "noise_multiplier"),
        ("[training]\nsampling_rate = 1.5\nsteps = 1\nnoise_multiplier = 1.0", "sampling_rate"),
        ("[training]\nsampling_rate = 0.1\nsteps = 1.5\nnoise_multiplier = 1.0", "steps"),
        ("[training]\nsampling_rate = 0.1\nsteps = 1\nepochs = 1\nnoise_multiplier = 1.0", "epochs"),
        ("[training]\nsampling_rate = 0.1\nsteps = 10\nnoise_multiplier = 1.0\n[privacy]\ndeltas = [0.0]", "deltas"),
        ("[training]\nsampling_rate = 0.1\nsteps = 10\nnoise_multiplier = 1.0\n[privacy]\ndelta = 2.0", "delta"),
        ("[training]\nsampling_rate = 0.1\nsteps = 10\nnoise_multiplier = 1.0\nbogus = 1", "bogus"),
        (
            "[training]\nsampling_rate = 0.1\nsteps = 10\nnoise_multiplier = 1.0\n[report]\naccountants = ['nope']",
            "accountants",
        ),
        ("title = 'no run'", "training"),
        ("[[events]]\nmechanism = { type = 'gaussian', noise_multiplier = 0.0 }", "noise_multiplier"),
        ("[training\n", "cannot parse"),
    ],
)
def test_bad_config_names_the_key(tmp_path, text, name):
    with pytest.raises(ValueError, match=name):
        small_config(tmp_path, text)


# ------------------------------------------------------------------------ report
def test_small_report_content_and_files(tmp_path, capsys):
    cfg = small_config(tmp_path)
    rep = build_report(cfg)
    assert capsys.readouterr().out == ""  # silent when stdout is not a terminal
    prv = next(r for r in rep.results if r.name == "prv")
    for d in cfg.deltas:
        ref = tightdp.dpsgd_epsilon(noise_multiplier=2.0, sampling_rate=0.1, steps=30, delta=d, accountant="prv")
        assert prv.bounds[d].upper == pytest.approx(ref.upper, rel=1e-9)
        lo, up = rep.band[d]
        assert lo <= up and up <= ref.upper + 1e-12  # band: the tightest certified interval
        rdp = next(r for r in rep.results if r.name == "rdp").bounds[d]
        assert up <= rdp.upper
    (hint,) = [h for h in rep.calibration if "noise_multiplier" in h]
    assert hint["epsilon_upper"] <= 2.0
    files = rep.write(tmp_path / "out")
    for key in ("markdown", "html", "json", "plot_epsilon_vs_delta", "plot_epsilon_over_training"):
        assert files[key].is_file() and files[key].stat().st_size > 0
    md = files["markdown"].read_text()
    assert "## Certified band" in md and "plots/epsilon_vs_delta.png" in md and "## Calibration hints" in md
    html = files["html"].read_text()
    assert html.count("data:image/png;base64,") == 3  # self-contained: both epsilon figures and the trade-off
    assert "dataset.images" in html and "naturalWidth" in html  # the load check a headless browser reads
    data = json.loads(files["json"].read_text())
    assert data["certified_band"][repr(1e-5)]["upper"] == rep.band[1e-5][1]


def test_parallel_workers_give_identical_results(tmp_path):
    cfg = small_config(tmp_path, SMALL.replace("target_epsilons = [2.0]", "target_epsilons = [2.0]\ngroup_sizes = [2]"))
    one = build_report(cfg, workers=1)
    two = build_report(cfg, workers=2)
    assert one.band == two.band
    values = lambda rep: [(r.name, {d: tuple(b) for d, b in r.bounds.items()}) for r in rep.results]
    assert values(one) == values(two)
    assert one.calibration == two.calibration and one.groups == two.groups
    assert one.training_curve == two.training_curve and one.curve == two.curve
    with pytest.raises(ValueError, match="workers"):
        build_report(cfg, workers=0)


def test_events_report_and_no_plots(tmp_path):
    cfg = small_config(
        tmp_path,
        """
[[events]]
mechanism = { type = "gaussian", noise_multiplier = 3.0 }
count = 4
[privacy]
delta = 1e-6
[report]
accountants = ["prv", "rdp"]
plots = false
formats = ["markdown"]
""",
    )
    rep = build_report(cfg)
    files = rep.write(tmp_path / "o")
    assert "markdown" in files and "html" not in files and not (tmp_path / "o" / "plots").exists()
    # truth: 4 Gaussians at sigma 3 are exactly mu-GDP with mu = 2/3
    from scipy import optimize, special

    mu = 2.0 / 3.0
    f = lambda e: special.ndtr(-e / mu + mu / 2) - math.exp(e) * special.ndtr(-e / mu - mu / 2) - 1e-6
    exact = optimize.brentq(f, 0, 50)
    lo, up = rep.band[1e-6]
    assert lo <= exact <= up
    assert "training runs" in rep.calibration_note


def test_group_section(tmp_path, monkeypatch):
    text = SMALL.replace("target_epsilons = [2.0]", "target_epsilons = []\ngroup_sizes = [2]")
    cfg = small_config(tmp_path, text)
    rep = build_report(cfg)
    from tightdp.report.hints import _group_functions

    fn, _ = _group_functions()
    if fn is not None:
        b = fn(group_size=2, noise_multiplier=2.0, sampling_rate=0.1, steps=30, delta=1e-5)
        assert rep.groups[0]["epsilon"][repr(1e-5)] == pytest.approx(b.upper)
        assert rep.groups[0]["epsilon"][repr(1e-5)] > rep.band[1e-5][1]  # a group costs more than one example
    monkeypatch.setattr("tightdp.report.hints._group_functions", lambda: (None, None))
    rep2 = build_report(cfg)
    assert rep2.groups == [] and "does not provide" in rep2.group_note
    assert "Group privacy" in rep2.to_markdown()


def test_progress_bar_only_on_terminal():
    class FakeTTY(io.StringIO):
        def isatty(self):
            return True

    quiet = io.StringIO()
    p = _Progress(3, stream=quiet, delay=0.0)
    for _ in range(3):
        p.advance("x")
    p.close()
    assert quiet.getvalue() == "" and not p.enabled
    tty = FakeTTY()
    p = _Progress(3, stream=tty, delay=0.0)
    assert p.enabled
    pytest.importorskip("rich")
    for _ in range(3):
        p.advance("working")
    p.close()
    assert "working" in tty.getvalue() or tty.getvalue() != ""
    fast = FakeTTY()
    p = _Progress(3, stream=fast, delay=60.0)  # work that finishes within the delay shows nothing
    p.advance("x")
    p.close()
    assert fast.getvalue() == ""


# ------------------------------------------------------------------------ CLI
def test_cli_report(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(SMALL.replace("target_epsilons = [2.0]", "target_epsilons = []"))
    out = tmp_path / "rep"
    assert main(["report", str(cfg), "--out", str(out), "--format", "markdown", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "epsilon <=" in printed and (out / "report.md").is_file() and not (out / "report.html").exists()


def test_cli_report_bad_config(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[training]\nsampling_rate = 0.1\nsteps = 10\nnoise_multiplier = 0.0\n")
    assert main(["report", str(cfg), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "noise_multiplier" in err[0]
    assert main(["report", str(tmp_path / "missing.toml")]) == 2


@pytest.mark.slow
def test_shipped_example_report(tmp_path):
    """The demo: the shipped CIFAR-10-like config produces the report and both plots."""
    out = tmp_path / "demo"
    assert main(["report", str(EXAMPLE), "--out", str(out)]) == 0
    for f in (
        "report.md",
        "report.html",
        "report.json",
        "plots/epsilon_vs_delta.png",
        "plots/epsilon_over_training.png",
    ):
        assert (out / f).is_file() and (out / f).stat().st_size > 0
    data = json.loads((out / "report.json").read_text())
    band = data["certified_band"][repr(1e-5)]
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=256 / 50000, steps=19600, delta=1e-5)
    assert band["lower"] <= ref.upper and band["upper"] <= ref.upper + 1e-12
    assert 3.3 < band["upper"] < 3.7  # published PRV/PLD values for this run are about 3.5
    names = {a["name"] for a in data["accountants"]}
    assert {"prv", "rdp"} <= names
    hints = [h for h in data["calibration"] if "noise_multiplier" in h]
    assert len(hints) == 3 and all(h["epsilon_upper"] <= h["target_epsilon"] for h in hints)


# ---------------------------------------------------------------------------------- content
def test_dense_curves_band_and_guarantee(tmp_path):
    rep = build_report(small_config(tmp_path))
    c = rep.curve
    assert len(c["delta"]) >= 50 and min(c["delta"]) <= 1e-10 and max(c["delta"]) >= 0.1
    dense = c["series"]["rdp (bound)"]
    assert sum(v is not None for v in dense) >= 50
    prv = c["series"]["prv (bound)"]
    assert sum(v is not None for v in prv) == 2  # about a second per query: the configured deltas only
    lo, up = c["band"]
    for d, a, b, v in zip(c["delta"], lo, up, prv):
        assert b is not None and (a is None or a <= b), d  # rdp's upper bound everywhere
        if v is not None:
            assert a is not None and a <= v  # a lower end wherever prv (the only lower bound here) answered
    assert all(x >= y for x, y in itertools.pairwise(up))  # monotone: an upper bound at a smaller delta holds
    assert all(x >= y for x, y in zip([v for v in lo if v is not None], [v for v in lo if v is not None][1:]))
    for d, u in zip(c["delta"], up):  # and still certified: at least the exact epsilon of this run
        assert u >= tightdp.dpsgd_epsilon(noise_multiplier=2.0, sampling_rate=0.1, steps=30, delta=d).lower - 1e-9
    tc = rep.training_curve
    assert tc["x_label"] == "epochs" and tc["steps"] == [10, 20, 30]  # every epoch (3 epochs of 10 steps)
    assert tc["band"][1][-1] == pytest.approx(rep.band[1e-5][1], rel=1e-9)
    md = rep.to_markdown()
    assert "## What this guarantees" in md and "Hyper-parameter tuning" in md and "Sampling: Poisson" in md
    assert f"ε ≤ {rep.band[1e-5][1]:#.4g}" in md  # the number to publish, in the guarantee paragraph


def test_tradeoff_curve_is_certified_from_the_band(tmp_path):
    """The report's trade-off curve lies below every (eps_upper(delta), delta) guarantee of the band and is
    non-increasing; for 30 steps of sigma 2 at q = 0.1 it stays below the mu-GDP curve of the full-batch run."""
    from scipy.special import ndtr, ndtri

    rep = build_report(small_config(tmp_path))
    a = np.array(rep.tradeoff["alpha"])
    b = np.array(rep.tradeoff["beta"])
    assert a[0] == 0 and a[-1] == 1 and np.all(np.diff(b) <= 1e-15) and np.all((b >= 0) & (b <= 1))
    for d, up in zip(rep.curve["delta"], rep.curve["band"][1]):
        # the curve's points are the band's own guarantees: beta >= 1 - d - e^up alpha holds with equality nowhere
        # above it, i.e. the curve is the envelope (within rounding)
        assert np.all(b >= 1 - d - np.exp(up) * a - 1e-12)
    full_batch = ndtr(ndtri(1 - a) - np.sqrt(30) / 2.0)  # no subsampling: a weaker guarantee than q = 0.1
    assert np.all(b >= full_batch - 1e-9)


def test_not_applicable_rows_are_fast_and_sized(tmp_path):
    cfg = small_config(
        tmp_path,
        """
[[events]]
mechanism = { type = "pure_dp", epsilon = 0.5 }
count = 3
[privacy]
deltas = [1e-6, 1e-7]
[report]
accountants = ["connect-dots", "rdp", "edgeworth"]
plots = false
formats = ["markdown"]
""",
    )
    import time

    t0 = time.perf_counter()
    rep = build_report(cfg)
    assert time.perf_counter() - t0 < 10
    rdp = next(r for r in rep.results if r.name == "rdp")
    assert rdp.not_applicable and not rdp.bounds
    md = rep.to_markdown()
    table = md.split("## Epsilon by accountant")[1].split("## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len({line.count(" | ") for line in rows}) == 1  # every row has as many cells as the header
    assert any("| rdp | not applicable |" in line for line in rows)
