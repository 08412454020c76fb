"""One act turn: the inner tool-calling loop.

The model calls tools until it answers without a tool call or the turn reaches
``act.max_steps``. A reply cut off at the output limit is reported and the model is asked
to continue; a refusal or a filtered reply is reported and stops the run as escalated,
as does a ``flag_for_human`` call (the model's honest "this cannot be done as asked").
Every tool call the model makes is answered (a refused or unrun call gets an error
result), so a conversation never holds an orphaned call. Caps are checked before every
model call and every tool call; a cap that trips ends the turn with a Stop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from looprun.errors import LooprunError
from looprun.loop import limits as caps
from looprun.loop.act.step import Acted, Turn, TurnStep
from looprun.loop.context import ContextBudget, complete_in_budget
from looprun.loop.exchanges import record_reply
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlannedTask
from looprun.loop.ports import Ports, ToolOutcome
from looprun.loop.progress import normalise_action
from looprun.loop.state import LoopState
from looprun.models.base import Message, Reply, ToolCall, ToolSpec
from looprun.template.model import ActSpec, Limits

TOOL_LOG_CHARS = 2_000
# A reply cut off at the output limit without a tool call is answered with this, at most
# MAX_TRUNCATIONS times in a row; then the turn ends and the checks decide as usual.
MAX_TRUNCATIONS = 2
CUT_OFF_NUDGE = (
    "Your last reply was cut off at the output token limit. Continue with the next tool "
    "call; keep each step small (edit a file in parts rather than rewriting it whole)."
)
# Finish reasons reported to the person; "refusal" and "content_filter" stop the run.
_UNUSABLE = frozenset({"length", "refusal", "content_filter"})


def _not_run(call: ToolCall, why: str) -> Message:
    return Message("tool", f"not run: {why}", tool_call_id=call.id, is_error=True)


def _ask(
    ports: Ports,
    pinned: Sequence[Message],
    rounds: Sequence[Sequence[Message]],
    specs: Sequence[ToolSpec],
    *,
    timeout_s: float | None,
    iteration: int,
    output_cap: Callable[[int], int | None] | None = None,
) -> tuple[Reply, list[Message]]:
    """One act-model call within the context budget: the request is trimmed once when the
    provider says it is too long, and the estimate is calibrated from reported usage."""
    budget = ports.context
    if not isinstance(budget, ContextBudget):  # a plain builder: no trim, no calibration
        messages = budget.build(pinned, rounds)
        cap = output_cap(caps.rough_estimate(messages)) if output_cap is not None else None
        reply = ports.model.complete(
            messages, specs, role="act", timeout_s=timeout_s, max_output_tokens=cap
        )
        return reply, messages

    def trimmed(event: Mapping[str, Any]) -> None:
        data = {k: v for k, v in event.items() if k != "event"}
        ports.journal.event("context_trimmed", iteration=iteration, **data)
        ports.report(
            f"context: the model's server said the request is too long; trimmed the budget "
            f"from {data['from_tokens']} to {data['to_tokens']} tokens and retried"
        )

    reply, messages, used = complete_in_budget(
        ports.model,
        budget,
        pinned,
        rounds,
        specs,
        role="act",
        timeout_s=timeout_s,
        on_event=trimmed,
        output_cap=output_cap,
    )
    if used is not budget:  # keep the trimmed budget for the rest of the run
        budget.adopt(used)
    return reply, messages


def _unusable(ports: Ports, reply: Reply, iteration: int) -> Stop | None:
    """Report a reply cut off at the output limit, refused or filtered; a refusal or a
    filtered reply stops the run (asking again gets the same answer), a cut-off does not."""
    detail = reply.finish_detail or reply.finish
    ports.journal.event(
        "model_finish",
        iteration=iteration,
        role="act",
        model=reply.model or ports.model.ref,
        finish=reply.finish,
        detail=detail,
    )
    if reply.finish == "length":
        ports.report(
            f"model: the reply was cut off at the output token limit (finish: {detail}); "
            "asking it to continue in smaller steps"
        )
        return None
    said = " ".join(reply.message.content.split())[:300]
    what = "refused" if reply.finish == "refusal" else "was stopped by the content filter"
    reason = f"the act model {what} (finish: {detail})" + (f": {said}" if said else "")
    return Stop("escalated", reason, f"model_{reply.finish}")


def act_turn(
    ports: Ports,
    act: ActSpec,
    limits: Limits,
    state: LoopState,
    pinned: Sequence[Message],
    prompt: str,
    *,
    elapsed: Callable[[], float],
    iteration: int,
) -> Turn:
    turn = Turn(messages=[Message("user", prompt)])
    deadline_left = caps.remaining_time(limits, state.spent(elapsed()))
    deadline = None if deadline_left is None else ports.clock.monotonic() + deadline_left
    toolbox = ports.toolbox(act.constraints, act.tools, deadline=deadline)
    specs = toolbox.specs()
    steps = 0
    truncations = 0  # consecutive replies cut off at the output limit without a tool call
    while True:
        spent = state.spent(elapsed())
        turn.stop = caps.check_spent(limits, spent)
        if turn.stop is not None:
            return turn
        try:
            reply, messages = _ask(
                ports,
                pinned,
                [*state.rounds, turn.messages],
                specs,
                timeout_s=caps.remaining_time(limits, spent),
                iteration=iteration,
                output_cap=lambda estimate: caps.output_cap(
                    limits, state.spent(elapsed()), estimate
                ),
            )
        except caps.CannotFund as exc:
            turn.stop = exc.stop
            ports.journal.event("limit", iteration=iteration, **turn.stop.to_dict())
            return turn
        except LooprunError:
            turn.stop = caps.check_spent(limits, state.spent(elapsed()))
            if turn.stop is None:
                raise
            return turn
        record_reply(
            ports,
            state,
            reply,
            messages,
            iteration=iteration,
            role="act",
            model=reply.model or ports.model.ref,
        )
        turn.tokens += reply.usage.total_tokens
        turn.cost_usd += reply.cost_usd
        turn.messages.append(reply.message)
        if reply.finish in _UNUSABLE:
            turn.stop = _unusable(ports, reply, iteration)
            if turn.stop is not None:
                turn.messages.extend(
                    _not_run(c, "the run stopped") for c in reply.message.tool_calls
                )
                return turn
        if not reply.message.tool_calls:
            if reply.finish != "length" or truncations >= MAX_TRUNCATIONS:
                return turn
            truncations += 1
            turn.messages.append(Message("user", CUT_OFF_NUDGE))
            continue
        truncations = 0
        for call in reply.message.tool_calls:
            if turn.stop is not None or steps >= act.max_steps:
                why = "the run stopped" if turn.stop else f"act.max_steps ({act.max_steps}) reached"
                turn.messages.append(_not_run(call, why))
                continue
            turn.stop = caps.before_tool_call(limits, state.spent(elapsed()), call.name)
            if turn.stop is not None:
                ports.journal.event("limit", iteration=iteration, **turn.stop.to_dict())
                turn.messages.append(_not_run(call, turn.stop.reason))
                continue
            steps += 1
            state.per_tool[call.name] = state.per_tool.get(call.name, 0) + 1
            result = toolbox.call(call)
            _record(ports, turn, call, result, iteration)
            if result.flag is not None:
                why = f"the act model flagged the task for a person: {result.flag}"
                turn.stop = Stop("escalated", why, "flag_for_human")
        if turn.stop is not None or steps >= act.max_steps:
            return turn


def _record(ports: Ports, turn: Turn, call: ToolCall, result: ToolOutcome, iteration: int) -> None:
    turn.tools.append(call.name)
    turn.actions.append(normalise_action(call.name, call.arguments))
    turn.messages.append(
        Message("tool", result.content, tool_call_id=call.id, is_error=result.is_error)
    )
    content = result.content
    if len(content) > TOOL_LOG_CHARS:
        content = content[:TOOL_LOG_CHARS] + f"... [{len(result.content)} chars]"
    event: dict[str, Any] = {
        "iteration": iteration,
        "tool": call.name,
        "arguments": dict(call.arguments) if call.arguments is not None else call.raw_arguments,
        "is_error": result.is_error,
        "changed": list(result.changed),
        "result": content,
    }
    if result.violation is not None:
        v = result.violation
        refusal = {"rule": v.rule, "message": v.message, "tool": v.tool, "detail": v.detail}
        turn.refusals.append(refusal)
        ports.journal.event("policy_violation", iteration=iteration, **refusal)
    ports.journal.event("tool_call", **event)


class ToolTurn(TurnStep):
    """The act model calls the template's tools until it answers without a call."""

    def act(self, task: PlannedTask, iteration: int, ctx: Mapping[str, Any]) -> Acted:
        lp = self.loop
        assert lp.template.act is not None
        turn = act_turn(
            lp.ports,
            lp.template.act,
            lp.limits,
            lp.state,
            [Message("system", self.system(ctx))],
            self.prompt(ctx),
            elapsed=lp.elapsed,
            iteration=iteration,
        )
        return Acted(turn)
