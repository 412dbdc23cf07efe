# Quick start: `make demo` and `make test` each create .venv, install what they need and run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# install --no-compile, then compileall on both cores: pip byte-compiles every installed file on one core (all of
# PyTorch; ~50 s of a fresh `make test`). Bytecode writing stays on in every recipe even where the environment turns
# it off (PYTHONDONTWRITEBYTECODE): tightdp itself is installed editable, and each test subprocess compiled it again
COMPILE := $(BIN)/python -m compileall -q -j 0
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint bench clean reproduce docs benchmarks-md

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# core + plotting: enough for the demo
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(PIP) install --no-compile -e '.[plot,progress]'
	$(COMPILE) $(VENV)/lib >/dev/null || true  # (as pip: files for newer Pythons, e.g. in torch/testing, do not compile)
	touch $@

# everything the test suite uses: peers, hypothesis, mpmath, PyTorch (CPU wheel), Opacus and the docs tools
# (tests/docs/test_docs_site.py builds the site)
# chromium renders the report's HTML in tests/report/test_report_browser.py: installed where it is missing and apt-get
# can (root); otherwise that test skips, and this step never fails the target
$(VENV)/.test: pyproject.toml | $(BIN)/python
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
			|| echo "chromium not installed: tests/report/test_report_browser.py will skip"; fi
	$(PIP) install --no-compile torch==2.13.0
	$(PIP) install --no-compile -e '.[test,plot,progress,torch,opacus,dask,docs]'
	$(COMPILE) $(VENV)/lib >/dev/null || true  # (as pip: files for newer Pythons, e.g. in torch/testing, do not compile)
	touch $@

# the main job: certified epsilon of a CIFAR-10-like DP-SGD run, then the full privacy report for it
demo: $(VENV)/.core
	$(BIN)/tightdp epsilon --noise-multiplier 1.1 --dataset-size 50000 --batch-size 256 --epochs 100 --delta 1e-5
	$(BIN)/tightdp report examples/report_config.toml --out demo-report

# the whole suite on both cores (pytest-xdist); CI runs this
test: lint
	$(BIN)/python -m pytest -q -n 2

# the habits CI keeps: ruff's lint and format, and mypy --strict over src/tightdp (configured in pyproject.toml)
lint: $(VENV)/.test
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs
	$(BIN)/python -m mypy

# the edit-test loop: every module's tests without the slow, peer and torch ones, few hypothesis examples
test-fast: $(VENV)/.test
	HYPOTHESIS_PROFILE=fast $(BIN)/python -m pytest -q -n 2 -m "not slow and not peers and not torch"

bench: $(VENV)/.test
	$(BIN)/python benchmarks/bench_core.py --quick

# each paper's tables and figures recomputed (examples/papers/, Markdown + PNG in examples/papers/out/);
# peers (dp_accounting, prv_accountant, fourier_accountant, jax_privacy) are compared where installed (make test
# installs them); without them the peer columns stay empty
reproduce: $(VENV)/.core
	for p in p001_fourier p003_prv p004_edgeworth p000_individual p002_group matrix_mechanisms matrix_mmcc tuning_papernot_steinke; do \
		$(BIN)/python examples/papers/$$p.py || exit 1; done

# the documentation site (mkdocs-material + mkdocstrings + markdown-exec): every code block runs, every figure is
# drawn by the build, strict mode (a broken link, a docstring warning or a failing example fails it); open site/index.html
$(VENV)/.docs: pyproject.toml | $(BIN)/python
	$(PIP) install --no-compile -e '.[docs]'
	$(COMPILE) $(VENV)/lib >/dev/null || true  # (as pip: files for newer Pythons, e.g. in torch/testing, do not compile)
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# BENCHMARKS.md from benchmarks/results/*.json (each benchmark script writes its results file there;
# tests/docs/test_benchmarks_md.py checks the file is up to date)
benchmarks-md:
	$(PYTHON) benchmarks/render_benchmarks_md.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis demo-report site
