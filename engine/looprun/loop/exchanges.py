"""The model exchanges a run journals: each reply's usage charged to the run, and each
request recorded as what changed since the previous one (a conversation grows by a few
messages per call; writing it whole every time would grow the journal quadratically)."""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Sequence
from typing import Any

from looprun.loop.ports import Ports
from looprun.loop.state import LoopState, message_to_dict
from looprun.models.base import Message, Reply


class _Logged:
    """What the previous exchange of a journal sent, so the next logs only what is new.

    A request is logged as its new messages in full and runs of messages the previous
    request of the same ``log`` also sent as ``{"same": [first, last]}`` (their positions
    in it, from 0): a long turn resends its conversation on every call, and writing (and
    redacting) it all again made each call cost more than the one before. Messages are
    known by identity. A ``log`` is one process's run of a journal (a resumed run starts
    another), which every record names.
    """

    def __init__(self) -> None:
        self.id = secrets.token_hex(4)
        self._previous: list[Message] = []
        self._positions: dict[int, int] = {}

    def request(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in messages:
            j = self._positions.get(id(m))
            if j is None or self._previous[j] is not m:
                out.append(message_to_dict(m))
            elif out and "same" in out[-1] and out[-1]["same"][1] == j - 1:
                out[-1]["same"][1] = j
            else:
                out.append({"same": [j, j]})
        self._previous = list(messages)
        self._positions = {id(m): i for i, m in enumerate(self._previous)}
        return out


_LOGS: weakref.WeakKeyDictionary[Any, _Logged] = weakref.WeakKeyDictionary()


def _logged(journal: Any) -> _Logged:
    try:
        log = _LOGS.get(journal)
        if log is None:
            log = _LOGS[journal] = _Logged()
    except TypeError:  # a journal that cannot be weakly keyed: every message in full
        log = _Logged()
    return log


def record_reply(
    ports: Ports,
    state: LoopState,
    reply: Reply,
    messages: Sequence[Message],
    *,
    iteration: int,
    role: str,
    model: str,
) -> None:
    """Charge a model reply's usage to the run and journal the exchange, so the totals a
    resumed run starts from and the journal's record of requests never disagree."""
    state.prompt_tokens += reply.usage.prompt_tokens
    state.completion_tokens += reply.usage.completion_tokens
    state.cost_usd += reply.cost_usd
    log = _logged(ports.journal)
    ports.journal.exchange(
        {
            "iteration": iteration,
            "role": role,
            "model": model,
            "log": log.id,
            "request": log.request(messages),
            "reply": message_to_dict(reply.message),
            "finish": reply.finish,
            "usage": {
                "prompt_tokens": reply.usage.prompt_tokens,
                "completion_tokens": reply.usage.completion_tokens,
                "cost_usd": reply.cost_usd,
            },
        }
    )
