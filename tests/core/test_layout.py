"""The package's layout: no import cycles, every module importable on its own, one public API list,
every process-wide memo registered with ``tightdp._caches`` (so ``clear_caches`` imports nothing)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tightdp

SRC = Path(tightdp.__file__).resolve().parent

#: The package's layers, bottom first: a unit (a top-level module or subpackage of tightdp; ``tightdp`` is the
#: package's own ``__init__``) may import only units of lower layers, so no circle can form between packages and
#: no arrow runs back up. A new module or package must be placed here.
LAYERS: list[set[str]] = [
    {"errors", "_caches", "_validation", "_blas", "_version", "_types", "bounds"},
    {"_numerics", "_accuracy"},
    {"_gdp_math"},  # the mu-GDP curve and its certified inversions
    {"losses", "_calibration_search"},  # privacy loss random variables; the generic calibration search
    {"pld"},  # discretisation and composition of losses
    {"mechanisms"},  # what ran, as dominating pairs of losses
    {"accountants"},
    {"_tuning_rdp", "_tuning_profile", "_tuning_lower", "_mechanism_epsilon"},  # tuning bounds on a curve / profile
    {"schemes", "individual", "tuning", "tradeoff"},  # accounting functions of whole runs
    {"sampling"},  # the run description: sampling schemes
    {"runs", "matrix"},
    {"dpsgd", "group", "calibration"},
    {"statement"},
    {"audit", "integrations"},
    {"tightdp"},  # the public API
    {"report"},
    {"cli"},
    {"__main__"},
]

#: lru_caches not yet registered with tightdp._caches (remove an entry once registered; a test below checks the
#: entries still exist, so the list cannot go stale).
KNOWN_UNREGISTERED: set[tuple[str, str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in sorted(SRC.rglob("*.py")):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _targets(module: str, is_pkg: bool, node: ast.AST) -> list[str]:
    """The tightdp modules an import statement loads (``from .pkg import name``: the submodule if it is one)."""
    out = []
    if isinstance(node, ast.Import):
        out = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        out = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]
    return [t for t in out if t in MODULES]


def import_graph(*, top_level_only: bool) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over src/tightdp (``top_level_only``: executed at import time)."""
    graph = {}
    for name, (path, is_pkg) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = _top_level_imports(tree) if top_level_only else ast.walk(tree)
        graph[name] = {t for n in nodes for t in _targets(name, is_pkg, n)} - {name}
    return graph


def _top_level_imports(tree: ast.Module):
    """Imports run when the module is imported: module body, including ``if``/``try`` blocks (not functions)."""
    stack = list(tree.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            yield n
        elif isinstance(n, (ast.If, ast.Try)):
            stack += (
                n.body
                + n.orelse
                + getattr(n, "finalbody", [])
                + [s for h in getattr(n, "handlers", []) for s in h.body]
            )


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or ``None`` if it is acyclic."""
    colour: dict[str, int] = {}
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        colour[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if colour.get(v) == 1:
                return path[path.index(v) :] + [v]
            if v not in colour:
                found = visit(v)
                if found:
                    return found
        colour[u] = 2
        path.pop()
        return None

    for u in sorted(graph):
        if u not in colour:
            found = visit(u)
            if found:
                return found
    return None


def test_find_cycle_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_module_level_imports_are_acyclic():
    cycle = find_cycle(import_graph(top_level_only=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_all_imports_including_lazy_ones_are_acyclic():
    cycle = find_cycle(import_graph(top_level_only=False))
    assert cycle is None, "import cycle (counting imports inside functions): " + " -> ".join(cycle)


def unit_of(module: str) -> str:
    """The package-level unit of a module: ``tightdp.pld.atoms`` -> ``pld``, ``tightdp`` -> ``tightdp``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tightdp"


def package_graph() -> dict[str, set[str]]:
    """``{unit: units it imports}``, counting imports inside functions too."""
    graph: dict[str, set[str]] = {}
    for a, targets in import_graph(top_level_only=False).items():
        graph.setdefault(unit_of(a), set()).update(unit_of(b) for b in targets)
    return {u: targets - {u} for u, targets in graph.items()}


def test_every_unit_has_a_layer():
    layered = [u for layer in LAYERS for u in layer]
    assert len(layered) == len(set(layered)), "a unit is listed in two layers"
    assert set(package_graph()) <= set(layered), f"place {set(package_graph()) - set(layered)} in LAYERS"


def test_packages_import_only_lower_layers():
    """No circle at package level (e.g. mechanisms <-> schemes, pld <-> mechanisms, tightdp <-> integrations) and no
    arrow that runs back up."""
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    upward = sorted(f"{a} -> {b}" for a, targets in package_graph().items() for b in targets if level[b] >= level[a])
    assert not upward, "imports that do not go down the layers: " + ", ".join(upward)
    assert find_cycle(package_graph()) is None


def test_layer_check_finds_an_upward_import():
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    assert level["pld"] < level["mechanisms"] < level["accountants"] < level["schemes"] < level["sampling"]


def test_the_cache_registry_and_the_numeric_helpers_import_no_engine_module():
    graph = import_graph(top_level_only=False)
    assert graph["tightdp._caches"] == set()
    assert graph["tightdp.errors"] == set()
    assert graph["tightdp._numerics"] <= {"tightdp._caches", "tightdp.errors"}


@pytest.mark.slow  # one fresh import of each module; opacus alone takes ~5 s
def test_every_module_imports_on_its_own():
    """Each module imported first in a fresh package state: an import-order-dependent cycle would fail here."""
    names = [m for m in MODULES if m != "tightdp.__main__"]
    # importing any module runs ``tightdp/__init__`` first, which imports its modules in one fixed order: the
    # modules it loads are covered by one fresh ``import tightdp``, and they stay loaded (every later import
    # would load them again the same way first). Each of the others is imported first with none of the others
    # loaded: purged from ``sys.modules`` and from their parent package's attributes (``from pkg import mod``
    # reads the attribute before ``sys.modules``)
    code = f"""
import importlib, json, sys
failed = {{}}
import tightdp
eager = {{m for m in sys.modules if m == "tightdp" or m.startswith("tightdp.")}}
for name in [n for n in {names!r} if n not in eager]:
    for m in [m for m in sys.modules if m.startswith("tightdp.") and m not in eager]:
        parent, _, child = m.rpartition(".")
        if parent in sys.modules and getattr(sys.modules[parent], child, None) is sys.modules[m]:
            delattr(sys.modules[parent], child)
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "tightdp":
            continue  # an optional dependency (torch, opacus) that this environment lacks
        failed[name] = repr(exc)
    except Exception as exc:
        failed[name] = repr(exc)
print(json.dumps(failed))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    failed = json.loads(out.stdout.strip().splitlines()[-1])
    assert failed == {}


def test_public_api_is_listed_once_and_resolves():
    assert len(tightdp.__all__) == len(set(tightdp.__all__))
    for name in tightdp.__all__:
        assert getattr(tightdp, name) is not None
    src = (SRC / "__init__.py").read_text(encoding="utf-8")
    assert "__all__ +=" not in src and src.count("__all__ =") == 1
    tree = ast.parse(src)
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    # nothing imported that is not public, nothing public not imported
    assert imported == set(tightdp.__all__) | {"__version__"}
    for name in (
        "dpsgd_epsilon",
        "group_epsilon",
        "privacy_statement",
        "clear_caches",
        "from_dp_event",
        "calibrate_noise",
        "ConnectDotsAccountant",
        "MixtureOfGaussians",
    ):
        assert name in tightdp.__all__


def _lru_cached_functions():
    for name, (path, _) in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decos = [ast.unparse(d) for d in node.decorator_list]
                if any("lru_cache" in d or d == "cache" or d.endswith(".cache") for d in decos):
                    yield name, node.name, decos


def test_every_lru_cache_is_registered_for_clear_caches():
    found = list(_lru_cached_functions())
    assert len(found) >= 5
    missing = {(m, f) for m, f, decos in found if not any("register" in d for d in decos)}
    assert missing - KNOWN_UNREGISTERED == set(), "register these with tightdp._caches.register"
    assert {(m, f) for m, f, _ in found} >= KNOWN_UNREGISTERED, "a known entry no longer exists: remove it"
    assert missing <= KNOWN_UNREGISTERED


def test_clear_caches_empties_the_registered_memos():
    from tightdp import _caches
    from tightdp.pld.discretise import discretise

    tightdp.ConnectDotsAccountant().compose(
        tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.0), sampling_rate=0.01), 10
    ).epsilon(1e-5)
    tightdp.PRVAccountant().compose(
        tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.0), sampling_rate=0.01), 10
    ).epsilon(1e-5)
    assert discretise in _caches.registered()
    assert any(fn.cache_info().currsize for fn in _caches.registered())
    tightdp.clear_caches()
    assert all(fn.cache_info().currsize == 0 for fn in _caches.registered())
    with pytest.raises(TypeError, match="cache_clear"):
        _caches.register(lambda: None)
