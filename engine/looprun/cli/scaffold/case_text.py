"""A starter case file for `looprun test` whose cases hold for the new template: its
name beside the template, and its text with the parent's numbers filled in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.cli.scaffold.values import SUFFIXES, flow, parent_of, value_at

_CASES: dict[str, str] = {
    "bugfix": """\
  - name: a newly failing test under the tests glob completes the reproduce task
    task: reproduce
    facts:
      tests: {ok: false, failed: 1, tests: 3, failing: [TESTS_ID]}
      diff: {files: [TESTS_FILE], lines: 12}
    expect: {action: done, exit: true}

  - name: a green suite completes the fix task
    task: fix
    facts:
      tests: {ok: true, tests: 4}
    expect: {action: done, exit: true}

  - name: a change that broke a rule is rolled back with the policy summary as feedback
    task: fix
    facts:
      policy: {violations: 1, summary: "- write_file: .github/ci.yml is outside the allowed paths"}
    expect:
      action: rollback
      target: previous
      message_contains: ".github/ci.yml is outside the allowed paths"

  - name: a diff over the limit keeps the task open
    task: fix
    facts:
      tests: {ok: true, tests: 4}
      diff: {lines: TOO_MANY}
    expect: {exit: false}

  - name: three identical iterations escalate to a person
    task: fix
    facts:
      progress: {repeats: 3}
      tests:
        ok: false
        failed: 1
        failing: [tests/test_invoice.py::test_zero]
        feedback: "tests/test_invoice.py::test_zero: ZeroDivisionError"
    expect: {action: escalate, message_contains: ZeroDivisionError}
""",
    "refactor": """\
  - name: a green suite with an untouched test tree is done
    facts:
      tests: {ok: true, tests: 12}
      diff: {files: [src/app/invoice.py], lines: 40}
    expect: {action: done, exit: true}

  - name: failing tests mean behaviour changed
    facts:
      tests:
        ok: false
        failed: 1
        failing: [tests/test_invoice.py::test_total]
        feedback: "tests/test_invoice.py::test_total: assert 10 == 12"
    expect: {action: retry, message_contains: [Behaviour changed, "assert 10 == 12"]}

  - name: a diff over the limit is sent back to be shrunk
    facts:
      tests: {ok: true, tests: 12}
      diff: {files: [src/app/invoice.py], lines: TOO_MANY}
    expect: {action: retry, exit: false, message_contains: Shrink it}

  - name: an edit to a test is rolled back
    facts:
      policy: {violations: 1, summary: "- edit_file: tests/test_invoice.py is denied"}
    expect: {action: rollback, target: previous, message_contains: tests/test_invoice.py}
""",
    "test_backfill": """\
  - name: the targets at the threshold with a green suite is done
    facts:
      inputs: {target: [src/app/invoice.py]}
      tests: {ok: true, tests: 20}
      cov: {target_percent: MIN_COVERAGE}
    expect: {action: done, exit: true}

  - name: coverage below the threshold asks for more tests
    facts:
      inputs: {target: [src/app/invoice.py]}
      tests: {ok: true, tests: 20}
      cov: {target_percent: BELOW, feedback: "src/app/invoice.py: lines 40-52 not covered"}
    expect: {action: retry, exit: false, message_contains: "lines 40-52 not covered"}

  - name: an edit outside the tests is rolled back
    facts:
      inputs: {target: [src/app/invoice.py]}
      policy:
        violations: 1
        summary: "- edit_file: src/app/invoice.py is outside the allowed paths"
    expect: {action: rollback, target: previous}
""",
    "feature": """\
  - name: every sub-loop done and the merged tree green is done
    facts:
      subloops: {all_done: true}
      tests: {ok: true, tests: 30}
    expect: {action: done, exit: true}

  - name: a failed sub-loop replans
    facts:
      subloops: {all_done: false, failed: true}
    expect: {action: replan, exit: false}

  - name: the same failure three times escalates
    facts:
      progress: {repeats: 3}
      subloops: {all_done: false, failed: true}
    expect: {action: escalate}
""",
}


def render_cases(template_file: str, base: str, parent: Mapping[str, Any] | None = None) -> str:
    """A starter case file for `looprun test` whose cases hold for the new template."""
    p = parent if parent is not None else parent_of(base)
    body = _CASES[base]
    if base == "bugfix":
        glob = str(value_at(p, "inputs.tests_glob.default") or "tests/**")
        folder = glob.split("*", 1)[0].rstrip("/") or "tests"
        body = body.replace("TESTS_FILE", flow(f"{folder}/test_invoice.py"))
        body = body.replace("TESTS_ID", flow(f"{folder}/test_invoice.py::test_zero"))
        body = body.replace("TOO_MANY", str(int(value_at(p, "act.constraints.max_diff_lines")) + 1))
    elif base == "refactor":
        body = body.replace("TOO_MANY", str(int(value_at(p, "inputs.max_diff_lines.default")) + 1))
    elif base == "test_backfill":
        threshold = float(value_at(p, "inputs.min_coverage.default"))
        body = body.replace("MIN_COVERAGE", flow(threshold))
        body = body.replace("BELOW", flow(max(threshold - 20, 0)))
    return f"""\
# Unit tests of {template_file}'s decisions: given one iteration's facts, this is what the
# loop does next. Run them with `looprun test {cases_path(Path(template_file)).name}` (or
# `looprun validate`), and add a case for every rule the team adds or changes.
# Observers a case does not mention are a clean pass; see docs/templates.md.
template: {flow(template_file)}
cases:
{body}"""


def cases_path(template: Path) -> Path:
    """`loops/team.yaml` -> `loops/team.cases.yaml`."""
    stem = template.name
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    return template.with_name(f"{stem}.cases.yaml")
