"""A new user's experience: the commands a user types, run in-process."""

import json
import math

import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tightdp
from tightdp._accuracy import DEFAULT_REL_ERROR, REL_ERROR_FLOOR
from tightdp.calibration import calibrate_noise
from tightdp.cli import join_negative_values, main

CIFAR = ["--dataset-size", "50000", "--batch-size", "256", "--epochs", "100", "--delta", "1e-5"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ------------------------------------------------------------- 1. calibrate and epsilon agree
def test_calibrate_then_epsilon_recheck_meets_the_target(capsys):
    code, out, err = run(capsys, "calibrate", "--target-epsilon", "1", *CIFAR, "--json")
    assert code == 0 and err == ""
    cal = json.loads(out)
    assert (cal["eps_error"], cal["rel_error"]) == (REL_ERROR_FLOOR, DEFAULT_REL_ERROR)
    assert "--noise-multiplier" in cal["recheck"] and "--eps-error" not in cal["recheck"]  # the default accuracy
    printed = f"{cal['noise_multiplier']:.6g}"  # the digits the text output shows
    assert float(printed) == cal["noise_multiplier"]  # already rounded (up) to them
    code, out, _ = run(capsys, "epsilon", "--noise-multiplier", printed, *CIFAR, "--json")
    assert code == 0
    again = json.loads(out)
    assert again["eps_error"] is None and again["rel_error"] is None and again["accuracy"].startswith("relative")
    assert again["epsilon"]["upper"] <= 1.0
    # the text output names the accuracy and the re-check command
    code, out, _ = run(capsys, "calibrate", "--target-epsilon", "1", *CIFAR)
    assert code == 0 and "accuracy: certified at relative 0.001" in out and "re-check: tightdp epsilon" in out
    # an absolute accuracy is certified at, and re-checked with, that accuracy
    code, out, _ = run(capsys, "calibrate", "--target-epsilon", "1", *CIFAR, "--eps-error", "0.01", "--json")
    cal = json.loads(out)
    assert code == 0 and (cal["eps_error"], cal["rel_error"]) == (0.01, None) and "--eps-error 0.01" in cal["recheck"]


@pytest.mark.slow
@settings(max_examples=scaled(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log_target=st.floats(math.log(0.2), math.log(20.0)),
    log_q=st.floats(math.log(1e-3), math.log(0.1)),
    steps=st.integers(1, 3000),
)
def test_calibrated_noise_rechecked_at_defaults_never_exceeds_target(log_target, log_q, steps):
    """dpsgd_epsilon at its default accuracy on the calibrated noise is <= target."""
    target, q = math.exp(log_target), math.exp(log_q)
    cal = calibrate_noise(target_epsilon=target, delta=1e-5, sampling_rate=q, steps=steps)
    assert (cal.eps_error, cal.rel_error) == (REL_ERROR_FLOOR, DEFAULT_REL_ERROR)
    again = tightdp.dpsgd_epsilon(noise_multiplier=cal.noise_multiplier, sampling_rate=q, steps=steps, delta=1e-5)
    assert again.upper <= target


def test_tightness_line_uses_a_lower_bound(capsys):
    code, out, _ = run(
        capsys,
        "calibrate",
        "--solve",
        "steps",
        "--noise-multiplier",
        "1.1",
        "--target-epsilon",
        "8",
        "--delta",
        "1e-5",
        "--dataset-size",
        "50000",
        "--batch-size",
        "256",
    )
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("tight"))
    assert "epsilon >= " in line and "lower bound" in line and "epsilon <=" not in line


# ------------------------------------------------------------- 2. uncertifiable answers exit 1
def test_uncertifiable_answer_exits_1_with_its_note(capsys, monkeypatch):
    """An infinite upper bound (what the Fourier accountant gave on the CIFAR run at L = 12) is printed
    with its note, and the command exits 1 with one line saying why."""
    from tightdp.bounds import Bounds
    from tightdp.cli import common, query_cmd

    class Stub:
        name = "fourier"

        def compose(self, mech, steps):
            return self

        def epsilon(self, delta):
            return Bounds(
                0.0,
                3.516,
                math.inf,
                "epsilon",
                "bound",
                {"note": "the composition window ended before delta was reached"},
            )

    monkeypatch.setattr(query_cmd, "make_accountant", lambda args: Stub())
    for extra in ([], ["--json"]):
        code, out, err = run(capsys, "epsilon", "--noise-multiplier", "1.1", *CIFAR, "--accountant", "fourier", *extra)
        assert code == 1
        assert "composition window" in out  # the table / JSON still shows what is known, with the note
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "no certified upper bound" in lines[0] and "composition window" in lines[0]
    assert common is not None


@pytest.mark.slow
def test_fourier_on_the_cifar_run_now_certifies(capsys):
    code, out, err = run(capsys, "epsilon", "--noise-multiplier", "1.1", *CIFAR, "--accountant", "fourier", "--json")
    up = json.loads(out)["epsilon"]["upper"]
    assert (code == 0 and up is not None and math.isfinite(up)) or (code == 1 and err.count("\n") == 1)


@pytest.mark.slow
def test_uncertifiable_tiny_delta_exits_1(capsys):
    code, _, err = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1.1",
        "--dataset-size",
        "50000",
        "--batch-size",
        "256",
        "--epochs",
        "100",
        "--delta",
        "1e-300",
    )
    assert code == 1 and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------- 3. hopeless calibrations refused at once
def test_huge_target_refused_at_once(capsys):
    code, _, err = run(
        capsys, "calibrate", "--target-epsilon", "1000", "--delta", "1e-5", "--sampling-rate", "0.01", "--steps", "1000"
    )
    assert code == 2 and err.count("\n") == 1 and "--target-epsilon" in err


# ------------------------------------------------------------- 4. conflicting options
@pytest.mark.parametrize(
    "argv, names",
    [
        (
            ["--sampling-rate", "0.02", "--dataset-size", "1000", "--batch-size", "10", "--steps", "100"],
            ("--sampling-rate", "conflicts"),
        ),
        (["--dataset-size", "1000", "--batch-size", "10", "--epochs", "3", "--steps", "100"], ("--steps", "--epochs")),
    ],
)
@pytest.mark.parametrize("command", ["epsilon", "compare", "calibrate"])
def test_conflicting_options_refused(capsys, command, argv, names):
    extra = ["--target-epsilon", "3"] if command == "calibrate" else ["--noise-multiplier", "1"]
    code, _, err = run(capsys, command, *extra, *argv, "--delta", "1e-5")
    assert code == 2 and err.count("\n") == 1
    assert all(n in err for n in names)


def test_agreeing_options_accepted(capsys):
    a = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--dataset-size",
        "1000",
        "--batch-size",
        "10",
        "--epochs",
        "3",
        "--steps",
        "300",
        "--delta",
        "1e-5",
        "--json",
    )
    b = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "300",
        "--delta",
        "1e-5",
        "--json",
    )
    assert a[0] == b[0] == 0
    assert json.loads(a[1])["epsilon"] == json.loads(b[1])["epsilon"]


def test_without_replacement_from_the_rate_alone(capsys):
    base = [
        "--noise-multiplier",
        "1",
        "--sampling",
        "without-replacement",
        "--steps",
        "500",
        "--delta",
        "1e-5",
        "--json",
    ]
    a = run(capsys, "epsilon", *base, "--sampling-rate", "0.01")
    b = run(capsys, "epsilon", *base, "--dataset-size", "60000", "--batch-size", "600")
    assert a[0] == b[0] == 0, a[2]
    assert json.loads(a[1])["epsilon"] == json.loads(b[1])["epsilon"]


# ------------------------------------------------------------- 5. file-system problems: one line, exit 2
def test_report_unwritable_out(tmp_path, capsys):
    cfg = tmp_path / "ok.json"
    cfg.write_text(
        json.dumps(
            {
                "training": {"dataset_size": 1000, "batch_size": 100, "epochs": 1, "noise_multiplier": 2.0},
                "report": {"accountants": ["rdp"], "plots": False},
            }
        )
    )
    code, out, err = run(capsys, "report", str(cfg), "--out", "/proc/forbidden")
    assert code == 2 and err.count("\n") == 1 and "--out" in err and out == ""


def test_compare_plot_in_missing_directory(capsys):
    code, out, err = run(
        capsys,
        "compare",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "10",
        "--delta",
        "1e-5",
        "--accountants",
        "rdp",
        "--plot",
        "/nonexistent/dir/x.png",
    )
    assert code == 2 and err.count("\n") == 1 and "--plot" in err and out == ""  # refused before any work


# ------------------------------------------------------------- 7. smaller items
def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and tightdp.__version__ in capsys.readouterr().out


@pytest.mark.parametrize(
    "command, extra",
    [
        ("epsilon", ["--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "10"]),
        ("calibrate", ["--target-epsilon", "1", "--sampling-rate", "0.01", "--steps", "10"]),
    ],
)
def test_negative_delta_is_named(capsys, command, extra):
    code, _, err = run(capsys, command, *extra, "--delta", "-1e-5")
    assert code == 2 and err.count("\n") == 1 and "--delta" in err and "expected one argument" not in err


def test_join_negative_values():
    assert join_negative_values(["--delta", "-1e-5", "--json"]) == ["--delta=-1e-5", "--json"]
    assert join_negative_values(["--delta", "--json"]) == ["--delta", "--json"]


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--target-epsilon", "-3", "--delta", "1e-5", "--sampling-rate", "0.01", "--steps", "10"], "--target-epsilon"),
        (
            [
                "--target-epsilon",
                "3",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "0.01",
                "--steps",
                "10",
                "--eps-error",
                "0",
            ],
            "--eps-error",
        ),
        (
            [
                "--solve",
                "steps",
                "--noise-multiplier",
                "0",
                "--target-epsilon",
                "3",
                "--delta",
                "1e-5",
                "--sampling-rate",
                "0.01",
            ],
            "--noise-multiplier",
        ),
    ],
)
def test_calibrate_errors_name_the_option(capsys, argv, name):
    code, _, err = run(capsys, "calibrate", *argv)
    assert code == 2 and err.count("\n") == 1 and name in err
    assert "target_epsilon" not in err and "noise_multiplier" not in err


def test_compare_json_plot_includes_the_curve(tmp_path, capsys):
    png = tmp_path / "c.png"
    code, out, _ = run(
        capsys,
        "compare",
        "--noise-multiplier",
        "1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "100",
        "--delta",
        "1e-5",
        "--accountants",
        "connect-dots,rdp",
        "--json",
        "--plot",
        str(png),
        "--points",
        "3",
    )
    assert code == 0 and png.exists()
    rows = json.loads(out)
    for r in rows:
        c = r["curve"]
        assert c["steps"][0] == 1 and c["steps"][-1] == 100 and len(c["upper"]) == len(c["steps"])
    assert rows[0]["curve"]["upper"][-1] == pytest.approx(rows[0]["epsilon"]["upper"])
