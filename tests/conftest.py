import os
from pathlib import Path

import pytest
from _support import gdp_delta_mp, gdp_epsilon_mp
from hypothesis import settings

# Property tests draw the same examples on every run ("ci", the default), so a CI failure reproduces and a submission
# is not refused by the luck of a draw; HYPOTHESIS_PROFILE=explore draws fresh examples, ten times as many, to hunt
# for new counterexamples before a change is submitted; HYPOTHESIS_PROFILE=fast (make test-fast) draws 8 examples per
# property for the edit-test loop. A test whose examples are expensive asks for fewer through
# ``_support.scaled(n)``: n under "ci", scaled with the profile under "fast" and "explore".
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("fast", derandomize=True, max_examples=8, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=1000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

PEERS_DIR = Path(__file__).resolve().parent / "peers"


def pytest_collection_modifyitems(config, items):
    """Every test under tests/peers/ compares against a peer library: it carries the ``peers`` marker."""
    for item in items:
        if PEERS_DIR in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.peers)


@pytest.fixture
def gdp():
    return gdp_delta_mp, gdp_epsilon_mp
