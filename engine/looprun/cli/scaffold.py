"""`looprun init`: write a team template that extends a built-in one, and optionally a
starter case file for `looprun test`.

The overrides are written with the parent's current values (read from the composed
built-in, so they never drift from it): the new file behaves exactly like its parent until
the team edits it, and every key a team typically changes is already in place, commented.
Files are written atomically and checked with the real loader before they appear.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError, TemplateError, UsageError

BASES = ("bugfix", "feature", "refactor", "test_backfill")
DEFAULT_BASE = "bugfix"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Scaffold:
    """What `init` wrote: the template and, with `--cases`, its case file."""

    template: Path
    cases: Path | None
    schema: str


def _flow(value: Any) -> str:
    """A value as one line of YAML (JSON flow style is valid YAML; plain keys read better)."""
    if isinstance(value, Mapping) and all(isinstance(k, str) and _NAME.match(k) for k in value):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def _block_list(items: list[Any], indent: str = "  ") -> str:
    return "\n".join(f"{indent}- {_flow(item)}" for item in items)


def schema_ref(target: Path, given: str | None = None) -> str:
    """How the new file's first line points at the template schema; never a path that
    only exists on this machine.

    ``given`` (``--schema``): a file that exists is written relative to the new template
    (e.g. one written by ``looprun schema --output``), anything else as given. Without it:
    inside a checkout of this project, the relative path to its ``schemas/``; anywhere else
    the schema's published ``$id``.
    """
    from looprun.system.resources import schema_path, schemas_dir
    from looprun.template.schema_check import template_schema

    folder = target.absolute().parent
    if given is not None:
        file = Path(given).expanduser()
        if "://" not in given and file.is_file():
            return Path(os.path.relpath(file.absolute(), folder)).as_posix()
        return given
    schema = schema_path("template").resolve()
    root = schemas_dir().resolve().parent
    if (root / "pyproject.toml").is_file() and folder.resolve().is_relative_to(root):
        return Path(os.path.relpath(schema, folder.resolve())).as_posix()
    return str(template_schema()["$id"])


def default_name(path: Path, base: str) -> str:
    """A template name from the file name: `loops/Payments Bugfix.yaml` -> `Payments-Bugfix`."""
    stem = path.name
    for suffix in _SUFFIXES:
        stem = stem.removesuffix(suffix)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-_.")[:80]
    return name or f"team-{base}"


def _parent(base: str) -> dict[str, Any]:
    from looprun.system.resources import builtin_template
    from looprun.template.compose import compose

    path = builtin_template(base)
    if path is None:  # pragma: no cover - BASES are shipped with the package
        raise UsageError(f"built-in template {base!r} is missing from this installation")
    data = compose(path).data
    return data if isinstance(data, dict) else {}


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


# --- the template ---------------------------------------------------------------------


def _header(name: str, base: str, schema: str, file_name: str) -> str:
    return f"""\
# yaml-language-server: $schema={schema}
#
# {name}: this team's {base} loop.
# It extends the built-in `{base}` template, so only what differs is written here;
#   looprun explain {file_name}     shows the merged result,
#   looprun validate {file_name}    checks it after every edit.
#
# The values below are the parent's current ones: change them to fit this repository.
# Merge rules: mappings merge key by key; lists and scalars replace the parent's (restate
# a whole list to change it); `key: null` removes an inherited key.
looprun: 1
name: {name}
description: {_flow(f"The team's {base} loop (extends the built-in {base} template).")}
extends: {base}
"""


def _test_command(p: Mapping[str, Any], extra: str = "") -> str:
    return f"""\
  # The command that runs the test suite (`--junitxml=...` is appended, so it must be
  # pytest-compatible). Narrow it to the part of the repository this loop works on,
  # e.g. `python -m pytest -q -p no:cacheprovider services/payments/tests`.{extra}
  test_command:
    default: {_flow(_get(p, "inputs.test_command.default"))}
"""


def _lint(p: Mapping[str, Any]) -> str:
    return f"""\
  # ruff after every act turn; set to false when the repository lints only in CI.
  lint:
    default: {_flow(_get(p, "inputs.lint.default"))}
"""


def _paths(p: Mapping[str, Any], note: str) -> str:
    return f"""\
act:
  constraints:
    paths:
      # What the agent may write, as gitignore-style globs; deny wins over allow.
      # {note}
      allow:
{_block_list(_get(p, "act.constraints.paths.allow") or [], "        ")}
      deny:
{_block_list(_get(p, "act.constraints.paths.deny") or [], "        ")}
    # The largest diff (added + removed lines) the engine lets the loop produce.
    max_diff_lines: {_flow(_get(p, "act.constraints.max_diff_lines"))}
    # Changes under these globs pause the run until a person approves them
    # (`looprun resume RUN_ID --approve`):
    # approve:
    #   paths: ["migrations/**", "**/settings/**"]
"""


def _limits(p: Mapping[str, Any]) -> str:
    limits = _get(p, "limits") or {}
    lines = "".join(f"  {key}: {_flow(value)}\n" for key, value in limits.items())
    return f"""
# Hard caps for the whole run; each one that trips stops it with its own reason and exit
# code (timeout: 90, "90s", "20m", "1h30m"; per_tool caps calls of one tool).
limits:
{lines}"""


def _bugfix(p: Mapping[str, Any]) -> str:
    exit_ = _get(p, "exit") or []
    return f"""
inputs:
{_test_command(p)}  # Where tests live: the reproducing test must be written under this glob.
  tests_glob:
    default: {_flow(_get(p, "inputs.tests_glob.default"))}
{_lint(p)}
{_paths(p, 'Typical: allow: ["src/**", "tests/**"]; deny: ["**/migrations/**", "**/*.lock"].')}
# Conditions that must all hold on fresh observations for a task to be done (this list
# replaces the parent's): keep `diff.lines <= N` in step with max_diff_lines above.
exit:
{_block_list(exit_)}
{_limits(p)}"""


_UNDER_COVERAGE = "\n  # It must run under coverage.py (the coverage observer reads its data)."
_MERGED_TREE = "\n  # Here it checks the merged tree, after the sub-loops' work is merged."
_REFACTOR_DIFF = "  # The largest diff the finished refactoring may have (an exit condition)."
_COVERAGE = """\
  # Coverage (percent of lines) the target files must reach together. The targets
  # themselves are required on each run: --set target=src/billing.py,src/tax.py"""


def _refactor(p: Mapping[str, Any]) -> str:
    return f"""
inputs:
{_test_command(p)}{_lint(p)}{_REFACTOR_DIFF}
  max_diff_lines:
    default: {_flow(_get(p, "inputs.max_diff_lines.default"))}

{_paths(p, "The tests are the specification: keep every test glob in deny.")}{_limits(p)}"""


def _test_backfill(p: Mapping[str, Any]) -> str:
    note = "Only tests may change: allow nothing but test files."
    return f"""
inputs:
{_test_command(p, _UNDER_COVERAGE)}{_COVERAGE}
  min_coverage:
    default: {_flow(_get(p, "inputs.min_coverage.default"))}

{_paths(p, note)}{_limits(p)}"""


def _feature(p: Mapping[str, Any]) -> str:
    return f"""
inputs:
{_test_command(p, _MERGED_TREE)}
plan:
  # At most this many tasks per plan; each one runs as a sub-loop.
  max_tasks: {_flow(_get(p, "plan.max_tasks"))}

each_task:
  # The template each task runs. Paths, commands and diff limits come from it: point it at
  # the team's own bugfix template (a path relative to this file, e.g.
  # `team-bugfix.yaml`, made with `looprun init team-bugfix.yaml`) to apply them to
  # every task.
  uses: {_flow(_get(p, "each_task.uses"))}
  # How many sub-loops run at once, each in its own git worktree.
  parallel: {_flow(_get(p, "each_task.parallel"))}
  # Inputs of each sub-loop (merged with the parent's `with`): the sub-loops run the same
  # test command as this loop.
  with:
    test_command: "{{{{ inputs.test_command }}}}"
{_limits(p)}"""


_BODIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "bugfix": _bugfix,
    "feature": _feature,
    "refactor": _refactor,
    "test_backfill": _test_backfill,
}


def render_template(name: str, base: str, schema: str, file_name: str) -> str:
    """The text of a team template extending `base`."""
    return _header(name, base, schema, file_name) + _BODIES[base](_parent(base))


# --- the case file --------------------------------------------------------------------

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
      cov: {percent: MIN_COVERAGE}
    expect: {action: done, exit: true}

  - name: coverage below the threshold asks for more tests
    facts:
      inputs: {target: [src/app/invoice.py]}
      tests: {ok: true, tests: 20}
      cov: {percent: BELOW, feedback: "src/app/invoice.py: lines 40-52 not covered"}
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
    p = parent if parent is not None else _parent(base)
    body = _CASES[base]
    if base == "bugfix":
        glob = str(_get(p, "inputs.tests_glob.default") or "tests/**")
        folder = glob.split("*", 1)[0].rstrip("/") or "tests"
        body = body.replace("TESTS_FILE", _flow(f"{folder}/test_invoice.py"))
        body = body.replace("TESTS_ID", _flow(f"{folder}/test_invoice.py::test_zero"))
        body = body.replace("TOO_MANY", str(int(_get(p, "act.constraints.max_diff_lines")) + 1))
    elif base == "refactor":
        body = body.replace("TOO_MANY", str(int(_get(p, "inputs.max_diff_lines.default")) + 1))
    elif base == "test_backfill":
        threshold = float(_get(p, "inputs.min_coverage.default"))
        body = body.replace("MIN_COVERAGE", _flow(threshold))
        body = body.replace("BELOW", _flow(max(threshold - 20, 0)))
    return f"""\
# Unit tests of {template_file}'s decisions: given one iteration's facts, this is what the
# loop does next. Run them with `looprun test {cases_path(Path(template_file)).name}` (or
# `looprun validate`), and add a case for every rule the team adds or changes.
# Observers a case does not mention are a clean pass; see docs/templates.md.
template: {_flow(template_file)}
cases:
{body}"""


# --- writing --------------------------------------------------------------------------


def cases_path(template: Path) -> Path:
    """`loops/team.yaml` -> `loops/team.cases.yaml`."""
    stem = template.name
    for suffix in _SUFFIXES:
        stem = stem.removesuffix(suffix)
    return template.with_name(f"{stem}.cases.yaml")


def _check(path: Path, base: str) -> None:
    """Usage mistakes, before anything is written."""
    if base not in BASES:
        raise UsageError(
            f"unknown template {base!r} for --extends; the built-ins are: {', '.join(BASES)}"
        )
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the file to write, e.g. {path}/team.yaml")
    if not path.name.endswith(_SUFFIXES):
        raise UsageError(f"{path}: a template file name ends in .yaml or .yml")


def _created_dirs(folder: Path) -> list[Path]:
    """The directories `mkdir(parents=True)` would create, deepest first."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _stage(target: Path, text: str) -> Path:
    """Write `text` to a temporary file beside `target`, flushed to disk."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def init_template(
    path: str | Path,
    *,
    base: str = DEFAULT_BASE,
    name: str | None = None,
    cases: bool = False,
    force: bool = False,
    schema: str | None = None,
) -> Scaffold:
    """Write a team template at `path` (and its case file); refuse to overwrite unless forced.

    Both files are staged beside their targets, checked with the real loader, and only then
    renamed into place, so an error leaves no partial file (and no directory it created).
    """
    target = Path(path).expanduser()
    _check(target, base)
    name = name if name is not None else default_name(target, base)
    if not _NAME.match(name) or len(name) > 80:
        raise UsageError(
            f"--name {name!r}: use up to 80 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
    case_file = cases_path(target) if cases else None
    if not force:
        for existing in (target, case_file):
            if existing is not None and existing.exists():
                raise UsageError(f"{existing} already exists; pass --force to overwrite it")

    ref = schema_ref(target, schema)
    parent = _parent(base)
    text = _header(name, base, ref, target.name) + _BODIES[base](parent)
    case_text = render_cases(target.name, base, parent) if case_file else None

    made = _created_dirs(target.parent.absolute())
    staged: list[tuple[Path, Path]] = []
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staged.append((_stage(target, text), target))
        if case_file is not None and case_text is not None:
            staged.append((_stage(case_file, case_text), case_file))
        _verify(staged[0][0], target)
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        _cleanup(staged, made)
        raise LooprunError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        _cleanup(staged, made)
        raise
    return Scaffold(template=target, cases=case_file, schema=ref)


def _verify(staged: Path, target: Path) -> None:
    """The staged template must load; a failure here is a bug in looprun, not the user's."""
    from looprun.template.loader import load_template

    try:
        load_template(staged)
    except TemplateError as exc:
        detail = str(exc).replace(str(staged), str(target))
        raise LooprunError(f"the generated template does not validate (a bug):\n{detail}") from exc


def _cleanup(staged: list[tuple[Path, Path]], made: list[Path]) -> None:
    for tmp, _ in staged:
        tmp.unlink(missing_ok=True)
    for folder in made:  # deepest first; only the directories this call created
        try:
            folder.rmdir()
        except OSError:
            break
