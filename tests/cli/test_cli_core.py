"""The ``tightdp epsilon`` / ``tightdp delta`` command line."""

import json
import subprocess
import sys

import pytest

import tightdp
from tightdp.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_epsilon_json(capsys):
    code, out, err = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1.0",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
        "--json",
    )
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["accountant"] == "connect-dots" and d["kind"] == "bound"
    e = d["epsilon"]
    assert e["lower"] <= e["estimate"] <= e["upper"] and e["upper"] - e["lower"] <= 0.021
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=1000, delta=1e-5)
    assert e["upper"] == pytest.approx(ref.upper, abs=1e-12)
    assert d["parameters"]["steps"] == 1000


def test_delta_table(capsys):
    code, out, _err = run(
        capsys, "delta", "--noise-multiplier", "1.0", "--sampling-rate", "0.01", "--steps", "100", "--epsilon", "1.0"
    )
    assert code == 0
    assert "delta" in out and "lower" in out and "upper" in out and "time" in out


def test_table_1_of_koskela_2020(capsys):
    _code, out, _ = run(
        capsys,
        "delta",
        "--epsilon",
        "1",
        "--noise-multiplier",
        "1.5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "10000",
        "--relation",
        "remove",
        "--accountant",
        "fourier",
        "--json",
    )
    d = json.loads(out)["delta"]
    assert abs(d["estimate"] - 0.0496014103163) < 1e-7
    assert d["lower"] <= 0.0496014103163 <= d["upper"]


def test_epochs_and_batch_size(capsys):
    _code, out, _ = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1.1",
        "--dataset-size",
        "50000",
        "--batch-size",
        "256",
        "--epochs",
        "2",
        "--delta",
        "1e-5",
        "--json",
    )
    d = json.loads(out)
    # 2 epochs of ceil(50000 / 256) = 196 batches, as Opacus counts them
    assert d["parameters"]["steps"] == 392 and abs(d["parameters"]["sampling_rate"] - 256 / 50000) < 1e-15


def test_without_replacement(capsys):
    code, out, _ = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1.0",
        "--sampling",
        "without-replacement",
        "--dataset-size",
        "10000",
        "--batch-size",
        "100",
        "--steps",
        "200",
        "--delta",
        "1e-5",
        "--json",
    )
    assert code == 0 and json.loads(out)["parameters"]["relation"] == "substitute"


@pytest.mark.parametrize(
    "argv,name",
    [
        (["--noise-multiplier", "0"], "--noise-multiplier"),
        (["--noise-multiplier", "nan"], "--noise-multiplier"),
        (["--sampling-rate", "1.5"], "--sampling-rate"),
        (["--sampling-rate", "0"], "--sampling-rate"),
        (["--delta", "1"], "--delta"),
        (["--delta", "0"], "--delta"),
        (["--steps", "10.5"], "--steps"),
        (["--steps", "0"], "--steps"),
        (["--steps", "abc"], "--steps"),
        (["--sampling", "with-replacement"], "--dataset-size"),  # without replacement needs only q
        (["--relation", "sideways"], "--relation"),
        (["--accountant", "magic"], "--accountant"),
    ],
)
def test_bad_input_one_line_exit_2(capsys, argv, name):
    base = {"--noise-multiplier": "1.0", "--sampling-rate": "0.01", "--steps": "10", "--delta": "1e-5"}
    args = dict(base)
    it = iter(argv)
    for k in it:
        args[k] = next(it)
    flat = ["epsilon"] + [x for kv in args.items() for x in kv]
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(flat))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err and "Traceback" not in err


def test_negative_epsilon_rejected(capsys):
    code, _, err = run(
        capsys, "delta", "--noise-multiplier", "1", "--sampling-rate", "0.1", "--steps", "3", "--epsilon", "-1"
    )
    assert code == 2 and "--epsilon" in err


def test_entry_point_subprocess():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tightdp",
            "epsilon",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.1",
            "--steps",
            "-4",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.strip().startswith("tightdp: error:") and r.stdout == ""


def test_a_closed_pipe_ends_quietly():
    """``tightdp ... | head -1``: the reader closes the pipe early; the command exits 0 with nothing on stderr."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "tightdp", "epsilon", "--noise-multiplier", "1", "--sampling-rate", "0.01"]
    cmd += ["--steps", "100", "--delta", "1e-5"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader goes away before the command writes
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == b"", err
