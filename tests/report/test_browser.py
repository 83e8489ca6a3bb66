"""The HTML report in a real headless Chromium (Debian's, driven by Playwright): the page
loads with no console errors, its first table shows the run's figures, a drill-down opens,
a run's text never runs as script, and a screenshot of each page is written to
tests/artifacts/report-<case>.png (git-ignored).

`.ci/run` installs Debian's chromium with apt-get before the tests, saying so. Elsewhere the
module fixture does it when /usr/bin/chromium is missing and this process may (root,
apt-get present), and says so in a warning that pytest's summary shows; otherwise the tests
skip saying why.
Playwright's own browser download is not used (it fails on a closed network)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dialogbench.report.html import figures, write_report
from golden.cases import CASES as GOLDEN
from golden.cases import run_case
from report.conftest import HOSTILE, MakeRun

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CASES = ("retrieval-sample", "detection-sample-model", "chat-sample", "demo-awareness-casino")
"""A retrieval, a detection, a chat and a DEMO run (the DEMO one needs CaSiNo)."""


def _install_chromium() -> str | None:
    """Install Debian's chromium when it is missing; why not, or None when it is there."""
    if CHROMIUM.exists():
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return f"{CHROMIUM} is missing and apt-get cannot install it here (needs root)"
    started = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    got = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if got.returncode != 0:  # a machine whose package lists are stale
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        got = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if got.returncode != 0 or not CHROMIUM.exists():
        return f"apt-get install chromium failed: {got.stderr.strip()[-300:]}"
    took = time.monotonic() - started
    warnings.warn(
        f"installed Debian's chromium with apt-get ({took:.0f} s) for the browser tests",
        stacklevel=2,
    )
    return None


@pytest.fixture(scope="session")
def pages(
    make_run: MakeRun, hostile_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path | str]:
    """case -> (run folder, its report page), or why it cannot run: made before the browser
    starts (Playwright's sync API holds an event loop, and a run starts its own)."""
    root = tmp_path_factory.mktemp("pages")
    out: dict[str, Path | str] = {}
    for case in CASES:
        try:
            run = make_run(case)
        except pytest.skip.Exception as e:
            out[case] = str(e)
            continue
        out[case] = run
        write_report([run], root / f"{case}.html")
    out["hostile"] = hostile_run
    write_report([hostile_run], root / "hostile.html")
    try:
        out["locomo-pair"] = _locomo_pair(make_run, root)
    except pytest.skip.Exception as e:
        out["locomo-pair"] = str(e)
    try:  # LoCoMo's histories never fit the default budget: `full` falls back, flagged
        flagged = out["questions-locomo"] = make_run("questions-locomo")
        write_report([flagged], root / "questions-locomo.html")
    except pytest.skip.Exception as e:
        out["questions-locomo"] = str(e)
    return {**out, "root": root}


def _locomo_pair(make_run: MakeRun, root: Path) -> Path:
    """The report page of two LoCoMo retrieval runs (the golden case, and it again with
    another seed)."""
    first = make_run("retrieval-locomo")
    case = next(c for c in GOLDEN if c.name == "retrieval-locomo")
    again = dataclasses.replace(case, args=(*case.args, "--seed", "7"))
    second = root / "retrieval-locomo-seed-7"
    code, output = run_case(again, second, root / "cache.sqlite")
    assert code == 0, output
    return write_report([first, second], root / "locomo-pair.html")


def _page_of(pages: dict[str, Path | str], case: str) -> tuple[Path, Path]:
    got = pages[case]
    if isinstance(got, str):
        pytest.skip(got)
    root = pages["root"]
    assert isinstance(root, Path)
    return got, root / f"{case}.html"


@pytest.fixture(scope="module")
def browser(
    pages: dict[str, Path | str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A headless Debian Chromium under Playwright, with an empty profile. Module-scoped:
    while Playwright's sync API is open, this thread holds a running event loop, so no
    other test's run (`asyncio.run`) may happen then."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the browser tests need the browser extra: pip install -e '.[browser]'",
    )
    why = _install_chromium()
    if why is not None:
        pytest.skip(why)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=FLAGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def _open(browser: Any, page_file: Path) -> tuple[Any, list[str]]:
    """Load a page; return it and the console errors and uncaught exceptions it raised."""
    errors: list[str] = []
    page = browser.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    return page, errors


def _first_figure(run: Path) -> float:
    summary = json.loads((run / "summary.json").read_text())
    return next(f.value for _, f in figures(summary) if f.value is not None)


@pytest.mark.parametrize("case", CASES)
def test_report_renders_in_chromium(case: str, pages: dict[str, Path | str], browser: Any) -> None:
    run, page_file = _page_of(pages, case)
    page, errors = _open(browser, page_file)
    try:
        assert errors == []
        headline = page.locator("table.figures").first
        assert headline.is_visible()
        assert f"{_first_figure(run):.3f}" in headline.inner_text()
        item = page.locator("details.item").first
        assert not item.locator("table.drill").is_visible()
        item.locator("summary").click()
        assert item.locator("table.drill").is_visible()
        assert page.locator("svg.plot").count() >= 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(ARTIFACTS / f"report-{case}.png"), full_page=False)
        assert errors == []
    finally:
        page.close()


def test_filter_hides_items_that_do_not_match(pages: dict[str, Path | str], browser: Any) -> None:
    _, page_file = _page_of(pages, "retrieval-sample")
    page, errors = _open(browser, page_file)
    try:
        total = page.locator("details.item").count()
        page.fill("#filter", "m0025")
        shown = page.locator("details.item:not(.hidden)").count()
        assert 0 < shown < total
        assert errors == []
    finally:
        page.close()


def test_a_script_in_a_reply_does_not_run(pages: dict[str, Path | str], browser: Any) -> None:
    _, page_file = _page_of(pages, "hostile")
    page, errors = _open(browser, page_file)
    try:
        item = page.locator("details.item").first
        item.locator("summary").click()
        assert page.evaluate("window.__pwned === undefined")
        assert HOSTILE in item.inner_text()  # shown as the text it is
        assert errors == []
    finally:
        page.close()


def _overlaps(boxes: list[dict[str, float]]) -> list[tuple[int, int]]:
    """Pairs of boxes (x, y, width, height) that overlap by more than half a pixel."""
    out = []
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            b = boxes[j]
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            if dx > 0.5 and dy > 0.5:
                out.append((i, j))
    return out


BOXES = """(selector) => Array.from(document.querySelectorAll("svg.plot")).map((svg) =>
  Array.from(svg.querySelectorAll(selector)).map((t) => {
    const r = t.getBoundingClientRect();
    return {x: r.x, y: r.y, width: r.width, height: r.height};
  }))"""


@pytest.mark.parametrize("width", [1440, 390])
def test_two_locomo_runs_compare_legibly(
    width: int, pages: dict[str, Path | str], browser: Any
) -> None:
    locomo_pair = pages["locomo-pair"]
    if isinstance(locomo_pair, str):
        pytest.skip(locomo_pair)
    assert locomo_pair.stat().st_size < 2_000_000  # the page, drill-down included
    page, errors = _open(browser, locomo_pair)
    try:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        assert page.locator("svg.plot").count() >= 2
        for selector in ("text.xlabel", "g.legend"):
            for i, boxes in enumerate(page.evaluate(BOXES, selector)):
                assert _overlaps(boxes) == [], f"{selector} of plot {i} overlap at {width} px"
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, f"the page is {wide} px wide in a {width} px window"
        item = page.locator("details.item").first
        item.locator("summary").click()
        headers = item.locator("thead th").all_inner_texts()
        assert any(h.startswith("retrieval-locomo: ") for h in headers)
        assert any(h.startswith("retrieval-locomo-seed-7: ") for h in headers)
        evidence = item.locator(".ids > mark").first
        evidence.hover()
        said = evidence.get_attribute("title")
        assert said, "hovering an evidence id shows its message"
        assert said[:40] in item.locator(".evidence").inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(ARTIFACTS / f"report-locomo-pair-{width}.png"), full_page=True)
        assert errors == []
    finally:
        page.close()


def test_a_context_that_fell_back_is_flagged_where_the_figures_are(
    pages: dict[str, Path | str], browser: Any
) -> None:
    """Issue 28.4: the questions run whose `full` context fell back to retrieval on every
    LoCoMo question shows it, with the count, in a visible box above the figures and with a
    mark on the flagged rows (the reason on hover)."""
    run, flagged = _page_of(pages, "questions-locomo")
    said = json.loads((run / "warnings.json").read_text())["flagged"]["full"]
    assert said.startswith("fell back to retrieval on ")
    page, errors = _open(browser, flagged)
    try:
        box = page.locator("section.track div.flag").first
        assert box.is_visible() and "Context cut or fell back" in box.inner_text()
        assert said in " ".join(box.inner_text().split())
        marks = page.locator("table.figures .flagmark")
        assert marks.count() >= 1 and marks.first.is_visible()
        assert marks.first.get_attribute("title") == said
        figures_at = page.locator("table.figures").first.bounding_box()
        box_at = box.bounding_box()
        assert box_at is not None and figures_at is not None
        assert box_at["y"] < figures_at["y"]  # read before the figures it qualifies
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-questions-flagged.png"))
        assert errors == []
    finally:
        page.close()
