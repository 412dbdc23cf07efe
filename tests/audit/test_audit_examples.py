"""The audit's example scripts: the Steinke et al. idealised table and the docs picture."""

import importlib.util
from pathlib import Path

import pytest

from tightdp.audit import gdp_epsilon, gdp_mu_for

EXAMPLES = Path(__file__).parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_idealised_one_run_bound_grows_with_canaries_and_stays_below_the_truth():
    fig = _load("audit_steinke_figure")
    for eps in (2.0, 8.0):
        assert gdp_epsilon(gdp_mu_for(eps, 1e-5), 1e-5) == pytest.approx(eps, rel=1e-9)
        vals = [fig.idealised_bound(eps, m) for m in (30, 300, 3000)]
        assert vals[0] <= vals[1] <= vals[2] < eps
        assert vals[2] > 0.3 * eps if eps == 2.0 else vals[2] > 2.5


@pytest.mark.slow
def test_docs_figure_script(tmp_path):
    pytest.importorskip("matplotlib")
    _load("audit_docs_figure").main(["--out", str(tmp_path)])
    table = (tmp_path / "empirical_vs_certified.md").read_text()
    assert (tmp_path / "empirical_vs_certified.png").stat().st_size > 10_000
    assert table.count("\n") == 2 + 6 and "(> upper)" in table
