"""The context budget: every model request is built to fit ``context.budget_tokens``.

A request is the pinned part (system prompt and the head user message, which carries the
intent, the current task, the latest failure and a summary of earlier attempts) followed
by the most recent *rounds* verbatim. A round is one assistant message and the tool
results answering its calls. Older rounds are dropped whole, so a tool result never
survives without the call that produced it, nor a call without its result.

Tokens are estimated from characters (``chars_per_token``) plus a per-message overhead,
and the estimate is corrected from the prompt token counts providers report.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from looprun.errors import ContextTooLong
from looprun.loop.rounds import (
    CUT_MARK,
    MIN_RESULT_CHARS,
    Steps,
    chars_of,
    check_round,
    cut_middle,
)
from looprun.models.base import Message, Model, Reply, ToolSpec

# Smallest budget that still leaves room for a shrunk head; below it nothing useful fits.
MIN_BUDGET_TOKENS = 256
# A block of the head is never cut below this many characters (its first lines survive).
_MIN_BLOCK_CHARS = 240
_OMITTED_NOTE = "\n\n({n} earlier tool round{s} omitted to fit the context budget.)"
_STEPS_NOTE = "\n\n({n} earlier step{s} of this turn omitted to fit the context budget.)"
_CALIBRATION_RANGE = (0.25, 4.0)


class ContextBudget:
    """Builds requests that fit a token budget; deterministic for the same inputs."""

    def __init__(
        self,
        budget_tokens: int,
        recent_rounds: int,
        *,
        chars_per_token: float = 4.0,
        per_message_overhead: int = 4,
    ):
        if budget_tokens < MIN_BUDGET_TOKENS:
            raise ValueError(f"context budget must be at least {MIN_BUDGET_TOKENS} tokens")
        if recent_rounds < 0:
            raise ValueError("recent_rounds must not be negative")
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.budget_tokens = budget_tokens
        self.recent_rounds = recent_rounds
        self.chars_per_token = chars_per_token
        self.per_message_overhead = per_message_overhead
        # Reported tokens / estimated tokens, learned from usage (1.0 until calibrated).
        self.correction = 1.0
        self._calibrated = False
        # the steps of the turn being fitted (see Steps)
        self._steps: Steps | None = None

    def __repr__(self) -> str:
        return (
            f"ContextBudget(budget_tokens={self.budget_tokens}, recent_rounds="
            f"{self.recent_rounds}, correction={self.correction:.3f})"
        )

    # -- estimation ---------------------------------------------------------------------

    def _raw(self, messages: Sequence[Message]) -> float:
        return chars_of(messages) / self.chars_per_token

    def _tokens(self, chars: int, count: int) -> int:
        """Estimated tokens of ``count`` messages holding ``chars`` characters in all."""
        if not count:
            return 0
        text_tokens = math.ceil(chars / self.chars_per_token * self.correction)
        return text_tokens + self.per_message_overhead * count

    def estimate(self, messages: Sequence[Message]) -> int:
        """Estimated prompt tokens of ``messages``, corrected by calibration."""
        return self._tokens(chars_of(messages), len(messages))

    def calibrate(self, sent: Sequence[Message], reported_prompt_tokens: int) -> None:
        """Correct the estimator from the prompt tokens a provider reported for ``sent``.

        The first report sets the correction; later ones move it a third of the way,
        so one odd response cannot swing it. It stays within 0.25..4.
        """
        overhead = self.per_message_overhead * len(sent)
        raw = self._raw(sent)
        if raw <= 0 or reported_prompt_tokens <= overhead:
            return
        observed = (reported_prompt_tokens - overhead) / raw
        low, high = _CALIBRATION_RANGE
        observed = min(max(observed, low), high)
        if self._calibrated:
            observed = self.correction + (observed - self.correction) / 3
        self.correction = min(max(observed, low), high)
        self._calibrated = True

    def shrink(self, factor: float = 0.5) -> ContextBudget:
        """A smaller budget (for the one retry after the provider said: too long)."""
        if not 0 < factor < 1:
            raise ValueError("shrink factor must be between 0 and 1")
        smaller = ContextBudget(
            max(MIN_BUDGET_TOKENS, int(self.budget_tokens * factor)),
            self.recent_rounds,
            chars_per_token=self.chars_per_token,
            per_message_overhead=self.per_message_overhead,
        )
        smaller.correction = self.correction
        smaller._calibrated = self._calibrated
        return smaller

    def adopt(self, other: ContextBudget) -> None:
        """Take over ``other``'s budget and calibration (the trimmed one after a refusal),
        so a budget shared by a whole run keeps what the provider taught it."""
        self.budget_tokens = other.budget_tokens
        self.correction = other.correction
        self._calibrated = other._calibrated

    # -- building -----------------------------------------------------------------------

    def _chars_for(self, tokens: float) -> int:
        """How many characters ``tokens`` estimated tokens buy."""
        return max(0, math.floor(tokens * self.chars_per_token / self.correction))

    def _fit_pinned(self, pinned: list[Message], budget: int) -> list[Message]:
        """Cut the longest blocks of the pinned messages (middle first) until they fit.

        Blocks are paragraphs (separated by blank lines); each keeps its first lines, so
        the intent and the first lines of the latest failure survive. The head user
        message is cut before the system prompt.
        """
        order = [i for i, m in enumerate(pinned) if m.role != "system"]
        order += [i for i, m in enumerate(pinned) if m.role == "system"]
        for index in order:
            blocks = pinned[index].content.split("\n\n")
            for _ in range(4 * len(blocks) + 4):
                excess = self.estimate(pinned) - budget
                if excess <= 0:
                    return pinned
                longest = max(range(len(blocks)), key=lambda i: (len(blocks[i]), -i))
                block = blocks[longest]
                if len(block) <= _MIN_BLOCK_CHARS + len(CUT_MARK) + 8:
                    break
                need = self._chars_for(excess) + len(CUT_MARK) + 16
                keep = max(_MIN_BLOCK_CHARS, len(block) - need)
                blocks[longest] = cut_middle(block, keep)
                pinned[index] = replace(pinned[index], content="\n\n".join(blocks))
        # Last resort (a head made of many short blocks): cut the whole message text.
        for index in order:
            excess = self.estimate(pinned) - budget
            if excess <= 0:
                break
            text = pinned[index].content
            keep = max(0, len(text) - self._chars_for(excess) - len(CUT_MARK) - 16)
            pinned[index] = replace(pinned[index], content=cut_middle(text, keep))
        return pinned

    def _cost_within(self, messages: Sequence[Message], cap: int) -> int:
        """Estimated tokens of ``messages``, or a number above ``cap`` as soon as they
        are known to exceed it: sized from the newest back, so a long turn that cannot
        fit costs what fits, not its whole length."""
        chars = 0
        per, cpt, correction = self.per_message_overhead, self.chars_per_token, self.correction
        for count, message in enumerate(reversed(messages), 1):
            chars += message.size_chars
            # _tokens(chars, count), inline: this runs for every message of a request
            tokens = math.ceil(chars / cpt * correction) + per * count
            if tokens > cap:
                return tokens
        return self._tokens(chars, len(messages))

    def _fit_round(self, round_: Sequence[Message], room: int) -> tuple[list[Message], int]:
        """The latest round made to fit ``room``; returns it and how many steps went.

        The round is the act prompt (the messages before the first assistant message)
        and *steps* (an assistant message, its tool results and any nudge after them).
        The prompt and the newest step always stay; older steps stay, newest first, as
        long as they would fit with their outputs cut to a few lines; the rest go
        whole (a note in the prompt says how many), so no result loses its call. Then
        texts are cut in the middle: older tool outputs first, then the newest ones,
        then the assistant's texts, and the prompt last and only down to its first
        lines. Tool call arguments are never cut (they must stay JSON). Only the kept
        steps are sized, so a turn of thousands of steps costs what one request holds.
        """
        steps = self._steps_of(round_)
        if self._tokens(steps.total_chars(), len(round_)) <= room:
            return list(round_), 0
        lead_end, begins = steps.lead_end, steps.begins
        users = [i for i in range(lead_end) if round_[i].role == "user"]
        chars = steps.lead_chars
        if users:
            chars += len(_STEPS_NOTE.format(n=10**6, s="s"))
        start = len(round_)
        if begins:  # the newest step counts whole: it is cut last
            newest = begins[-1]
            chars += steps.whole_between(newest, len(round_))
            count = lead_end + len(round_) - newest

            def fits(first: int) -> bool:
                """Whether the steps from ``begins[first]`` to the newest (older ones
                with their outputs cut to the floor) fit beside the prompt."""
                older = steps.least_between(begins[first], newest)
                return self._tokens(chars + older, count + newest - begins[first]) <= room

            # older steps stay, newest first, while they fit: the oldest that does
            low, high = 0, len(begins) - 1
            while low < high:
                middle = (low + high) // 2
                if fits(middle):
                    high = middle
                else:
                    low = middle + 1
            start = begins[low]
        dropped = bisect_left(begins, start)  # a step begins at each assistant message
        kept = list(round_[:lead_end]) + list(round_[start:])
        if dropped and users:
            note = _STEPS_NOTE.format(n=dropped, s="" if dropped == 1 else "s")
            kept[users[-1]] = replace(kept[users[-1]], content=kept[users[-1]].content + note)
        return self._cut_texts(kept, room), dropped

    def _steps_of(self, round_: Sequence[Message]) -> Steps:
        """The step index of ``round_``: the last request's when this is the same turn
        grown since (same list, same prompt), else a new one."""
        lead_end = next((i for i, m in enumerate(round_) if m.role == "assistant"), len(round_))
        steps = self._steps
        if steps is None or not steps.continued_by(round_, lead_end):
            steps = self._steps = Steps(round_, lead_end)
        steps.extend()
        return steps

    def _cut_texts(self, round_: list[Message], room: int) -> list[Message]:
        """Cut texts in the middle until ``round_`` fits ``room`` (or nothing more can go)."""
        chars = chars_of(round_)
        count = len(round_)
        if self._tokens(chars, count) <= room:
            return round_
        last_call = max((i for i, m in enumerate(round_) if m.role == "assistant"), default=-1)
        tools = [i for i, m in enumerate(round_) if m.role == "tool"]
        older = [i for i in tools if i < last_call]
        newest = [i for i in tools if i > last_call]
        texts = [i for i, m in enumerate(round_) if m.role == "assistant"]
        users = [i for i, m in enumerate(round_) if m.role not in ("tool", "assistant")]
        passes = [(older + newest + texts, MIN_RESULT_CHARS), (older + newest + texts, 0)]
        passes.append((users, _MIN_BLOCK_CHARS))
        for indexes, floor in passes:
            for i in indexes:
                excess = self._tokens(chars, count) - room
                if excess <= 0:
                    return round_
                text = round_[i].content
                keep = max(floor, len(text) - self._chars_for(excess) - len(CUT_MARK) - 16)
                cut = cut_middle(text, keep)
                if cut is not text:
                    round_[i] = replace(round_[i], content=cut)
                    chars += len(cut) - len(text)
        return round_

    def build(
        self, pinned: Sequence[Message], rounds: Sequence[Sequence[Message]]
    ) -> list[Message]:
        """Pinned messages, then as many of the most recent whole rounds as fit.

        At most ``recent_rounds`` rounds are kept verbatim, fewer when they do not fit;
        older rounds are dropped whole and a note in the head says how many. The latest
        round is never dropped: if it does not fit alone, its older steps go whole and
        its texts are cut in the middle (the model must see its task and the answer to
        its last call); only tool call arguments bigger than the budget can leave it
        over. If the pinned messages alone exceed the budget, their longest blocks are
        shrunk. Raises ValueError for a round with a result that answers no call in it,
        or a call without a result: that is the caller's bug, not something to hide.
        """
        # Room for the omission note, added to the head when any round is left out.
        note = _OMITTED_NOTE.format(n=10**6, s="s")
        reserve = math.ceil(len(note) * self.correction / self.chars_per_token) + 2 if rounds else 0
        # The head comes first, but the answer to the model's last call must fit too:
        # the latest round is guaranteed up to half the budget.
        latest = (
            self._tokens(self._steps_of(rounds[-1]).total_chars(), len(rounds[-1]))
            if rounds and self.recent_rounds
            else 0
        )
        head_budget = max(self.budget_tokens // 2, self.budget_tokens - latest) - reserve
        head = self._fit_pinned(list(pinned), head_budget)
        room = self.budget_tokens - reserve - self.estimate(head)
        candidates = list(rounds)[-self.recent_rounds :] if self.recent_rounds else []
        dropped = len(rounds) - len(candidates)
        kept: list[list[Message]] = []
        latest_sound = False  # the latest round is known to pass check_round as kept
        for position, round_ in enumerate(reversed(candidates)):
            if position == 0:
                fitted, _ = self._fit_round(round_, room)
                kept.append(fitted)
                room -= self.estimate(fitted)
                steps = self._steps
                latest_sound = steps is not None and steps.round is round_
                latest_sound = latest_sound and steps.all_well_formed()
                continue
            cost = self._cost_within(round_, room)
            if cost > room:
                break
            kept.append(list(round_))
            room -= cost
        # Only what is sent is checked: a long turn is not rescanned for every request.
        first = len(rounds) - len(kept)
        for index, round_ in enumerate(reversed(kept)):
            if not (latest_sound and index == len(kept) - 1):
                check_round(first + index, round_)
        dropped += len(candidates) - len(kept)
        if dropped and head and head[-1].role == "user":
            note = _OMITTED_NOTE.format(n=dropped, s="" if dropped == 1 else "s")
            head[-1] = replace(head[-1], content=head[-1].content + note)
        result = head + [m for round_ in reversed(kept) for m in round_]
        return result


def complete_in_budget(
    model: Model,
    budget: ContextBudget,
    pinned: Sequence[Message],
    rounds: Sequence[Sequence[Message]],
    tools: Sequence[ToolSpec],
    *,
    role: str = "act",
    timeout_s: float | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    output_cap: Callable[[int], int | None] | None = None,
) -> tuple[Reply, list[Message], ContextBudget]:
    """One model call within the budget: build, send, calibrate from reported usage.

    When the provider says the request is too long, trim once to half the budget and
    retry; a second refusal propagates. Returns the reply, the messages sent and the
    budget to use from now on (the smaller one after a trim).
    """

    def cap(sent: Sequence[Message]) -> int | None:
        # ``output_cap`` gets the request's estimated size and bounds the answer by what
        # the token budget has left after it (it raises when that cannot fund the call)
        return output_cap(budget.estimate(sent)) if output_cap is not None else None

    messages = budget.build(pinned, rounds)
    try:
        reply = model.complete(
            messages, tools, role=role, timeout_s=timeout_s, max_output_tokens=cap(messages)
        )
    except ContextTooLong as exc:
        smaller = budget.shrink()
        if on_event is not None:
            on_event(
                {
                    "event": "context_trimmed",
                    "from_tokens": budget.budget_tokens,
                    "to_tokens": smaller.budget_tokens,
                    "reason": str(exc),
                }
            )
        budget = smaller
        messages = budget.build(pinned, rounds)
        reply = model.complete(
            messages, tools, role=role, timeout_s=timeout_s, max_output_tokens=cap(messages)
        )
    if reply.usage.prompt_tokens:
        budget.calibrate(messages, reply.usage.prompt_tokens)
    return reply, messages, budget
