"""`looprun bugfix` on the real `inflection` sdist with real ruff: only new findings come back.

The package has dozens of ruff findings before the run (`UP032`, `UP025`, ...). A fix that
also adds an unused import gets the `lint` retry, and the request the model receives next
names that finding - not the pre-existing ones, not even those in the same file whose lines
the new import shifted down by one - and says in one line how many were already there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e_helpers import prompt_of
from real_package import (
    BUG,
    PACKAGE,
    edit_turns,
    planted_project,
    reproduce_turns,
    run_bugfix,
    run_events,
)

CODE = f"{PACKAGE}/__init__.py"
IMPORTS = ("import re\n", "import os\nimport re\n")  # line 12: everything below moves by one


def _fix_and_import() -> list[dict[str, Any]]:
    calls = [
        {"name": "edit_file", "arguments": {"path": CODE, "old": BUG[1], "new": BUG[0]}},
        {"name": "edit_file", "arguments": {"path": CODE, "old": IMPORTS[0], "new": IMPORTS[1]}},
    ]
    return [{"tool_calls": calls}, {"text": "Fixed ordinal."}]


def _lint(run_dir: str, iteration: int) -> dict[str, Any]:
    record = json.loads((Path(run_dir) / "observe" / f"{iteration}.json").read_text())
    return record["observers"]["lint"]


def test_a_lint_retry_carries_only_the_new_finding(sdist: Path, tmp_path: Path) -> None:
    work = planted_project(sdist, tmp_path)
    turns = [
        *reproduce_turns(),
        *_fix_and_import(),
        *edit_turns(CODE, IMPORTS[1], IMPORTS[0], "Removed the unused import."),
    ]
    summary = run_bugfix(work, tmp_path, turns)

    assert (summary["outcome"], summary["iterations"]) == ("done", 3), summary["stderr"]
    decisions = [
        (e["decision"]["action"], e["decision"]["rule"]) for e in run_events(summary, "iteration")
    ]
    assert decisions == [("done", "exit"), ("retry", "lint"), ("done", "exit")]
    before, after = _lint(summary["run_dir"], 0), _lint(summary["run_dir"], 2)
    assert after["errors"] == before["errors"] + 1 and before["errors"] > 0
    # a finding of the same file below the new import moved down a line, and is not new
    shifted = [
        i for i in after["items"] if i["file"] == CODE and i["line"] > 12 and i["rule"] != "F401"
    ]
    assert shifted, after["items"]
    assert {(i["rule"], i["line"] - 1) for i in shifted} <= {
        (i["rule"], i["line"]) for i in before["items"] if i["file"] == CODE
    }
    prompt = prompt_of(summary["run_dir"], 3)
    assert "F401" in prompt and "`os` imported but unused" in prompt, prompt
    assert f"{before['errors']} finding(s) already there at the start are not shown" in prompt
    findings = [ln for ln in prompt.splitlines() if " error [" in ln]
    assert findings == [f"{CODE}:12:8: error [F401] `os` imported but unused"], prompt
    assert "docs/conf.py" not in prompt and "UP032" not in prompt
