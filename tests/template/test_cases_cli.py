"""`looprun test`: template unit tests through the real CLI in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TEMPLATE = """
    looprun: 1
    name: tiny
    inputs:
      limit: {type: integer, default: 3}
    observe:
      tests: {parser: junit, run: "pytest --junitxml=r.xml", file: r.xml}
      diff: {parser: git_diff}
    act: {prompt: go}
    exit: [tests.ok, "diff.lines <= 50"]
    refine:
      - if: policy.violations > 0
        then: {rollback: base, feedback: "undone: {{ policy.summary }}"}
      - if: tests.failed > 0
        then:
          - if: progress.repeats >= inputs.limit
            then: {escalate: "stuck on {{ tests.failing | join(', ') }}"}
          - else: {retry: "{{ tests.failed }} failing"}
"""


def looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(tmp_path: Path, cases: str) -> None:
    (tmp_path / "tiny.yaml").write_text(textwrap.dedent(TEMPLATE))
    (tmp_path / "tiny.cases.yaml").write_text(textwrap.dedent(cases))


def test_the_builtin_bugfix_cases_pass() -> None:
    proc = looprun("test", "templates/tests/bugfix.cases.yaml", cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS ") >= 10
    assert "0 failed" in proc.stdout


def test_cases_reach_nested_rules_messages_and_exit(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        template: tiny.yaml
        cases:
          - name: green
            facts: {diff: {lines: 10}}
            expect: {rule: exit, action: done, exit: true}
          - name: a policy violation rolls back to base
            facts: {policy: {violations: 1, diff_violations: 1, summary: "- run: denied"}}
            expect: {rule: "1", action: rollback, target: base, message: "undone: - run: denied"}
          - name: stuck tests escalate through the sub-tree
            facts:
              tests: {ok: false, failed: 2, failing: [a, b]}
              progress: {repeats: 3}
            expect: {rule: "2.1", action: escalate, message: "stuck on a, b"}
          - name: an input changes the threshold
            facts:
              inputs: {limit: 5}
              tests: {ok: false, failed: 2}
              progress: {repeats: 3}
            expect: {rule: "2.2", message: "2 failing"}
          - name: no rule matches, so the default retry carries the unmet conditions
            facts: {diff: {lines: 99}}
            expect:
              rule: none
              action: retry
              message_contains: "Exit conditions not yet met: diff.lines <= 50"
              exit_failed: ["diff.lines <= 50"]
        """,
    )
    proc = looprun("test", "tiny.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed, 0 failed" in proc.stdout


def test_a_failing_case_shows_what_fired_instead(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        cases:
          - name: wrong expectation
            facts: {tests: {ok: false, failed: 1}}
            expect: {rule: "2.1", action: escalate}
          - name: right one
            facts: {tests: {ok: false, failed: 1}}
            expect: {rule: "2.2"}
        """,
    )
    proc = looprun("test", "tiny.yaml", "tiny.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "FAIL wrong expectation (tiny.cases.yaml:3:" in out
    # a rule is named the same everywhere: file:line (or its id), whether given by position
    assert "rule: expected tiny.yaml:16, got tiny.yaml:18" in out
    assert "action: expected escalate, got retry" in out
    assert "fired: rule tiny.yaml:18 (2.2)" in out and "-> retry: '1 failing'" in out
    assert "exit fails: tests.ok" in out
    assert "PASS right one" in out
    assert "1 passed, 1 failed" in out


def test_an_expression_error_in_a_case_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        cases:
          - name: failing is not a list here
            facts: {tests: {ok: false, failed: 1, failing: 7}, progress: {repeats: 3}}
            expect: {rule: "2.1"}
        """,
    )
    proc = looprun("test", "tiny.yaml", "tiny.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "FAIL failing is not a list here" in proc.stdout
    assert "error: " in proc.stdout and "Traceback" not in proc.stderr


def test_bad_case_files_get_located_errors(tmp_path: Path) -> None:
    write(
        tmp_path,
        """
        cases:
          - name: typos
            tsk: x
            facts:
              tests: {faild: 1}
              progres: {repeats: 2}
              inputs: {limt: 1}
            expect: {rule: "3", action: retyr}
          - name: typos
        """,
    )
    proc = looprun("test", "tiny.yaml", "tiny.cases.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    err = proc.stderr
    assert "tiny.cases.yaml:4:5: unknown case key 'tsk' (did you mean 'task'?)" in err
    assert "tiny.cases.yaml:6:15: observer 'tests' (parser junit) has no fact 'faild'" in err
    assert "tiny.cases.yaml:7:7: unknown name 'progres' (did you mean 'progress'?)" in err
    assert "tiny.cases.yaml:8:16: no input named 'limt' (did you mean 'limit'?)" in err
    assert "tiny.cases.yaml:9:20: no rule with an action named 3 (rules: tiny.yaml:12, " in err
    assert "tiny.cases.yaml:9:33: action is one of" in err
    assert "tiny.cases.yaml:10:11: case name 'typos' is used twice" in err
    assert "tiny.cases.yaml:10:5: a case needs an `expect` mapping" in err
    assert "Traceback" not in err


def test_rule_positions_match_explain_numbering() -> None:
    from looprun.cli.cases.load import rule_paths
    from looprun.template.loader import load_template

    text = looprun("explain", "bugfix", cwd=REPO).stdout
    for path in rule_paths(load_template("bugfix")):
        assert f" {path}. " in text, path


def test_validate_checks_case_files_against_their_template(tmp_path: Path) -> None:
    ok = looprun("validate", "templates/tests/bugfix.cases.yaml", cwd=REPO)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    write(
        tmp_path,
        """
        template: tiny.yaml
        cases:
          - name: stale
            facts: {tests: {failures: 1}}
            expect: {rule: "2.3"}
        """,
    )
    bad = looprun("validate", "tiny.cases.yaml", cwd=tmp_path)
    assert bad.returncode == 2
    assert "tiny.cases.yaml:5:21: observer 'tests' (parser junit) has no fact 'failures'" in (
        bad.stdout
    )
    assert "tiny.cases.yaml:6:20: no rule with an action named 2.3" in bad.stdout
