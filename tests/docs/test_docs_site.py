"""The documentation site: ``mkdocs build --strict`` succeeds, and what it built holds together.

The site is built once (strict mode: a broken link, a docstring warning or a failing example of any page
fails the build; every Python block of the pages runs). Then: every page of the nav is in the output,
every internal link, anchor and image of every HTML page resolves (parsed, not grepped), the search index
exists. The link checker is shown to catch a broken link. Where Chromium is installed, the home page and
one guide are rendered headless and saved as screenshots under ``tests/artifacts/`` (git-ignored).
Skipped when mkdocs (the ``docs`` extra) is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed (pip install '.[docs]')")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings-python is not installed")
pytest.importorskip("markdown_exec", reason="markdown-exec is not installed (pip install '.[docs]')")
yaml = pytest.importorskip("yaml")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(
        os.environ,
        NO_MKDOCS_2_WARNING="1",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--site-dir",
            str(out),
            "--config-file",
            str(ROOT / "mkdocs.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


def _nav_pages(nav) -> list[str]:
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages += _nav_pages(value)
        elif isinstance(value, str) and "://" not in value:
            pages.append(value)
    return pages


def _output_of(page: str) -> str:
    """``guides/x.md`` -> ``guides/x/index.html`` (directory URLs); ``index.md`` -> ``index.html``."""
    stem = page.removesuffix(".md")
    return "index.html" if stem == "index" else stem.removesuffix("/index") + "/index.html"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("preconnect", "dns-prefetch")):
                self.refs.append(a[key])


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def broken_links(site: Path) -> list[str]:
    """Every internal href/src of every HTML page that points to no file, or to a missing anchor."""
    # 404.html is served at the site root for any missing URL, so it links absolutely ("/assets/..."): not checked
    pages = {path: _parse(path) for path in site.rglob("*.html") if path.name != "404.html"}
    bad = []
    for path, parsed in pages.items():
        for ref in parsed.refs:
            parts = urlsplit(ref)
            if parts.scheme or parts.netloc or ref.startswith(("mailto:", "data:", "javascript:")):
                continue
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if target.is_dir() or parts.path.endswith("/"):
                target = target / "index.html"
            if not target.is_file():
                bad.append(f"{path.relative_to(site)}: {ref}")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    bad.append(f"{path.relative_to(site)}: {ref} (no such anchor)")
    return bad


def test_every_nav_page_is_built(site):
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    pages = _nav_pages(config["nav"])
    assert len(pages) >= 20
    missing = [p for p in pages if not (site / _output_of(p)).is_file()]
    assert missing == []


def test_links_anchors_and_images_resolve(site):
    assert broken_links(site) == []


def test_the_link_check_catches_a_broken_link(site, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(site, copy)
    page = copy / "quickstart" / "index.html"
    page.write_text(
        page.read_text(encoding="utf-8").replace(
            "</body>",
            '<a href="../no-such-page/">x</a><img src="missing.svg"><a href="../#no-such-anchor">y</a></body>',
        ),
        encoding="utf-8",
    )
    assert sorted(broken_links(copy)) == [
        "quickstart/index.html: ../#no-such-anchor (no such anchor)",
        "quickstart/index.html: ../no-such-page/",
        "quickstart/index.html: missing.svg",
    ]


def test_search_index_exists(site):
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {doc["location"] for doc in index["docs"]}
    assert "guides/sampling/" in locations and "cli/" in locations


def test_pages_show_executed_results(site):
    """The examples ran: their printed results are in the pages, and the figures are inline SVG."""
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "publish epsilon &lt;= " in home
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("epsilon", "calibrate", "report", "audit"):
        assert f'id="tightdp-{command}"' in cli
    sampling = (site / "guides" / "sampling" / "index.html").read_text(encoding="utf-8")
    assert "certified epsilon (upper)" in sampling  # the figure's axis label, drawn by the build


_CANDIDATES = ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or "")
CHROMIUM = next((p for p in _CANDIDATES if p and Path(p).is_file()), None)
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


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize(
    "page, name", [("index.html", "docs_home.png"), ("guides/sampling/index.html", "docs_guide_sampling.png")]
)
def test_browser_screenshots(site, tmp_path, page, name):
    from matplotlib import image

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / name
    profile = tmp_path / "profile"
    profile.mkdir()
    out = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1440,1600",
            f"--screenshot={shot}",
            (site / page).resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    pixels = image.imread(shot)
    assert pixels.shape[0] == 1600 and pixels.shape[1] == 1440
    rgb = pixels[..., :3].reshape(-1, 3)
    assert 0.001 < (rgb.sum(axis=1) < 1.5).mean() < 0.9  # text on a page, not a blank or black image
    # the same page with a probe that records, once loaded, every image the browser could not decode and every
    # stylesheet it could not load (a copy next to the page, so relative URLs resolve as on the page itself)
    probe = (site / page).with_name("_probe.html")
    probe.write_text((site / page).read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", probe.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    probe.unlink()
    assert "md-nav" in dom and "md-search" in dom  # navigation and search rendered
    assert 'data-broken-images="[]"' in dom, dom[-2000:]
    assert 'data-broken-styles="[]"' in dom, dom[-2000:]


_PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src);
  const styles = [...document.querySelectorAll('link[rel="stylesheet"]')].filter((l) => !l.sheet).map((l) => l.href);
  document.body.setAttribute("data-broken-images", JSON.stringify(images));
  document.body.setAttribute("data-broken-styles", JSON.stringify(styles));
});
</script>"""


def _public_modules() -> list[str]:
    """Every module of tightdp with no underscore component, except the CLI (its reference is cli.md)."""
    import pkgutil

    import tightdp

    names = ["tightdp"] + [m.name for m in pkgutil.walk_packages(tightdp.__path__, "tightdp.")]
    return [n for n in names if not any(p.startswith("_") for p in n.split(".")) and not n.startswith("tightdp.cli")]


def test_every_public_name_has_a_reference_entry(site):
    """Each name of every public module's ``__all__`` has its own heading in the API reference: an anchor
    ``<module>.<name>`` where ``<module>`` is the module itself, its package or a module it re-exports from; a
    public submodule exported by name has its own page."""
    import importlib
    import inspect

    ids: set[str] = set()
    for page in (site / "api").rglob("index.html"):
        ids |= _parse(page).ids
    suffixes = {i.rsplit(".", 1)[-1] for i in ids if i.startswith("tightdp")}
    missing = []
    for module in _public_modules():
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            if inspect.ismodule(getattr(mod, name)):
                if not (site / "api" / name / "index.html").is_file():
                    missing.append(f"{module}.{name} (page)")
            elif f"{module}.{name}" not in ids and name not in suffixes:
                missing.append(f"{module}.{name}")
    assert missing == []


def test_the_cli_reference_is_generated_from_the_parser(site):
    """Every subcommand of ``tightdp.cli.build_parser`` has its section, with every option it defines."""
    import argparse

    from tightdp.cli import build_parser

    html = (site / "cli" / "index.html").read_text(encoding="utf-8")
    ids = _parse(site / "cli" / "index.html").ids
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(subs.choices) >= 9
    for name, sub in subs.choices.items():
        assert f"tightdp-{name}" in ids, name
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in html, (name, flag)


# Python blocks the build shows without running, each with the reason; every other one must carry exec="on"
NOT_EXECUTED = {
    (
        "guides/dpsgd.md",
        "import tightdp.integrations.opacus",
    ): "needs a PyTorch training loop (about 11 s with the torch import); tests/integrations/test_opacus.py runs the same calls",
    (
        "guides/individual.md",
        "from distributed import Client",
    ): "needs a running dask cluster; tests/integrations/test_sharded_ledger.py runs the same calls on a LocalCluster",
}


def test_every_python_block_is_executed():
    import re

    fence = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
    skipped = []
    for md in sorted((ROOT / "docs").rglob("*.md")):
        for options, body in fence.findall(md.read_text(encoding="utf-8")):
            if 'exec="on"' in options:
                continue
            page = md.relative_to(ROOT / "docs").as_posix()
            if not any(page == p and start in body for p, start in NOT_EXECUTED):
                skipped.append(f"{page}: {body.splitlines()[0]}")
    assert skipped == []
