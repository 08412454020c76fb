"""The published JSON Schema, checked by a third-party validator (check-jsonschema), the
way an editor or a team's CI uses it: it accepts every file `looprun validate` accepts -
fragments without a name, `key: null` removals, observers a parent completes, refine
edits, numbers that name an input - and rejects the malformed corpus's schema mistakes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "template.schema.json"
CORPUS = Path(__file__).parent / "malformed"
VALIDATOR = Path(sys.executable).parent / "check-jsonschema"

# The corpus cases a schema can see (shape, types, names, versions, YAML itself). The
# others are mistakes only the loader can find: a misspelt fact, a cycle, an unreachable
# rule, a missing parent.
SCHEMA_LEVEL = (
    "action_typo.yaml",
    "bad_duration.yaml",
    "below_minimum.yaml",
    "binary.yaml",
    "comments_only.yaml",
    "condition_mapping.yaml",
    "duplicate_key.yaml",
    "duplicate_observer.yaml",
    "empty.yaml",
    "extends_missing_and_typo.yaml",
    "forbidden_pattern_typo.yaml",
    "invalid_observer_name.yaml",
    "missing_name.yaml",
    "non_utf8.yaml",
    "rollback_target.yaml",
    "scalar_document.yaml",
    "several_mistakes.yaml",
    "top_level_list.yaml",
    "unknown_limits_key.yaml",
    "unknown_top_key.yaml",
    "wrong_type_int.yaml",
    "wrong_version.yaml",
    "yaml_bad_indent.yaml",
    "yaml_tab.yaml",
    "yaml_unclosed_flow.yaml",
    "yaml_unclosed_quote.yaml",
)

# What teams write and `looprun validate` accepts, beyond the built-in templates.
TEAM_FILES = {
    "loops/packs/mypy.yaml": """\
        # a fragment: no name, only what it adds
        looprun: 1
        observe:
          types: {parser: regex, run: "mypy src", options: {preset: mypy}}
        refine:
          insert:
            - before: failures
              rules:
                - id: types
                  if: types.errors > 0
                  then: {retry: "{{ types.feedback }}"}
        """,
    "loops/base.yaml": """\
        looprun: 1
        name: base
        inputs:
          max_diff_lines: {type: integer, default: 200}
          run_timeout: {type: string, default: 20m}
        observe:
          tests: {parser: junit, run: "python -m pytest --junitxml=.j.xml", file: .j.xml}
          lint: {parser: sarif, run: "ruff check --output-format=sarif -o .r.sarif", file: .r.sarif}
          diff: {parser: git_diff}
        act:
          prompt: "{{ task.goal }}"
          constraints: {max_diff_lines: "{{ inputs.max_diff_lines }}"}
        exit: [tests.ok, "diff.lines <= inputs.max_diff_lines"]
        refine:
          - id: failures
            if: not tests.ok
            then: {retry: "{{ tests.feedback }}"}
          - else: retry
        limits: {max_iterations: 8, timeout: "{{ inputs.run_timeout }}"}
        """,
    "loops/team.yaml": """\
        looprun: 1
        extends: base.yaml            # the name comes from the parent
        include: [packs/mypy.yaml]
        inputs:
          max_diff_lines: {default: 80}
        observe:
          lint: null                  # removes the inherited observer
          tests: {run: "python -m pytest -q --junitxml=.j.xml"}   # completed by the parent
        act:
          constraints: {max_diff_lines: null}
        limits: {max_cost_usd: null, max_repeats: 3}
        """,
}


def _validator(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VALIDATOR), "--schemafile", str(SCHEMA), "-o", "json", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _looprun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "looprun", *args], capture_output=True, text=True, cwd=cwd
    )


def test_every_file_looprun_accepts_is_accepted_by_check_jsonschema(tmp_path: Path) -> None:
    for name, text in TEAM_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    for base in ("bugfix", "feature", "refactor", "test_backfill"):
        made = _looprun("init", f"loops/init/{base}.yaml", "--extends", base, cwd=tmp_path)
        assert made.returncode == 0, made.stderr
    files = sorted((tmp_path / "loops").rglob("*.yaml"))
    files += sorted((REPO / "templates").glob("**/*.yaml"))
    files += sorted((REPO / "samples").glob("**/*.yaml"))
    files = [f for f in files if "cases" not in f.name and "script" not in f.name]
    ours = _looprun("validate", *map(str, files), cwd=tmp_path)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    theirs = _validator(*files)
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert json.loads(theirs.stdout)["status"] == "ok"
    assert len(files) >= 13


def test_check_jsonschema_rejects_the_corpus_schema_mistakes() -> None:
    files = [CORPUS / name for name in SCHEMA_LEVEL]
    result = _validator(*files)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    rejected = {Path(e["filename"]).name for e in report["errors"] + report["parse_errors"]}
    assert rejected == set(SCHEMA_LEVEL)
    # a self-referencing alias: the validator's YAML loader gives up (recursion), and fails
    alias = _validator(CORPUS / "recursive_alias.yaml")
    assert alias.returncode != 0


def test_the_schema_names_inputs_and_refine_edits_for_editors() -> None:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    assert "name" not in schema["required"]  # fragments and children have none of their own
    edits = schema["$defs"]["refine_edits"]["properties"]
    assert set(edits) == {"replace", "insert", "before", "after"}
    assert "id" in schema["$defs"]["rule"]["properties"]
