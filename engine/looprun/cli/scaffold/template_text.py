"""The text of a team template extending a built-in one: the overrides teams usually
change, set to the parent's values and commented."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from looprun.cli.scaffold.values import block_list, flow, parent_of, value_at


def _header(name: str, base: str, schema: str, file_name: str, stack: str) -> str:
    return f"""\
# yaml-language-server: $schema={schema}
#
# {name}: this team's {base} loop.
# It extends the built-in `{base}` template, so only what differs is written here;
#   looprun explain {file_name}     shows the merged result,
#   looprun validate {file_name}    checks it after every edit.
#
# Written for the {stack} stack: its values come from observers/{stack}.yaml. A run picks
# the stack from the repository's marker files; `--set stack={stack}` chooses it where
# that cannot tell (a repository with more than one stack).
#
# The values below are the parent's current ones: change them to fit this repository.
# Merge rules: mappings merge key by key; lists and scalars replace the parent's (restate
# a whole list to change it); `key: null` removes an inherited key.
looprun: 1
name: {name}
description: {flow(f"The team's {base} loop (extends the built-in {base} template).")}
extends: {base}
"""


def _described(p: Mapping[str, Any], key: str) -> str:
    """The stack's own description of input ``key``, as comment lines."""
    text = " ".join(str(value_at(p, f"inputs.{key}.description") or "").split())
    return "".join(f"  # {line}\n" for line in textwrap.wrap(text, 86))


_NARROW = "  # Narrow it to the part of the repository this loop works on."


def _test_command(p: Mapping[str, Any], extra: str = "") -> str:
    return f"""\
{_described(p, "test_command")}{_NARROW}{extra}
  test_command:
    default: {flow(value_at(p, "inputs.test_command.default"))}
"""


def _lint(p: Mapping[str, Any]) -> str:
    if value_at(p, "inputs.lint") is None:
        return ""
    return f"""\
{_described(p, "lint")}  # Set it to false when the repository lints only in CI.
  lint:
    default: {flow(value_at(p, "inputs.lint.default"))}
"""


def _paths(p: Mapping[str, Any], note: str) -> str:
    return f"""\
act:
  constraints:
    paths:
      # What the agent may write, as gitignore-style globs; deny wins over allow.
      # {note}
      allow:
{block_list(value_at(p, "act.constraints.paths.allow") or [], "        ")}
      deny:
{block_list(value_at(p, "act.constraints.paths.deny") or [], "        ")}
    # The largest diff (added + removed lines) the engine lets the loop produce.
    max_diff_lines: {flow(value_at(p, "act.constraints.max_diff_lines"))}
    # Changes under these globs pause the run until a person approves them
    # (`looprun resume RUN_ID --approve`):
    # approve:
    #   paths: ["migrations/**", "**/settings/**"]
"""


def _limits(p: Mapping[str, Any]) -> str:
    limits = value_at(p, "limits") or {}
    lines = "".join(f"  {key}: {flow(value)}\n" for key, value in limits.items())
    return f"""
# Hard caps for the whole run; each one that trips stops it with its own reason and exit
# code (timeout: 90, "90s", "20m", "1h30m"; per_tool caps calls of one tool).
limits:
{lines}"""


def _bugfix(p: Mapping[str, Any]) -> str:
    exit_ = value_at(p, "exit") or []
    return f"""
inputs:
{_test_command(p)}  # Where tests live: the reproducing test must be written under this glob.
  tests_glob:
    default: {flow(value_at(p, "inputs.tests_glob.default"))}
{_lint(p)}
{_paths(p, 'Typical: allow: ["src/**", "tests/**"]; deny: ["**/migrations/**", "**/*.lock"].')}
# Conditions that must all hold on fresh observations for a task to be done (this list
# replaces the parent's): keep `diff.lines <= N` in step with max_diff_lines above.
exit:
{block_list(exit_)}
{_limits(p)}"""


_UNDER_COVERAGE = (
    "\n  # It must run under the stack's coverage tool (the `cov` observer reads its report)."
)
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
    default: {flow(value_at(p, "inputs.max_diff_lines.default"))}

{_paths(p, "The tests are the specification: keep every test glob in deny.")}{_limits(p)}"""


def _test_backfill(p: Mapping[str, Any]) -> str:
    note = "Only tests may change: allow nothing but test files."
    return f"""
inputs:
{_test_command(p, _UNDER_COVERAGE)}{_COVERAGE}
  min_coverage:
    default: {flow(value_at(p, "inputs.min_coverage.default"))}

{_paths(p, note)}{_limits(p)}"""


def _feature(p: Mapping[str, Any]) -> str:
    return f"""
inputs:
{_test_command(p, _MERGED_TREE)}
plan:
  # At most this many tasks per plan; each one runs as a sub-loop.
  max_tasks: {flow(value_at(p, "plan.max_tasks"))}

each_task:
  # The template each task runs. Paths, commands and diff limits come from it: point it at
  # the team's own bugfix template (a path relative to this file, e.g.
  # `team-bugfix.yaml`, made with `looprun init team-bugfix.yaml`) to apply them to
  # every task.
  uses: {flow(value_at(p, "each_task.uses"))}
  # How many sub-loops run at once, each in its own git worktree.
  parallel: {flow(value_at(p, "each_task.parallel"))}
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


def render_template(
    name: str,
    base: str,
    schema: str,
    file_name: str,
    parent: Mapping[str, Any] | None = None,
    stack: str = "python",
) -> str:
    """The text of a team template extending `base` (``parent``: its composed data, in
    ``stack``)."""
    return _header(name, base, schema, file_name, stack) + _BODIES[base](
        parent if parent is not None else parent_of(base)
    )
