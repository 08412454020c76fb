"""The HTML report in a real headless Chromium: it renders, logs no console error,
fetches nothing, shows the timeline and the diffs, and a script in a test's output stays
text. The screenshot is kept next to the report for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.report.runs import HOSTILE
from tests.support.browser import chromium, open_page
from tests.support.cli import looprun

# a real browser: the e2e tier (`pytest -m e2e`). CI installs chromium (.ci/run): there a
# missing browser is a failure, not a skip
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        chromium() is None and not os.environ.get("CI"),
        reason="chromium is not installed (.ci/run installs it)",
    ),
]

PROBES = {  # evaluated in order; every <details> is opened first, for the screenshot
    "open_all": "document.querySelectorAll('details').forEach(d => d.open = true); true",
    "title": "document.title",
    "timeline_rows": "document.querySelectorAll('table.timeline tr').length",
    "iterations": "document.querySelectorAll('details.iteration').length",
    "diffs": "document.querySelectorAll('details.diff').length",
    "added_lines": "document.querySelectorAll('.diffview .add').length",
    "scripts": "document.scripts.length",
    "pwned": "typeof window.__pwned",
    "text": "document.body.innerText",
    "first_failure": (
        "[...document.querySelectorAll('ul.checks li code')].map(e => e.textContent)"
    ),
}


def test_html_report_renders_in_chromium(finished_run, tmp_path: Path) -> None:
    repo, run_id, _ = finished_run
    page = tmp_path / "report.html"
    proc = looprun("report", run_id, "--format", "html", "--output", str(page), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    # self-contained: no reference to anything outside the file
    assert "<link" not in html and "src=" not in html.replace("src=x", "")
    assert "http://" not in html and "https://" not in html.replace("https://looprun", "")
    shot = tmp_path / "report.png"
    result = open_page(page, PROBES, screenshot=shot)
    assert result.errors == [], result.errors
    assert result.requests == [page.resolve().as_uri()]  # the file itself, nothing else
    values = result.values
    assert values["title"] == f"looprun mini: done ({run_id})"
    assert values["timeline_rows"] == 3 and values["iterations"] == 2
    assert values["diffs"] == 2 and values["added_lines"] >= 2
    # the hostile assertion message is shown as text and never ran
    assert values["scripts"] == 0 and values["pwned"] == "undefined"
    assert any(HOSTILE in text for text in values["first_failure"])
    assert "retry" in values["text"] and "rule 2 (tests.failed > 0)" in values["text"]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
