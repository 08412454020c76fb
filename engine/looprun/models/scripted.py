"""A scripted model: plays authored turns in order, for tests, samples and dry runs.

The script is a YAML list; each item answers one model call, across all roles:
``{text: "..."}`` or ``{tool_calls: [{name: ..., arguments: {...}}], text: "..."}``.
When the list is used up, every further call answers with text only.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from looprun.errors import UsageError
from looprun.models.base import Message, Reply, ToolCall, ToolSpec, Usage

EXHAUSTED_TEXT = "(scripted model: script exhausted, no further actions)"


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedModel:
    """Answers from a list of authored turns; thread-safe so sub-loops may share it."""

    def __init__(self, turns: Sequence[Mapping[str, Any]], *, ref: str = "script:<inline>"):
        self.ref = ref
        self._turns = [self._check(i, t) for i, t in enumerate(turns)]
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Message, ...]]] = []  # (role, messages) as received

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"{p}: cannot read model script: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise UsageError(f"{p}: model script is not valid YAML: {exc}") from None
        if data is None:
            data = []
        if not isinstance(data, list):
            raise UsageError(f"{p}: a model script must be a YAML list of turns")
        try:
            return cls(data, ref=f"script:{p}")
        except ValueError as exc:
            raise UsageError(f"{p}: {exc}") from None

    @staticmethod
    def _check(index: int, turn: Any) -> Mapping[str, Any]:
        if not isinstance(turn, Mapping):
            raise ValueError(f"turn {index + 1}: expected a mapping with text and/or tool_calls")
        unknown = set(turn) - {"text", "tool_calls", "role", "usage"}
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
    ) -> Reply:
        with self._lock:
            self.calls.append((role, tuple(messages)))
            if self._next < len(self._turns):
                turn = self._turns[self._next]
                index = self._next
                self._next += 1
            else:
                turn, index = {"text": EXHAUSTED_TEXT}, self._next
        calls = tuple(
            ToolCall(
                id=f"call_{index}_{n}",
                name=str(c["name"]),
                arguments=dict(c.get("arguments") or {}),
            )
            for n, c in enumerate(turn.get("tool_calls") or [])
        )
        text = str(turn.get("text") or "")
        prompt = sum(_estimate_tokens(m.content) + 4 for m in messages)
        usage = Usage(prompt, _estimate_tokens(text + str(turn.get("tool_calls") or "")))
        return Reply(
            message=Message("assistant", text, calls),
            finish="tool_calls" if calls else "stop",
            usage=usage,
            model=self.ref,
        )
