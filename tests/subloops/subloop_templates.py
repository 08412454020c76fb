"""Small outer and inner templates for the conflict and resume tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

INNER = """\
looprun: 1
name: edit
inputs:
  intent: {type: string, required: true}
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [write_file]
  max_steps: 4
observe:
  diff: {parser: git_diff}
exit: ["diff.lines > 0"]
refine:
  - else: {escalate: "no change"}
limits: {max_iterations: 2}
"""

OUTER = """\
looprun: 1
name: pair
inputs:
  intent: {type: string, required: true}
plan:
  mode: static
  tasks:
    - {id: left, goal: "change the greeting one way"}
    - {id: right, goal: "change the greeting another way"}
each_task:
  uses: ./edit.yaml
  with: {intent: "{{ task.goal }}"}
  isolation: worktree
  parallel: 2
exit: ["subloops.all_done"]
refine:
  - if: subloops.failed
    then: {escalate: "{{ subloops.failed }} sub-loop(s) did not finish"}
  - else: {escalate: "unexpected"}
limits: {max_iterations: 1}
"""


def write_templates(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "edit.yaml").write_text(INNER)
    (where / "pair.yaml").write_text(OUTER)
    return where / "pair.yaml"


def edit_turns(path: str, content: str, delay_s: float = 0.0) -> list[dict]:
    call = {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}
    if delay_s:
        call["delay_s"] = delay_s
    return [call, {"text": "done"}]


def per_task_script(path: Path, edits: Mapping[str, tuple[str, str]]) -> Path:
    """An outer model's script with one part per task, each writing (file, content)."""
    turns = {task: edit_turns(file, content) for task, (file, content) in edits.items()}
    path.write_text(yaml.safe_dump({"tasks": turns}))
    return path
