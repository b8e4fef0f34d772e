"""The loss story on the report's first screen, read in a real headless Chromium.

The KIP-903 run is real: the checker inputs of a ``faultline run campaigns/kip-903.yaml`` with
the fix off (tests/checkers/fixtures/kip903-off.tar.gz), checked by the real checker in its own
process (``python -m checkers``: its own Spark, so this module shares no session), then rendered.
The other cases are the synthetic runs of tests/report/runs.py with a story or an outcome added.
A screenshot of each first screen goes to the artefacts directory ($FAULTLINE_TEST_ARTEFACTS,
else the test's own temporary directory).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import write_index, write_report
from tests.report.runs import TOPIC, make_clean_run, make_loss_run
from tests.support.tarballs import unpack

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "checkers" / "fixtures" / "kip903-off.tar.gz"
VIEWPORT_H = 900      # tests/report/conftest.py's browser viewport: the "first screen"


def _artefacts(tmp_path: Path) -> Path:
    d = Path(os.environ.get("FAULTLINE_TEST_ARTEFACTS") or tmp_path / "artefacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def kip903_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rd = tmp_path_factory.mktemp("kip903") / "kip903-off"
    rd.mkdir()
    unpack(FIXTURE, rd)
    p = subprocess.run([sys.executable, "-m", "checkers", str(rd)], cwd=REPO, capture_output=True, text=True,
                       timeout=1200)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr[-3000:])     # expect: loss, as expected
    write_report(rd, index=False)
    return rd


def _first_screen(page, selector: str) -> list[tuple[str, float]]:
    """(text, bottom y) of every element matched, in document coordinates, with the page at its top."""
    page.evaluate("window.scrollTo(0, 0)")
    return page.eval_on_selector_all(
        selector, "es => es.map(e => [e.innerText.trim(), e.getBoundingClientRect().bottom + window.scrollY])")


@pytest.mark.timeout(1500)
def test_kip903_story_on_the_first_screen(kip903_report: Path, open_page, tmp_path: Path) -> None:
    loaded = open_page(kip903_report / "report.html")
    page = loaded.page
    assert loaded.console_errors == [] and loaded.page_errors == [] and loaded.foreign_requests == []
    v = json.loads((kip903_report / "verdict.json").read_text())
    story = v["stories"][0]
    assert page.locator("#stories article.story").count() == 1
    art = page.locator("#stories article.story").first
    assert art.get_attribute("data-mechanism") == "stale_alter_partition_readmit"
    assert art.get_attribute("data-partition") == "faultline@0"
    sentences = _first_screen(page, "#stories article.story ol.sentences > li")
    assert 3 <= len(sentences) <= 8, sentences
    # every sentence is on the first screen, and the story is the one the verdict tells
    assert all(bottom <= VIEWPORT_H for _, bottom in sentences), sentences
    texts = [t for t, _ in sentences]
    assert texts == story["sentences"]
    told = " ".join(texts)
    assert "broker 2's disk was wiped" in told                                       # the wiped broker
    assert "accepted an AlterPartition from leader 1 that put broker 2 back into the ISR" in told
    assert "INELIGIBLE_REPLICA" in told and "carrying no broker epochs" in told     # the rule not applied
    # the fixture's run predates kraftsim's features record: the story claims no gate it cannot read
    assert "was not recorded as on or off" in told
    assert "elected broker 2 leader of faultline@0" in told                           # the election
    lost = story["lost"]
    assert texts[-1] == (f"Lost: {lost['count']} acknowledged writes of faultline@0, offsets "
                         f"{lost['first_offset']}-{lost['last_offset']}, acknowledged between "
                         f"t={lost['first_ack_t']:.3f}s and t={lost['last_ack_t']:.3f}s.")
    assert lost["count"] == v["counts"]["lost_write"]
    # per row: the mechanism as a label, the raw evidence one click away
    first_row = page.locator("section.lost-partition table.lost tbody tr").first
    cell = first_row.locator("td").last
    assert cell.locator("span.mech").inner_text() == "stale_alter_partition_readmit"
    details = cell.locator("details.evidence")
    assert details.get_attribute("open") is None
    assert details.inner_text().strip() == "raw evidence"             # folded: only its summary shows
    details.locator("summary").click()
    assert "disk-wipe[broker-2]" in details.inner_text() and "leader_elected" in details.inner_text()
    shot = _artefacts(tmp_path) / "kip903-off-first-screen.png"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shot))          # the viewport: what a reviewer sees first
    assert shot.stat().st_size > 20_000


def test_unexplained_story_shows_its_raw_evidence(open_page, tmp_path: Path) -> None:
    rd = make_loss_run(tmp_path)
    v = json.loads((rd / "verdict.json").read_text())
    v["stories"] = [{"topic": TOPIC, "partition": 2, "mechanism": "unexplained", "mechanisms": ["unexplained"],
                     "label": "no recorded fault or event explains the loss", "allowed_by": None,
                     "sentences": ["Unexplained: nothing recorded shows where the writes went.",
                                   "In that window: 0 leader elections.",
                                   "Lost: 1 acknowledged write of faultline@2, offset 877, acknowledged at t=21.731s."],
                     "steps": [], "lost": {"count": 1, "first_offset": 877, "last_offset": 877,
                                           "first_ack_t": 21.731, "last_ack_t": 21.731}}]
    v["mechanisms"] = {"unexplained": 1}
    (rd / "verdict.json").write_text(json.dumps(v))
    write_report(rd, index=False)
    page = open_page(rd / "report.html").page
    art = page.locator('#stories article.story[data-partition="faultline@2"]')
    assert art.get_attribute("data-mechanism") == "unexplained"
    assert art.locator("ol > li").first.inner_text().startswith("Unexplained:")
    cell = page.locator('section.lost-partition[data-partition="faultline@2"] tbody tr td').last
    assert cell.locator("span.mech").inner_text() == "unexplained"
    assert cell.locator("details.evidence").get_attribute("open") is not None       # shown, not folded
    assert "alter_partition: accepted new_isr=[0,2]" in cell.locator("details.evidence").inner_text()
    page.screenshot(path=str(_artefacts(tmp_path) / "unexplained-first-screen.png"))


def test_inconclusive_run_says_so(open_page, tmp_path: Path) -> None:
    rd = make_clean_run(tmp_path)
    v = json.loads((rd / "verdict.json").read_text())
    v.update(outcome="inconclusive", as_expected=False, acked_writes=0,
             inconclusive_because=["no acknowledged writes: nothing was tested"])
    (rd / "verdict.json").write_text(json.dumps(v))
    write_report(rd, index=False)
    page = open_page(rd / "report.html").page
    assert page.inner_text("#verdict-expectation") == "INCONCLUSIVE"
    assert page.inner_text("#inconclusive") == "Inconclusive: no acknowledged writes: nothing was tested"
    assert "proves nothing here" in page.inner_text("#lost + p")
    assert "inconclusive" in (page.get_attribute("#verdict", "class") or "")
    page.screenshot(path=str(_artefacts(tmp_path) / "inconclusive-first-screen.png"))
    write_index(rd.parent)
    index = open_page(rd.parent / "index.html").page
    rows = index.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert [r[4] for r in rows] == ["no loss — INCONCLUSIVE"]
