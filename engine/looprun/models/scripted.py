"""A scripted model: plays authored turns in order, for tests, samples and dry runs.

The script is a YAML list; each item answers one model call, across all roles:
``{text: "..."}`` or ``{tool_calls: [{name: ..., arguments: {...}}], text: "..."}``.
When the list is used up, every further call answers with text only.

For outer loops the script may instead be a mapping, so that each sub-loop plays its
own script whatever order parallel sub-loops call in::

    turns: [...]            # this loop's own calls (alias: plan)
    tasks:
      task-id: [...]        # the sub-loop of that task: a list, or a nested mapping
      other: {attempts: [[...], [...]]}   # one script per attempt (the last repeats)

A turn may carry ``delay_s`` (the answer comes after that many seconds), for tests and
benchmarks of concurrency, and ``role: holdout``: it answers the call that asks for
held-out variants, and only that call (see ``_pick``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from looprun.errors import UsageError
from looprun.models.base import Message, Reply, ToolCall, ToolSpec, Usage

EXHAUSTED_TEXT = "(scripted model: script exhausted, no further actions)"
HOLDOUT_ROLE = "holdout"  # the role that writes held-out variants (see _pick)
# libyaml's loader where present: a script of thousands of turns loads in a blink
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedModel:
    """Answers from a list of authored turns; thread-safe so sub-loops may share it."""

    def __init__(
        self,
        turns: Sequence[Mapping[str, Any]],
        *,
        ref: str = "script:<inline>",
        script_key: tuple[tuple[str, int], ...] = (),
    ):
        self.ref = ref
        self.script_key = script_key  # (task id, attempt) per nesting level; see select_script
        self._turns = [self._check(i, t) for i, t in enumerate(turns)]
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Message, ...]]] = []  # (role, messages) as received
        self.output_caps: list[int | None] = []  # max_output_tokens of each call

    @classmethod
    def from_file(cls, path: str | Path, key: Sequence[tuple[str, int]] = ()) -> ScriptedModel:
        """Load a script; ``key`` picks a sub-loop's own script out of a mapping script."""
        p = Path(path)
        try:
            data = yaml.load(p.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
        except OSError as exc:
            raise UsageError(f"{p}: cannot read model script: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise UsageError(f"{p}: model script is not valid YAML: {exc}") from None
        if data is None:
            data = []
        try:
            turns = select_script(data, tuple(key))
            return cls(turns, ref=f"script:{p}", script_key=tuple(key))
        except ValueError as exc:
            raise UsageError(f"{p}: {exc}") from None

    @staticmethod
    def _check(index: int, turn: Any) -> Mapping[str, Any]:
        if not isinstance(turn, Mapping):
            raise ValueError(f"turn {index + 1}: expected a mapping with text and/or tool_calls")
        unknown = set(turn) - {"text", "tool_calls", "role", "usage", "delay_s"}
        if unknown:
            raise ValueError(f"turn {index + 1}: unknown keys {sorted(unknown)}")
        for call in turn.get("tool_calls") or []:
            if not isinstance(call, Mapping) or "name" not in call:
                raise ValueError(f"turn {index + 1}: each tool call needs a name")
        return turn

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._next

    @property
    def position(self) -> int:
        """How many turns have been played; saved by the journal so a resumed run continues."""
        return self._next

    def seek(self, position: int) -> None:
        with self._lock:
            self._next = max(0, min(position, len(self._turns)))

    def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        role: str = "act",
        timeout_s: float | None = None,
        max_output_tokens: int | None = None,
    ) -> Reply:
        with self._lock:
            self.calls.append((role, tuple(messages)))
            self.output_caps.append(max_output_tokens)
            turn, index = self._pick(role)
        delay = turn.get("delay_s")
        if isinstance(delay, (int, float)) and delay > 0:
            time.sleep(float(delay))
        calls = tuple(
            ToolCall(
                id=f"call_{index}_{n}",
                name=str(c["name"]),
                arguments=dict(c.get("arguments") or {}),
            )
            for n, c in enumerate(turn.get("tool_calls") or [])
        )
        text = str(turn.get("text") or "")
        # _estimate_tokens(m.content) + 4 per message, without a call per message
        prompt = sum(max(1, len(m.content) // 4) for m in messages) + 4 * len(messages)
        usage = Usage(prompt, _estimate_tokens(text + str(turn.get("tool_calls") or "")))
        return Reply(
            message=Message("assistant", text, calls),
            finish="tool_calls" if calls else "stop",
            usage=usage,
            model=self.ref,
        )

    def _pick(self, role: str) -> tuple[Mapping[str, Any], int]:
        """The next turn for a call of ``role`` (the lock held). A turn tagged
        ``role: holdout`` answers only the holdout role, and the holdout role plays only
        such a turn: a script written before that role existed is played as it was, its
        holdout call unanswered, and a holdout turn the run never asks for is passed over."""
        while role != HOLDOUT_ROLE and self._tagged(self._next):
            self._next += 1
        if role == HOLDOUT_ROLE and not self._tagged(self._next):
            return {"text": ""}, self._next
        if self._next < len(self._turns):
            self._next += 1
            return self._turns[self._next - 1], self._next - 1
        return {"text": EXHAUSTED_TEXT}, self._next

    def _tagged(self, index: int) -> bool:
        return index < len(self._turns) and self._turns[index].get("role") == HOLDOUT_ROLE


def select_script(data: Any, key: tuple[tuple[str, int], ...]) -> list[Any]:
    """The turns one loop plays: the whole list, or its part of a mapping script.

    A plain list serves every loop from its start (sub-loops included); a mapping gives
    the loop at ``key`` — (task id, attempt) per nesting level — its own ``tasks`` entry.
    """
    node = data
    for task_id, attempt in key:
        if isinstance(node, list):
            return node
        if not isinstance(node, Mapping):
            raise ValueError("a model script must be a YAML list of turns or a mapping")
        tasks = node.get("tasks") or {}
        if not isinstance(tasks, Mapping) or task_id not in tasks:
            raise ValueError(f"the script has no entry for task {task_id!r} under tasks")
        node = tasks[task_id]
        if isinstance(node, Mapping) and "attempts" in node:
            attempts = node["attempts"]
            if not isinstance(attempts, list) or not attempts:
                raise ValueError(f"tasks.{task_id}.attempts must be a non-empty list of scripts")
            node = attempts[min(max(attempt, 1), len(attempts)) - 1]
    if isinstance(node, list):
        return node
    if isinstance(node, Mapping):
        unknown = set(node) - {"turns", "plan", "tasks", "attempts"}
        if unknown:
            raise ValueError(f"unknown keys in a mapping script: {sorted(unknown)}")
        turns = node.get("turns", node.get("plan")) or []
        if not isinstance(turns, list):
            raise ValueError("turns (or plan) must be a list of turns")
        return turns
    raise ValueError("a model script must be a YAML list of turns or a mapping")
