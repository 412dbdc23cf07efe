"""The MMCC reproduction script (examples/papers/matrix_mmcc.py --quick): C = I against DP-SGD's accounting, the
gradient models' order, and every interval well formed."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_matrix_mmcc_reproduction(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "papers" / "matrix_mmcc.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["key"]: r for r in json.loads((tmp_path / "matrix_mmcc.json").read_text())["rows"]}
    if rows["identity"]["paper"] is not None:  # dp_accounting installed
        assert rows["identity"]["extra"]["inside"]
    for r in rows.values():
        assert 0.0 <= r["extra"]["lower"] <= r["extra"]["upper"]
    # the one-direction model is an extra assumption: never a larger answer
    assert rows["tree_512_15_aligned"]["extra"]["upper"] <= rows["tree_512_15_any"]["extra"]["upper"]
    for key in ("bandmf_16_2", "bandmf_64_16"):
        e = rows[key]["extra"]
        assert e["floor"] <= e["mmcc_any"] and e["mmcc_aligned"] <= e["mmcc_any"]
