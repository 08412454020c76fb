"""Command arguments cannot reach outside the workdir, or into denied paths, by other
spellings: nested ``key=value`` values in long options, words a program splits again,
``~`` and ``$HOME`` the program expands itself, ``--cache-clear``, ``git diff
--no-index`` and ``--output``. A real CLI run with a scripted model proposes each one;
every one is refused (journaled with its rule) and nothing outside or denied changes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from tests.security.test_state_dir import tree_state
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

PY = Path(sys.executable).name
TEMPLATE = f"""\
looprun: 1
name: t
plan: {{mode: none}}
act:
  prompt: go
  tools: [run]
  constraints:
    paths: {{allow: ["src/**", "tests/**"], deny: ["secrets/**"]}}
    commands: {{allow: ["{PY} -m pytest *", "git diff *"]}}
observe:
  d: {{parser: git_diff}}
exit: [d.ok]
refine:
  - else: {{retry: again}}
limits: {{max_iterations: 1}}
"""
ATTEMPTS = {
    f"{PY} -m pytest -q --override-ini=cache_dir=../outside/cache": "command.path_outside",
    f"{PY} -m pytest -q -o 'addopts=--junitxml ../outside/report.xml'": "command.path_outside",
    f"{PY} -m pytest -q '--rootdir=$HOME'": "command.unjudged",
    f"{PY} -m pytest -q --junitxml=~/report.xml": "command.unjudged",
    f"{PY} -m pytest -q --cache-clear": "command.unjudged",
    f"{PY} -m pytest -q --junitxml=secrets/report.xml": "command.path_deny",
    "git diff --no-index src/app.py secrets/prod.env": "command.path_deny",
    "git diff --output=secrets/prod.env": "command.path_deny",
}


def test_command_arguments_that_reach_outside_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("outside\n")
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "secrets").mkdir()
    (work / "src" / "app.py").write_text("x = 1\n")
    (work / "tests" / "test_app.py").write_text("def test_x():\n    assert True\n")
    (work / "secrets" / "prod.env").write_text("DB=prod\n")
    git_repo(work)
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    calls = [{"name": "run", "arguments": {"command": c}} for c in ATTEMPTS]
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "trying", "tool_calls": calls}, {"text": "ok"}]))
    outside_before, secrets_before = tree_state(outside), tree_state(work / "secrets")
    proc = looprun(
        str(tmp_path / "t.yaml"), "--intent", "x", "--workdir", str(work),
        "--model", f"script:{script}", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "done", proc.stderr
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    events = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    results = [e for e in events if e["event"] == "tool_call"]
    refused = {e["arguments"]["command"]: e.get("violation", {}) for e in results}
    rules = [e["rule"] for e in events if e["event"] == "policy_violation"]
    assert rules == list(ATTEMPTS.values()), (rules, refused)
    assert all(e["is_error"] for e in results)
    assert tree_state(outside) == outside_before
    assert tree_state(work / "secrets") == secrets_before
    assert not (work / "secrets" / "report.xml").exists()
