"""No-progress detection: a fingerprint per iteration, and a count of repeats.

Two iterations are equivalent when they took the same actions (tool + normalised
arguments), saw the same normalised observations and left the goal in the same state.
``progress.repeats`` is how many consecutive iterations, ending with this one, share a
fingerprint: 1 for a new one, 2 the second time in a row, and so on.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from looprun.data.value import valueclass
from looprun.observe.base import Observation
from looprun.observe.normalise import normalise

_SPACE = re.compile(r"\s+")
_PATH_KEYS = frozenset({"path", "file", "glob"})
_COMMAND_KEYS = frozenset({"command"})


def _norm_value(key: str, value: Any) -> Any:
    if isinstance(value, str):
        if key in _PATH_KEYS:
            value = value.strip()
            return posixpath.normpath(value) if value else value
        if key in _COMMAND_KEYS:
            return _SPACE.sub(" ", value.strip())
        # file content and edit text: trailing whitespace is noise, case is not
        return "\n".join(line.rstrip() for line in value.strip().splitlines())
    if isinstance(value, Mapping):
        return {str(k).casefold(): _norm_value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm_value(key, v) for v in value]
    return value


def normalise_action(tool: str, arguments: Mapping[str, Any] | None) -> str:
    """Tool name (case-folded) + arguments with sorted keys, trimmed; stable text."""
    args = {str(k).casefold(): _norm_value(str(k), v) for k, v in (arguments or {}).items()}
    return tool.strip().casefold() + " " + json.dumps(args, sort_keys=True, ensure_ascii=False)


def _mask(text: str) -> str:
    return normalise(text)


def observation_signature(name: str, obs: Observation) -> str:
    """What an observation says, with run-to-run noise masked (parsers pre-normalise)."""
    if obs.signature:
        sig = obs.signature
    else:
        sig = "\n".join(f"{i.id}: {i.message}" for i in obs.items) or (obs.error or "")
    return f"{name} ok={obs.ok} {_mask(sig)}"


def fingerprint(
    actions: Iterable[str], observations: Mapping[str, Observation], goal: Sequence[bool]
) -> str:
    h = hashlib.sha256()
    for action in actions:
        h.update(b"A" + action.encode("utf-8", "surrogatepass") + b"\0")
    for name in sorted(observations):
        sig = observation_signature(name, observations[name])
        h.update(b"O" + sig.encode("utf-8", "surrogatepass") + b"\0")
    h.update(b"G" + "".join("1" if g else "0" for g in goal).encode())
    return h.hexdigest()[:16]


@valueclass
class Progress:
    """The last iteration's fingerprint and how many times in a row it was seen."""

    fingerprint: str = ""
    repeats: int = 0

    def next(self, fp: str) -> Progress:
        return Progress(fp, self.repeats + 1 if fp == self.fingerprint else 1)

    def facts(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "repeats": self.repeats,
            "changed": self.repeats <= 1,
        }
