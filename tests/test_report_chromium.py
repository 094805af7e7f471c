"""The HTML report in a real browser: Debian's headless Chromium renders it to a PNG (the env-fault
hue is on screen, apart from the failures' red) and dumps the DOM it built from the page (cells,
links, trend plots there; no script ever made from a run's strings). Fails, never skips, when
Chromium is missing: `scripts/test` installs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from harness.core.atomic import write_text
from harness.core.report_html import render_report
from tests.htmlpage import find, matrix_cells, parse
from tests.reportdata import CHECKS, SIM_HOSTS, nightly_history
from tests.test_report_html import HOSTILE, hostile_records

WIDTH, HEIGHT = 1400, 1000
# The palette of harness/core/report_html.py (its CSS variables): what the screenshot must show.
ENV_FAULT = (0xF2, 0xA9, 0x00)
ENV_FAULT_STRIPE = (0xD9, 0x94, 0x00)
FAIL = (0xC6, 0x28, 0x28)
PASS = (0xD3, 0xEE, 0xD6)
KNOWN_BUG = (0xD4, 0xDC, 0xF0)


@pytest.fixture(scope="module")
def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    pytest.fail("Debian's chromium is not installed: run ./scripts/test (it installs it) or apt-get install chromium")


def browse(chromium: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """One headless Chromium run over ``page``: its own profile folder (sessions testing side by
    side must not share one), bounded in time."""
    argv = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--force-color-profile=srgb", f"--user-data-dir={profile}", "--no-first-run",
        f"--window-size={WIDTH},{HEIGHT}", *args, page.resolve().as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def nightly_page(tmp_path_factory) -> Path:
    runs, cases = nightly_history(20)
    run = runs[0]
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_text(path, render_report(run, [c for c in cases if c.run_id == run.run_id], runs, cases))
    return path


def near(pixel, colour, tolerance=6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def test_chromium_renders_the_matrix_with_env_faults_in_their_own_hue(chromium, nightly_page, tmp_path):
    shot = tmp_path / "report.png"
    browse(chromium, nightly_page, tmp_path / "profile", f"--screenshot={shot}")
    with Image.open(shot) as image:
        assert image.format == "PNG" and image.size == (WIDTH, HEIGHT)
        colours = image.convert("RGB").getcolors(maxcolors=WIDTH * HEIGHT)  # [(count, (r, g, b))]
    counts = {name: sum(n for n, pixel in colours if near(pixel, colour)) for name, colour in
              {"env": ENV_FAULT, "stripe": ENV_FAULT_STRIPE, "fail": FAIL, "pass": PASS, "known bug": KNOWN_BUG}.items()}
    # Nine hatched env-fault cells of ~160x48 px, four red failures, five passes, two known bugs:
    # all in the first screen (the matrix sits at the top of the page).
    assert counts["env"] > 9 * 3000 and counts["stripe"] > 9 * 800, counts
    assert counts["fail"] > 4 * 4000 and counts["pass"] > 5 * 4000 and counts["known bug"] > 2 * 3000, counts
    assert len(colours) > 200  # text, plots: not a blank or single-colour page


def test_chromium_builds_the_cells_links_and_trend_plots_from_the_page(chromium, nightly_page, tmp_path):
    dom = browse(chromium, nightly_page, tmp_path / "profile", "--dump-dom").stdout
    elements = parse(dom)
    cells = matrix_cells(elements)
    assert len(cells) == len(SIM_HOSTS) * len(CHECKS)
    assert {cells["sim-wh-03", check].text for check in CHECKS if check != "eraseinverseops-order"} == {"env_fault/hugepages"}
    assert "o-env_fault" in cells["sim-wh-03", "device-smoke"].classes
    assert "o-fail" in cells["sim-wh-02", "layernorm-bw-small-shapes"].classes
    ids = {e.attrs["id"] for e in elements if "id" in e.attrs}
    links = [a.attrs["href"] for cell in cells.values() for a in cell.children if a.tag == "a"]
    assert len(links) == len(cells) and all(link[1:] in ids for link in links)
    assert len(find(elements, "a", "log")) == len(SIM_HOSTS) * 16  # one per case
    assert len(find(elements, "svg", "trend-plot")) == len(CHECKS) + len(SIM_HOSTS)
    assert find(elements, "polyline", "line") and len(find(elements, "span", "stand-in")) >= 2 * len(SIM_HOSTS)


def test_a_run_s_hostile_strings_never_become_markup_in_the_browser(chromium, tmp_path):
    run, cases = hostile_records()
    path = tmp_path / "hostile.html"
    write_text(path, render_report(run, cases, [run], cases))
    dom = browse(chromium, path, tmp_path / "profile", "--dump-dom").stdout
    elements = parse(dom)
    # Had anything run or been parsed as markup, the DOM would hold it (and alert() would have
    # left a script element behind).
    assert not find(elements, "script") and not find(elements, "img") and not find(elements, "i")
    assert not any(k.startswith("on") for e in elements for k in e.attrs)
    body = " ".join(e.text for e in find(elements, "body"))
    assert HOSTILE in body and '"><img src=x onerror=alert(1)>' in body
    assert find(elements, "title")[0].text.startswith("night<ly> · run r<1>\"'")
