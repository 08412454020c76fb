"""Template constructs as the engine really interprets them: the real CLI in a subprocess,
a real git repository in a temp dir, the scripted model, real observer commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("x = 1\n")
    _git(work, "init", "-q")
    _git(work, "config", "user.email", "t@example.com")
    _git(work, "config", "user.name", "t")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "init")
    return work


def run_template(
    repo: Path, template: str, script: str, *args: str
) -> tuple[int, dict[str, Any], str, list[dict[str, Any]]]:
    """Run the template; returns exit code, JSON summary, stderr and the iteration records."""
    t = repo.parent / "template.yaml"
    s = repo.parent / "script.yaml"
    t.write_text(textwrap.dedent(template))
    s.write_text(textwrap.dedent(script))
    command = [sys.executable, "-m", "looprun", str(t), "--intent", "x", "--json"]
    proc = subprocess.run(
        [*command, "--model", f"script:{s}", "--workdir", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    # observe/0.json is the baseline; the records of the iterations start at 1
    records = sorted(
        (p for p in repo.glob(".looprun/runs/*/observe/*.json") if p.stem != "0"),
        key=lambda p: int(p.stem),
    )
    return proc.returncode, summary, proc.stderr, [json.loads(p.read_text()) for p in records]


def test_observer_when_sees_the_fresh_facts_of_earlier_observers(repo: Path) -> None:
    template = """
        looprun: 1
        name: when-earlier
        observe:
          first: {parser: exit_code, run: "true"}
          second:
            parser: exit_code
            run: "true"
            when: first.ok and progress.repeats == 0 and iteration == 1
        act: {prompt: go}
        exit: [second.ran and second.ok]
        limits: {max_iterations: 2}
    """
    code, summary, err, records = run_template(repo, template, "- text: hi\n")
    assert code == 0, err
    assert summary["outcome"] == "done"
    second = records[0]["observers"]["second"]
    assert second["ran"] is True and second["error"] is None


def test_a_prompt_may_read_declared_facts_before_the_first_observation(repo: Path) -> None:
    template = """
        looprun: 1
        name: early-facts
        observe:
          t: {parser: exit_code, run: "false"}
        act:
          prompt: "{% if t.timed_out %}slow{% endif %} go {{ t.output_tail }}"
        exit: [t.ok]
        limits: {max_iterations: 2}
    """
    code, summary, err, records = run_template(repo, template, "- text: hi\n")
    assert code == 3, err  # exhausted, not a runtime error in iteration 1
    assert summary["code"] == "max_iterations"
    assert len(records) == 2


def test_a_failed_observer_still_has_its_parser_facts_for_conditions(repo: Path) -> None:
    # `second`'s `when` reads a name the engine does not provide at run time (its
    # value is a string, so `> 1` raises): the observer fails, and the refine rule
    # reading its parser-specific fact still evaluates.
    template = """
        looprun: 1
        name: failed-facts
        observe:
          t: {parser: exit_code, run: "true"}
          second:
            parser: exit_code
            run: "true"
            when: run.id > 1
        act: {prompt: go}
        exit: [second.ok]
        refine:
          - if: not second.timed_out and second.error
            then: {abort: "second failed: {{ second.output_tail }}."}
          - else: retry
        limits: {max_iterations: 2}
    """
    code, summary, err, records = run_template(repo, template, "- text: hi\n")
    assert code == 6, err
    assert summary["outcome"] == "aborted"
    assert summary["reason"] == "second failed: ."
    assert records[0]["observers"]["second"]["ok"] is False


def test_a_planned_done_when_with_an_unknown_fact_gets_the_retry(repo: Path) -> None:
    template = """
        looprun: 1
        name: planned
        plan: {mode: model, max_tasks: 2}
        observe:
          t: {parser: exit_code, run: "true"}
        act: {prompt: "{{ task.goal }}"}
        exit: [t.ok]
        limits: {max_iterations: 2}
    """
    script = """
        - text: '{"tasks": [{"id": "a", "goal": "g", "done_when": "t.exitcode == 0"}]}'
        - text: '{"tasks": [{"id": "a", "goal": "g", "done_when": "t.exit_code == 0"}]}'
        - text: nothing to do
    """
    code, summary, err, _ = run_template(repo, template, script)
    assert code == 0, err
    assert summary["outcome"] == "done"
    exchanges = [
        json.loads(line)
        for f in repo.glob(".looprun/runs/*/exchanges.jsonl")
        for line in f.read_text().splitlines()
    ]
    retry = exchanges[1]["request"][-1]["content"]
    assert "observer 't' (parser exit_code) has no fact 'exitcode'" in retry
