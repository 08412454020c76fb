"""A conversation's rounds as the context budget handles them: well formed (every call
answered, every answer called for), measured, and cut in the middle when too long.

A round is one assistant message and the tool results answering its calls; a long act
turn is one round of many steps (``Steps``), dropped from the oldest step on.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from looprun.models.base import Message

# A tool output in an oversized latest round keeps at least this much on the first pass.
MIN_RESULT_CHARS = 160
CUT_MARK = "\n[... {n} characters cut to fit the context budget ...]\n"


def cut_middle(text: str, keep_chars: int) -> str:
    """Keep the first two thirds and the last third of ``keep_chars``, cutting at lines.

    The start of a block (the intent, the first lines of a failure) and its end (the
    most recent lines of a summary) are what matter; the middle is what goes.
    """
    if len(text) <= keep_chars:
        return text
    keep_chars = max(keep_chars, 0)
    head_n = (keep_chars * 2) // 3
    tail_n = keep_chars - head_n
    head = text[:head_n]
    newline = head.rfind("\n")
    if newline >= head_n // 2:  # end on a whole line when that loses little
        head = head[: newline + 1]
    tail = text[len(text) - tail_n :] if tail_n else ""
    newline = tail.find("\n")
    if 0 <= newline < len(tail) // 2:
        tail = tail[newline + 1 :]
    cut = len(text) - len(head) - len(tail)
    result = head.rstrip("\n") + CUT_MARK.format(n=cut) + tail.lstrip("\n")
    return result if len(result) < len(text) else text


def check_round(index: int, round_: Sequence[Message]) -> None:
    """Raise ValueError unless every call in the round has a result and vice versa."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in round_:
        if message.role == "assistant":
            calls.update(c.id for c in message.tool_calls)
        elif message.role == "tool":
            if message.tool_call_id not in calls:
                raise ValueError(
                    f"round {index}: tool result {message.tool_call_id!r} answers no call "
                    "made earlier in the same round"
                )
            answered.add(message.tool_call_id)
    missing = calls - answered
    if missing:
        raise ValueError(f"round {index}: tool calls without a result: {sorted(missing)}")


_size = attrgetter("size_chars")


def chars_of(messages: Sequence[Message]) -> int:
    """The characters of ``messages`` (each size is cached on its message): summed
    without a Python frame per message, as every request is sized several times."""
    return sum(map(_size, messages))


def well_formed(round_: Sequence[Message]) -> bool:
    try:
        check_round(0, round_)
    except ValueError:
        return False
    return True


class Steps:
    """Where the steps of one act turn begin and running sums of their sizes, kept
    across the requests of the turn: the turn only grows, so each request adds its new
    messages and finds the oldest step that still fits by bisection, instead of sizing
    the kept steps one by one again (which made every step cost more than the last)."""

    def __init__(self, round_: Sequence[Message], lead_end: int):
        self.round = round_
        self.lead_end = lead_end
        self.lead_chars = chars_of(round_[:lead_end])
        self.begins: list[int] = []  # index of each step's assistant message
        # least[i]: the sizes of round_[lead_end : lead_end + i] cut to the first pass's
        # floor (see least_chars); whole[i]: their sizes as they are
        self.least = [0]
        self.whole = [0]
        self.last: Message | None = None  # the last message taken in
        # Each step is checked on its own once it is complete (a newer step began): when
        # every step and the prompt pass, every prompt + suffix of steps passes
        # check_round, so the kept part of a long turn need not be rescanned per request.
        self.checked = 0  # steps checked so far (all but the newest, at most)
        self.sound = all(m.role not in ("tool", "assistant") for m in round_[:lead_end])

    def continued_by(self, round_: Sequence[Message], lead_end: int) -> bool:
        """Whether ``round_`` is this turn, only grown (the same list, the same prompt,
        the last message taken in still in its place)."""
        seen = self.lead_end + len(self.least) - 1
        return (
            round_ is self.round
            and lead_end == self.lead_end
            and len(round_) >= seen
            and (seen == 0 or round_[seen - 1] is self.last)
        )

    def extend(self) -> None:
        """Take in the messages added to the round since the last request."""
        round_, least, whole = self.round, self.least, self.whole
        for i in range(self.lead_end + len(least) - 1, len(round_)):
            message = round_[i]
            if message.role == "assistant":
                self.begins.append(i)
            least.append(least[-1] + least_chars(message))
            whole.append(whole[-1] + message.size_chars)
        self.last = round_[-1] if round_ else None
        begins = self.begins
        while self.sound and self.checked < len(begins) - 1:
            self.sound = well_formed(round_[begins[self.checked] : begins[self.checked + 1]])
            self.checked += 1

    def all_well_formed(self) -> bool:
        """Whether the prompt and every step (the newest as it is now) pass on their own."""
        if not self.sound:
            return False
        return not self.begins or well_formed(self.round[self.begins[-1] :])

    def total_chars(self) -> int:
        return self.lead_chars + self.whole[-1]

    def least_between(self, begin: int, end: int) -> int:
        return self.least[end - self.lead_end] - self.least[begin - self.lead_end]

    def whole_between(self, begin: int, end: int) -> int:
        return self.whole[end - self.lead_end] - self.whole[begin - self.lead_end]


def least_chars(message: Message) -> int:
    """An upper bound of ``message``'s size once its text is cut to the first pass's
    floor (tool outputs and assistant texts; other messages stay whole then)."""
    size = message.size_chars
    if message.role not in ("tool", "assistant"):
        return size
    text = len(message.content)
    floor = MIN_RESULT_CHARS + len(CUT_MARK) - 3 + len(str(text))
    return size - text + min(text, floor)
