import ast
import itertools
import os
from pathlib import Path

import pytest

# re-exported so that a test file importing the helpers from conftest still runs; test files import them from _support
from _support import REFERENCE as REFERENCE
from _support import gdp_delta_mp as gdp_delta_mp
from _support import gdp_epsilon_mp as gdp_epsilon_mp
from _support import power_by_squaring as power_by_squaring
from hypothesis import settings

# Property tests draw the same examples on every run ("ci", the default), so a CI failure reproduces and a submission
# is not refused by the luck of a draw; HYPOTHESIS_PROFILE=explore draws fresh examples, ten times as many, to hunt
# for new counterexamples before a change is submitted; HYPOTHESIS_PROFILE=fast (make test-fast) draws 5 examples per
# property for the edit-test loop. A test whose examples are expensive asks for fewer through
# ``_support.scaled(n)``: n under "ci", scaled with the profile under "fast" and "explore".
# No per-example deadline: timing goals are checked by benchmarks, and a loaded CI machine must not fail a property.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("fast", derandomize=True, max_examples=5, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, max_examples=1000, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PEERS_DIR = Path(__file__).resolve().parent / "peers"
#: the markers a test can carry (``--strict-markers``: pyproject.toml registers exactly these)
MARKERS = ("slow", "peers", "torch")


def _module_marks(path: Path) -> set[str]:
    """The markers every test of the module at ``path`` carries: its ``pytestmark`` and its folder's."""
    marks = {"peers"} if PEERS_DIR in path.resolve().parents else set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and sub.attr in MARKERS and "mark" in ast.unparse(sub.value):
                    marks.add(sub.attr)
    return marks


def pytest_ignore_collect(collection_path, config):
    """Under ``-m`` a module none of whose tests can match is not imported (make test-fast skips the PyTorch and
    peer imports that way); without ``-m``, or when in doubt, the module is collected as usual."""
    expr = config.getoption("markexpr", "")
    if not expr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    try:
        from _pytest.mark.expression import Expression

        compiled = Expression.compile(expr)
        marks = _module_marks(collection_path)
        if not marks:
            return None
        others = [m for m in MARKERS if m not in marks]
        for extra in itertools.chain.from_iterable(itertools.combinations(others, r) for r in range(len(others) + 1)):
            have = marks | set(extra)
            if compiled.evaluate(lambda name, have=have, **kw: name in have):
                return None
    except Exception:  # an unparsable module or a pytest without this API: collect it and let pytest decide
        return None
    return True


def pytest_collection_modifyitems(config, items):
    """Every test under tests/peers/ compares against a peer library: it carries the ``peers`` marker.

    The modules holding a ``slow`` test run first, each module's tests kept together and in order (module
    fixtures are built once): pytest-xdist hands tests out in this order, so the long ones start early and the
    short ones even out the workers at the end (the two workers' busy times differed by 19 s of 907)."""
    for item in items:
        if PEERS_DIR in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.peers)
    slow_modules = {item.fspath for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.fspath not in slow_modules)  # stable: False (slow) first


@pytest.fixture(autouse=True)
def _mpmath_digits(request):
    """Every test starts at its module's ``MPMATH_DPS`` (mpmath's default 15 digits if it states none) and mpmath
    is reset after it: a test that raises the working precision (up to 150 digits) must not slow down, or change,
    whichever tests the scheduler runs after it in the same worker."""
    import mpmath

    mpmath.mp.dps = getattr(request.module, "MPMATH_DPS", 15)
    yield
    mpmath.mp.dps = 15


@pytest.fixture
def gdp():
    return gdp_delta_mp, gdp_epsilon_mp
