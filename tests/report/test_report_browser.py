"""The report's HTML in a real headless browser (Chromium): the images decode, the tables are there.

The HTML carries a small script that sets ``<body data-images="loaded">`` once every ``<img>`` is
complete with ``naturalWidth > 0`` (``"broken"`` otherwise); ``--dump-dom`` prints the DOM after the
page has loaded, so the attribute is the browser's own verdict. A page with a corrupt image is
checked too, so the check can fail. Skipped when Chromium is not installed (``make test`` installs
it where apt-get is available).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tightdp.report import ReportConfig, build_report

_CANDIDATES = ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or "")
CHROMIUM = next((p for p in _CANDIDATES if p and Path(p).is_file()), None)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)"),
    pytest.mark.slow,  # a headless browser renders the report
]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--virtual-time-budget=5000",
]


def _chromium(tmp_path: Path, *args: str) -> str:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    out = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    pytest.importorskip("matplotlib")
    config = ReportConfig.from_dict(
        {
            "title": "browser check",
            "training": {"dataset_size": 1000, "batch_size": 100, "epochs": 3, "noise_multiplier": 2.0},
            "privacy": {"deltas": [1e-5, 1e-6], "target_epsilons": [2.0], "group_sizes": [2]},
            "report": {"accountants": ["connect-dots", "rdp", "gdp"]},
        }
    )
    out = tmp_path_factory.mktemp("report")
    files = build_report(config).write(out, ["html"])
    return files["html"]


@pytest.mark.slow
def test_images_load_and_tables_render(report_html, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", report_html.resolve().as_uri())
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-images="loaded"' in body.group(0), body.group(0)
    assert 'data-image-count="3"' in body.group(0)  # epsilon(delta), over training, trade-off
    assert dom.count("<table>") >= 5  # what ran, accountants, band, calibration, group, settings
    for header in ("<th>accountant</th>", "<th>δ</th>", "<th>group size</th>", "<th>question</th>"):
        assert header in dom, header
    assert "What this guarantees" in dom and "connect-dots" in dom


def test_a_broken_image_is_reported_broken(report_html, tmp_path):
    html = report_html.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1), encoding="utf-8")
    dom = _chromium(tmp_path, "--dump-dom", broken.resolve().as_uri())
    assert 'data-images="broken"' in re.search(r"<body[^>]*>", dom).group(0)


def test_screenshot_shows_the_page(report_html, tmp_path):
    from matplotlib import image

    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "--window-size=1000,2400", f"--screenshot={shot}", report_html.resolve().as_uri())
    pixels = image.imread(shot)
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1000
    rgb = pixels[..., :3].reshape(-1, 3)
    dark = (rgb.sum(axis=1) < 1.5).mean()
    assert 0.005 < dark < 0.5  # text and figures drawn on a white page, not a blank or black screen
