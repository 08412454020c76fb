"""Refine edits: a team template adds, replaces and removes rules of the tree it extends
without copying it, every rule keeps one name, and every mistake is located."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PARENT = """\
looprun: 1
name: team-base
observe:
  tests: {parser: junit, run: "python -m pytest -q --junitxml=.junit.xml", file: .junit.xml}
  lint: {parser: sarif, run: "ruff check --output-format=sarif -o .ruff.sarif", file: .ruff.sarif}
act: {prompt: "{{ task.goal }}{{ feedback }}"}
exit: [tests.ok]
refine:
  - id: policy
    if: policy.violations > 0
    then: {rollback: previous, feedback: "{{ policy.summary }}"}
  - id: stuck
    if: progress.repeats >= 3
    then: {escalate: "stuck"}
  - id: failing
    if: not tests.ok
    then:
      - id: errors
        if: tests.errors > 0
        then: {retry: "errors: {{ tests.feedback }}"}
      - id: failures
        else: {retry: "{{ tests.feedback }}"}
  - id: fallback
    else: retry
"""


def looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def layout(tmp_path: Path, child: str, fragment: str | None = None) -> Path:
    """A team repository: loops/base.yaml, loops/team.yaml (and loops/packs/extra.yaml)."""
    loops = tmp_path / "loops"
    (loops / "packs").mkdir(parents=True)
    (loops / "base.yaml").write_text(PARENT, encoding="utf-8")
    (loops / "team.yaml").write_text(textwrap.dedent(child), encoding="utf-8")
    if fragment is not None:
        (loops / "packs" / "extra.yaml").write_text(textwrap.dedent(fragment), encoding="utf-8")
    return loops / "team.yaml"


def names(tmp_path: Path) -> list[str]:
    """The resolved tree as `looprun explain --format json` names it, depth first."""
    proc = looprun("explain", "loops/team.yaml", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr

    def walk(rules: list[dict]) -> list[str]:
        out = []
        for rule in rules:
            out.append(rule["id"])
            for key in ("then", "else"):
                if isinstance(rule.get(key), list):
                    out += walk(rule[key])
        return out

    return walk(json.loads(proc.stdout)["refine"])


def test_edits_add_replace_and_remove_rules_without_restating_the_tree(tmp_path: Path) -> None:
    layout(
        tmp_path,
        """\
        looprun: 1
        name: team
        extends: base.yaml
        observe:
          types: {parser: regex, run: "mypy src", options: {preset: mypy}}
        refine:
          replace:
            stuck: {if: progress.repeats >= 2, then: {escalate: "stuck twice"}}
            errors: null
          insert:
            - after: failing
              rules:
                - id: types
                  if: types.errors > 0
                  then: {retry: "{{ types.feedback }}"}
            - before: failures
              rules:
                - if: tests.failed > 10
                  then: {retry: "Many tests fail; look for one cause first."}
          before:
            - id: budget
              if: budget.remaining_iterations == 1
              then: {escalate: "last iteration"}
          after:
            - id: lint
              if: lint.errors > 0
              then: {retry: "{{ lint.feedback }}"}
        """,
    )
    proc = looprun("validate", "loops/team.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # replace keeps the id; null removes; insert lands next to its anchor, at any depth;
    # `after` lands ahead of the inherited final `else`, which stays last
    assert names(tmp_path) == [
        "budget",
        "policy",
        "stuck",
        "failing",
        "team.yaml:18",
        "failures",
        "types",
        "lint",
        "fallback",
    ]
    text = looprun("explain", "loops/team.yaml", cwd=tmp_path).stdout
    assert "2. [policy] if policy.violations > 0 -> rollback to previous" in text
    assert '3. [stuck] if progress.repeats >= 2 -> escalate: "stuck twice"' in text
    assert "4.1. [team.yaml:18] if tests.failed > 10 -> retry" in text
    assert "4.2. [failures] else -> retry" in text
    assert "7. [fallback] else -> retry" in text
    chart = looprun("explain", "loops/team.yaml", "--format", "mermaid", cwd=tmp_path).stdout
    assert '"types: types.errors #gt; 0"' in chart
    assert '"team.yaml:18: tests.failed #gt; 10"' in chart


def test_a_fragment_adds_its_observer_and_its_rule(tmp_path: Path) -> None:
    layout(
        tmp_path,
        """\
        looprun: 1
        name: team
        extends: base.yaml
        include: [packs/extra.yaml]
        """,
        fragment="""\
        looprun: 1
        observe:
          types: {parser: regex, run: "mypy src", options: {preset: mypy}}
        refine:
          insert:
            - before: fallback
              rules:
                - id: types
                  if: types.errors > 0
                  then: {retry: "{{ types.feedback }}"}
        """,
    )
    assert looprun("validate", "loops/packs/extra.yaml", cwd=tmp_path).returncode == 0
    assert looprun("validate", "loops/team.yaml", cwd=tmp_path).returncode == 0
    assert names(tmp_path)[-2:] == ["types", "fallback"]


def test_edit_mistakes_are_located_in_the_file_that_makes_them(tmp_path: Path) -> None:
    layout(
        tmp_path,
        """\
        looprun: 1
        name: team
        extends: base.yaml
        refine:
          replace:
            stuk: null
          insert:
            - after: failnig
              rules: [{if: tests.failed > 1, then: retry}]
            - before: policy
              after: stuck
              rules: [{else: retry}]
          apend:
            - if: lint.erors > 0
              then: retry
          before:
            - id: policy
              if: iteration > 5
              then: abort
        """,
    )
    proc = looprun("validate", "loops/team.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    out = proc.stdout
    assert "loops/team.yaml:6:5: refine.replace.stuk: no rule with id 'stuk' in the " in out
    assert "(did you mean 'stuck'?)" in out
    assert "loops/team.yaml:8:14: refine.insert[0].after: no rule with id 'failnig'" in out
    assert "loops/team.yaml:10:7: refine.insert[1]: give one rule id, as `before` or" in out
    assert "loops/team.yaml:13:3: refine.apend: unknown refine edit 'apend'" in out
    assert "Traceback" not in out + proc.stderr


def test_added_rules_are_checked_like_any_rule(tmp_path: Path) -> None:
    layout(
        tmp_path,
        """\
        looprun: 1
        name: team
        extends: base.yaml
        refine:
          before:
            - id: policy
              if: lint.erors > 0
              then: retry
        """,
    )
    proc = looprun("validate", "loops/team.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "loops/team.yaml:7:11: refine[0].if: observer 'lint' (parser sarif) has no fact " in (
        proc.stdout
    )
    assert re.search(
        r"refine\[1\]\.id: rule id 'policy' is used twice \(first at \S*team", (proc.stdout)
    ), proc.stdout


def test_looprun_test_names_rules_as_explain_does(tmp_path: Path) -> None:
    layout(
        tmp_path,
        """\
        looprun: 1
        name: team
        extends: base.yaml
        exit: [tests.ok, lint.errors == 0]
        refine:
          after:
            - id: lint
              if: lint.errors > 0
              then: {retry: "{{ lint.feedback }}"}
        """,
    )
    (tmp_path / "loops" / "team.cases.yaml").write_text(
        textwrap.dedent(
            """\
            template: team.yaml
            cases:
              - name: lint errors, tests green
                facts: {lint: {ok: false, errors: 2, feedback: "F401 unused"}}
                expect: {rule: lint, action: retry, message: "F401 unused"}
              - name: by position, the same rule
                facts: {lint: {ok: false, errors: 2}}
                expect: {rule: "4"}
              - name: failing tests are named by the inherited id
                facts: {tests: {ok: false, failed: 1, feedback: "t1 failed"}}
                expect: {rule: failures}
              - name: a retry carries every failing observer it does not name
                facts:
                  tests: {ok: false, failed: 1, feedback: "t1 failed"}
                  lint: {ok: false, errors: 1, feedback: "F401 unused"}
                expect: {rule: failures, message: "t1 failed\\n\\n[lint]\\nF401 unused"}
            """
        ),
        encoding="utf-8",
    )
    proc = looprun("test", "loops/team.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed, 0 failed" in proc.stdout


BUILTIN_IDS = {
    "bugfix": [
        "policy_violation",
        "vanished",
        "stuck",
        "repeated",
        "reproduce",
        "reproduce_errors",
        "reproduce_missing",
        "reproduce_wrong_failure",
        "reproduce_unexercised",
        "reproduce_self_raised",
        "reproduce_fresh_differs",
        "reproduce_outside_tests",
        "heldout_missing",
        "fix_not_passing",
        "plain_differs",
        "plain_broken",
        "fresh_differs",
        "regressed",
        "baseline_touched",
        "strict",
        "holdout",
        "heldout_variants",
        "lint",
        "fallback",
    ],
    "feature": [
        "stuck",
        "repeated",
        "subloops_failed",
        "integration_failing",
        "holdout",
        "unexplained",
    ],
    "refactor": [
        "policy_violation",
        "stuck",
        "repeated",
        "behaviour_changed",
        "broke_many",
        "behaviour_changed_retry",
        "diff_too_large",
        "unpinned_unjudged",
        "unpinned",
        "lint",
        "fallback",
    ],
    "test_backfill": [
        "policy_violation",
        "stuck",
        "repeated",
        "tests_failing",
        "mutants_survived",
        "mutants_broken",
        "coverage_short",
    ],
}


def test_every_builtin_rule_has_the_id_the_docs_list(tmp_path: Path) -> None:
    docs = (REPO / "docs" / "templates.md").read_text(encoding="utf-8")
    for name, expected in BUILTIN_IDS.items():
        builtin = str(REPO / "templates" / f"{name}.yaml")
        proc = looprun("explain", builtin, "--format", "json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rules: list[dict] = json.loads(proc.stdout)["refine"]
        found: list[str] = []
        while rules:
            rule = rules.pop(0)
            found.append(rule["id"])
            for key in ("then", "else"):
                if isinstance(rule.get(key), list):
                    rules[:0] = rule[key]
        assert found == expected, name
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        assert all(f"`{rule_id}`" in row for rule_id in expected), row


def test_a_team_template_edits_a_builtin_tree_by_id(tmp_path: Path) -> None:
    loops = tmp_path / "loops"
    loops.mkdir()
    (loops / "team.yaml").write_text(
        textwrap.dedent(
            """\
            looprun: 1
            name: team-bugfix
            extends: bugfix
            refine:
              replace:
                stuck: {if: progress.repeats >= 2, then: {escalate: "Stuck twice on {{ task.id }}"}}
                repeated: null
              insert:
                - after: regressed
                  rules:
                    - id: too_big
                      if: diff.lines > 200
                      then: {retry: "Keep the fix under 200 changed lines."}
            """
        ),
        encoding="utf-8",
    )
    (loops / "team.cases.yaml").write_text(
        textwrap.dedent(
            """\
            template: team.yaml
            cases:
              - name: the replaced rule fires at its new threshold
                task: fix
                facts:
                  progress: {repeats: 2}
                  tests: {ok: false, failed: 1, failing: [tests/test_a.py::test_a]}
                  tasks:
                    reproduce: {baseline: {tests: {newly_failing: [tests/test_a.py::test_a]}}}
                expect: {rule: stuck, action: escalate, message: "Stuck twice on fix"}
              - name: the inserted rule sits after the inherited one
                task: fix
                facts:
                  diff: {lines: 450}
                expect: {rule: too_big, action: retry}
            """
        ),
        encoding="utf-8",
    )
    proc = looprun("test", "loops/team.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed, 0 failed" in proc.stdout
    proc = looprun("explain", "loops/team.yaml", "--format", "json", cwd=tmp_path)
    top = [rule["id"] for rule in json.loads(proc.stdout)["refine"]]
    assert "repeated" not in top
    assert top.index("too_big") == top.index("regressed") + 1
