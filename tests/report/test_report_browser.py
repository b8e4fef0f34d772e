"""The loss and clean reports render, open in a real headless Chromium
with no console errors and no network requests, and show the right numbers."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.report import write_index, write_report
from tests.report.runs import LOST, TOPIC, make_clean_run, make_loss_run


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    for d in (make_loss_run(root), make_clean_run(root)):
        write_report(d)
    write_index(root)
    return root


def _table(page, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"{selector} tbody tr",
                                     "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")


def test_loss_report_shows_lost_writes(results: Path, open_page, tmp_path: Path) -> None:
    report = results / "20261117T000000-kip903-off" / "report.html"
    loaded = open_page(report)
    page = loaded.page
    assert loaded.console_errors == [] and loaded.page_errors == []
    assert loaded.foreign_requests == [], loaded.requests

    assert page.inner_text("#lost-count") == "3"
    assert page.inner_text("#verdict-expectation") == "UNEXPECTED"
    assert page.inner_text("#expect") == "no-loss"
    assert page.inner_text("#seed") == "7"
    assert page.inner_text("#valid") == (
        "no — broken by lost_write (3), inconsistent_offset (2), realtime_offset_regression (1)")
    assert "kraftsim 0.1" in page.inner_text("#target")
    assert "kip903.enabled=false" in page.inner_text("#switches")

    assert _table(page, "#lost-summary") == [
        [f"{TOPIC}@1", "2", "1201", "1202", "21.402", "21.455", "3470", "0"],
        [f"{TOPIC}@2", "1", "877", "877", "21.731", "21.731", "3490", "0"],
    ]
    shown = {}
    for section in page.query_selector_all("section.lost-partition"):
        rows = section.eval_on_selector_all("tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))")
        shown[section.get_attribute("data-partition")] = rows
    assert sorted(shown) == [f"{TOPIC}@1", f"{TOPIC}@2"]
    expected = {f"{TOPIC}@{p}": [] for p, *_ in LOST}
    for p, off, val, producer, ack_t, attribution in LOST:
        expected[f"{TOPIC}@{p}"].append([str(off), val, f"{ack_t:.3f}".rstrip("0"), producer, "52", "drain",
                                         "final_drain_read_whole_partition", attribution.replace(" | ", "\n")])
    assert shown == expected

    # the timeline is inline SVG, with the rejected AlterPartition labelled by its error
    assert page.locator("#timeline + p + svg, svg.plot").count() >= 1
    assert "INELIGIBLE_REPLICA (107)" in page.inner_text("#alter-table")
    assert page.inner_text("#alters-rejected") == "1"
    svg_text = page.eval_on_selector("#timeline ~ svg.plot", "s => s.textContent")   # after the lost writes
    assert "INELIGIBLE_REPLICA (107)" in svg_text and "lost write (at ack time)" in svg_text
    # docs/seeds.md#seed-004: the winner's and candidates' local log in the election table
    elections = page.inner_text("#election-table")
    assert "unclean" in elections and "local log bytes 185.5 KiB" in elections
    rows = {(r[0], r[1]): r for r in _table(page, "#election-table")}
    # faultline-1's event carries the winner's log; faultline-2's winner is known from its own
    # broker's recovery event: the wiped, empty broker 2 won (docs/seeds.md#seed-000's race)
    assert rows[("32.3", f"{TOPIC}@1")][9] == "log start 0, LEO 0, local log bytes 0 B"
    assert rows[("32.3", f"{TOPIC}@2")][9] == "LEO 0 after recovery (disk_wiped) at t=21.000"
    # the unclean winner of partition 0 reported its log on taking over (epoch 3, not epoch 9)
    assert rows[("34.9", f"{TOPIC}@0")][9] == ("log start 0, LEO 1190, local log start ts 1763000000000, "
                                               "local log bytes 150.0 KiB")
    assert page.inner_text("#rerun-command") == (
        "faultline run campaigns/kip903-wipe-race.yaml --seed 7 --set target.kip903.enabled=false")
    # other anomalies: counted, with their evidence linked
    assert page.inner_text("#anomaly-inconsistent_offset h3") == "inconsistent_offset: 2"
    assert page.get_attribute("#anomaly-inconsistent_offset a", "href") == "anomalies/inconsistent_offset.csv"

    shot = tmp_path / "loss-report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000


def test_clean_report_shows_no_loss(results: Path, open_page, tmp_path: Path) -> None:
    loaded = open_page(results / "20261118T000000-kip903-on" / "report.html")
    page = loaded.page
    assert loaded.console_errors == [] and loaded.page_errors == []
    assert loaded.foreign_requests == [], loaded.requests
    assert page.inner_text("#lost-count") == "0"
    assert page.inner_text("#verdict-expectation") == "as expected"
    assert "No acknowledged write lost" in page.inner_text("#verdict")
    assert page.locator("section.lost-partition").count() == 0
    assert page.locator("#lost-summary").count() == 0
    assert page.inner_text("#alters-rejected") == "1"
    shot = tmp_path / "clean-report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000


def test_index_lists_runs_newest_first(results: Path, open_page) -> None:
    loaded = open_page(results / "index.html")
    page = loaded.page
    assert loaded.console_errors == [] and loaded.foreign_requests == []
    rows = _table(page, "#runs")
    assert [r[1] for r in rows] == ["20261118T000000-kip903-on", "20261117T000000-kip903-off"]
    assert rows[0][4] == "no loss (as expected)" and rows[0][5] == "0"
    assert rows[1][4] == "loss — UNEXPECTED" and rows[1][5] == "3"
    assert rows[1][2] == "kip903-wipe-race" and rows[1][3] == "kraftsim-local" and rows[1][7] == "60.0"
    assert _table(page, "#campaigns") == [
        ["kip903-wipe-race", "kraftsim-local", "2", "1", "3", rows[0][0], "no loss (as expected)"]]
    for href in page.eval_on_selector_all("#runs a", "as => as.map(a => a.getAttribute('href'))"):
        assert (results / href).is_file()


def test_browser_check_catches_console_errors_and_fetches(results: Path, open_page, tmp_path: Path) -> None:
    """Known-bad control: a page that logs an error and fetches from the network must fail the
    checks above (the fetch goes to loopback, which is all a test may reach)."""
    bad = tmp_path / "bad.html"
    page = (results / "20261118T000000-kip903-on" / "report.html").read_text()
    page = page.replace("</body>", '<img src="http://127.0.0.1:9/x.png"><script>console.error("boom")</script></body>')
    bad.write_text(page)
    loaded = open_page(bad)
    assert loaded.console_errors and any("boom" in m for m in loaded.console_errors)
    assert loaded.foreign_requests == ["http://127.0.0.1:9/x.png"]


def test_report_is_one_self_contained_file(results: Path) -> None:
    html = (results / "20261117T000000-kip903-off" / "report.html").read_text()
    assert "<script" not in html
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', html)
    assert "@import" not in html and "url(http" not in html
    # moving the report alone keeps it whole (CSV links are the only outside references)
    moved = results.parent / "moved.html"
    shutil.copy(results / "20261117T000000-kip903-off" / "report.html", moved)
    assert re.findall(r'href="([^"#]+)"', moved.read_text()) == [
        "data:,", "../index.html", "anomalies/lost_write.csv", "anomalies/inconsistent_offset.csv"]
