"""The one-run audit of a real Opacus run (examples/audit_digits.py), small and fast: the correct
implementation is never flagged, the broken one (the mean's noise scale on the sum) always is."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")
pytest.importorskip("sklearn")

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def _demo():
    path = Path(__file__).parents[2] / "examples" / "audit_digits.py"
    spec = importlib.util.spec_from_file_location("audit_digits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_small_demo_flags_only_the_broken_run(seed):
    demo = _demo()
    kw = dict(canaries=400, steps=6, expected=False)
    good, info = demo.audit(False, seed=seed, **kw)
    bad, _ = demo.audit(True, seed=seed, **kw)
    assert good.verdict == "consistent", good.message
    assert bad.verdict == "violates", bad.message
    assert good.empirical.epsilon_lower <= good.certified_upper
    assert info["sampling_rate"] == pytest.approx(0.5, abs=0.01)
