"""The report of a nested run (an outer loop whose sub-loops are outer loops): the
sub-loop tree, each node linked to the sub-run's own report included below it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml
from tests.support.browser import chromium, open_page
from tests.support.cli import looprun, scripted_run
from tests.support.git_repos import git_repo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subloops"))
from subloop_templates import INNER, edit_turns
from test_nested import MID, TOP


def test_nested_run_report_shows_the_tree_with_working_links(tmp_path: Path) -> None:
    work = git_repo(tmp_path / "proj")
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "edit.yaml").write_text(INNER)
    (tpl / "mid.yaml").write_text(MID)
    (tpl / "top.yaml").write_text(TOP)
    script = tmp_path / "script.yaml"
    tasks = {
        m: {"tasks": {t: edit_turns(f"{m}_{t}.txt", f"{m} {t}\n") for t in "ab"}}
        for m in ("m1", "m2")
    }
    script.write_text(yaml.safe_dump({"tasks": tasks}))
    proc = looprun(
        *scripted_run(str(tpl / "top.yaml"), intent="x", workdir=work, script=script),
        "--json",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]

    data = json.loads(looprun("report", run_id, "--format", "json", cwd=work).stdout)
    tree = [(s["id"], s["template"], s["outcome"]) for s in data["subloops"]]
    assert tree == [("m1", "mid", "done"), ("m2", "mid", "done")]
    m1 = data["subloops"][0]["report"]
    assert m1["run_id"] == f"{run_id}.m1-1" and [s["id"] for s in m1["subloops"]] == ["a", "b"]
    leaf = m1["subloops"][0]["report"]
    assert "+m1 a" in leaf["iterations"][0]["diff"]  # the innermost sub-run's own diff
    # a sub-run is reachable by its dotted id too
    sub = json.loads(looprun("report", f"{run_id}.m1-1.a-1", "--format", "json", cwd=work).stdout)
    assert sub["run_id"] == leaf["run_id"]

    md = looprun("report", run_id, cwd=work).stdout
    anchor = f"run-{run_id}-m1-1-a-1"
    assert f"  - [a](#{anchor}) (edit): ✅ done" in md and f'<a id="{anchor}"></a>' in md

    if chromium() is None:  # the page is checked where a browser is; CI always has one
        assert not os.environ.get("CI"), "chromium is not installed: .ci/run installs it"
        return
    page = tmp_path / "nested.html"
    assert looprun("report", run_id, "--format", "html", "-o", str(page), cwd=work).returncode == 0
    probe = (
        "[...document.querySelectorAll('ul.tree a')]"
        ".map(a => !!document.querySelector(a.getAttribute('href')))"
    )
    result = open_page(
        page, {"links": probe, "runs": "document.querySelectorAll('section.run').length"}
    )
    assert result.errors == []
    assert len(result.values["links"]) == 10 and all(result.values["links"])
    assert result.values["runs"] == 7  # the top run, two mid runs, four leaves
