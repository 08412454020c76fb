"""A run whose intent and sub-run ids carry markup, script links and bare URLs (and whose
test failure carries a script): the Markdown report shows them as text (no link, image
or HTML survives) and the HTML report escapes them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.report.runs import make_project
from tests.support.cli import looprun

EVIL = "<img src=x onerror=alert(1)> [x](javascript:alert(1)) https://evil.example www.evil.example"
EVIL_ID = 'x"><img src=x onerror=alert(2)>'


def _hostile_run(tmp: Path) -> tuple[Path, str]:
    repo, template, script = make_project(tmp)
    proc = looprun(
        str(template), "--intent", EVIL, "--model", f"script:{script}", "--json", cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    # A hostile run directory: a sub-run whose id (in summary.json and in its own
    # journal) is an HTML attribute break-out.
    run_dir = repo / ".looprun" / "runs" / run_id
    sub = run_dir / "subloops" / "s-1"
    shutil.copytree(run_dir, sub, ignore=shutil.ignore_patterns("subloops"))
    journal = sub / "journal.jsonl"
    lines = journal.read_text().splitlines()
    first = json.loads(lines[0])
    first["run_id"] = EVIL_ID
    journal.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["subloops"] = [{"id": "s", "attempt": 1, "template": "mini", "outcome": "done"}]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return repo, run_id


def _prose(md: str) -> str:
    """The Markdown without fenced blocks and inline code spans."""
    md = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", md, flags=re.S | re.M)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)


def test_untrusted_text_and_sub_run_ids_are_inert_in_markdown_and_html(tmp_path: Path) -> None:
    repo, run_id = _hostile_run(tmp_path)
    proc = looprun("report", run_id, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    # the intent is shown, every metacharacter escaped: no tag, no link, no autolink
    assert (
        "**Intent:** &lt;img src=x onerror=alert\\(1\\)&gt; \\[x\\]\\(javascript\\:alert\\(1\\)\\) "
        "https\\://evil.example www\\.evil.example"
    ) in md
    prose = _prose(md)
    assert "<img" not in prose and "](javascript" not in prose
    assert not re.search(r"(?i)[a-z]://|\bwww\.", prose)
    # the sub-run's id reaches the anchor and its link only as safe characters
    anchors = re.findall(r'<a id="([^"]*)"></a>', md)
    assert anchors == ["run-x---img-src-x-onerror-alert-2--"]
    assert "](#run-x---img-src-x-onerror-alert-2--)" in md
    assert md.count("<a ") == 1

    html = looprun("report", run_id, "--format", "html", cwd=repo)
    assert html.returncode == 0, html.stderr
    assert "<img src=x" not in html.stdout and "&lt;img src=x onerror=alert(1)&gt;" in html.stdout
    assert "&lt;img src=x onerror=alert(2)&gt;" in html.stdout
