"""The context budget: requests stay within budget_tokens, whole rounds only, head kept."""

from __future__ import annotations

import random

import pytest

from looprun.loop.context import ContextBudget, cut_middle
from looprun.models.base import Message, ToolCall

INTENT = "INTENT: division by zero in invoice totals"
SYSTEM = Message("system", "You are a careful engineer. Use the tools; keep diffs small.")


def head(iteration: int, feedback: str, summary_lines: int) -> Message:
    summary = "\n".join(
        f"iteration {i}: edited src/invoice.py; tests failed; sig=ZeroDivisionError@87"
        for i in range(1, summary_lines + 1)
    )
    failure = f"LATEST FAILURE (iteration {iteration}): test_total failed: expected 42, got 41"
    return Message(
        "user",
        f"{INTENT}\n\nTask: make the whole suite pass\n\n{failure}\n{feedback}\n\n"
        f"Earlier attempts:\n{summary}",
    )


def make_round(n: int, output_chars: int, calls: int = 1) -> list[Message]:
    tool_calls = tuple(
        ToolCall(id=f"c{n}_{k}", name="run", arguments={"command": f"pytest -k t{n}_{k}"})
        for k in range(calls)
    )
    assistant = Message("assistant", f"step {n}: running the tests", tool_calls)
    results = [
        Message("tool", (f"line {n}.{k} " * (output_chars // 10))[:output_chars], tool_call_id=c.id)
        for k, c in enumerate(tool_calls)
    ]
    return [assistant, *results]


def assert_well_formed(messages: list[Message]) -> None:
    """Every tool result follows the assistant message that made its call, and every
    call in a kept assistant message has its result."""
    open_calls: set[str] = set()
    for m in messages:
        if m.role == "assistant":
            assert not open_calls, f"calls left unanswered: {open_calls}"
            open_calls = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            assert m.tool_call_id in open_calls, f"orphaned tool result {m.tool_call_id}"
            open_calls.discard(m.tool_call_id)
    assert not open_calls, f"calls left unanswered: {open_calls}"


def test_hundred_iteration_run_stays_within_budget_and_keeps_head() -> None:
    rng = random.Random(7)
    budget = ContextBudget(8000, recent_rounds=3)
    provider = ContextBudget(8000, recent_rounds=3)  # an uncalibrated estimator as reference
    rounds: list[list[Message]] = []
    sizes = []
    for iteration in range(1, 101):
        # Alternate small and big tool outputs; every 10th is far bigger than the budget.
        big = 60_000 if iteration % 10 == 0 else rng.choice([200, 3_000, 9_000])
        rounds.append(make_round(iteration, big, calls=1 + iteration % 3))
        feedback = "Traceback line\n" * (iteration * 20)  # the feedback grows every time
        pinned = [SYSTEM, head(iteration, feedback, iteration)]
        request = budget.build(pinned, rounds)
        size = budget.estimate(request)
        sizes.append(size)
        assert size <= 8000, f"iteration {iteration}: {size} tokens"
        assert request[0] == SYSTEM
        assert request[1].content.startswith(INTENT)
        assert f"LATEST FAILURE (iteration {iteration})" in request[1].content
        assert_well_formed(request)
        # The latest round is always there (its output possibly cut in the middle).
        assert request[-1].tool_call_id == rounds[-1][-1].tool_call_id
        assert len([m for m in request if m.role == "assistant"]) <= 3
        # Calibrate as a provider would: its tokenizer counts 20% more than 4 chars/token.
        budget.calibrate(request, int(provider.estimate(request) * 1.2))
    # Flat once full: the late requests are no bigger than the budget, not growing.
    assert max(sizes[50:]) <= 8000
    assert 1.1 < budget.correction < 1.3


def test_rounds_are_kept_whole_newest_first() -> None:
    budget = ContextBudget(2000, recent_rounds=3)
    rounds = [make_round(n, 1200, calls=2) for n in range(6)]
    request = budget.build([SYSTEM, head(1, "", 1)], rounds)
    assert_well_formed(request)
    kept = [m.tool_calls[0].id for m in request if m.role == "assistant"]
    assert kept and kept[-1] == "c5_0"
    # Chronological order and a contiguous suffix of the rounds.
    numbers = [int(k[1:].split("_")[0]) for k in kept]
    assert numbers == list(range(6 - len(numbers), 6))
    assert "earlier tool round" in request[1].content
    assert budget.estimate(request) <= 2000


def test_at_most_recent_rounds_even_when_everything_fits() -> None:
    budget = ContextBudget(100_000, recent_rounds=2)
    rounds = [make_round(n, 50) for n in range(5)]
    request = budget.build([SYSTEM, head(1, "", 1)], rounds)
    assert [m.tool_calls[0].id for m in request if m.role == "assistant"] == ["c3_0", "c4_0"]
    assert "3 earlier tool rounds omitted" in request[1].content


def test_nothing_dropped_means_no_note_and_unchanged_messages() -> None:
    budget = ContextBudget(100_000, recent_rounds=5)
    pinned = [SYSTEM, head(1, "", 1)]
    rounds = [make_round(n, 50) for n in range(3)]
    request = budget.build(pinned, rounds)
    assert request == pinned + [m for r in rounds for m in r]


def test_oversized_head_is_shrunk_keeping_intent_and_failure_start() -> None:
    budget = ContextBudget(1000, recent_rounds=3)
    feedback = "\n".join(f"  File 'src/invoice.py', line {i}, in total" for i in range(3000))
    pinned = [SYSTEM, head(9, feedback, 400)]
    request = budget.build(pinned, [make_round(1, 100)])
    assert budget.estimate(request) <= 1000
    text = request[1].content
    assert text.startswith(INTENT)
    assert "LATEST FAILURE (iteration 9): test_total failed: expected 42, got 41" in text
    assert "characters cut to fit the context budget" in text
    assert request[0] == SYSTEM  # the head gives way before the system prompt
    # Deterministic: the same inputs build the same request.
    assert budget.build(pinned, [make_round(1, 100)]) == request


def test_head_of_many_short_blocks_still_fits() -> None:
    budget = ContextBudget(300, recent_rounds=1)
    blocks = "\n\n".join(f"note {i}" for i in range(2000))
    request = budget.build([SYSTEM, Message("user", f"{INTENT}\n\n{blocks}")], [])
    assert budget.estimate(request) <= 300
    assert request[1].content.startswith(INTENT)


def test_latest_round_bigger_than_budget_is_cut_not_dropped() -> None:
    budget = ContextBudget(1000, recent_rounds=3)
    rounds = [make_round(1, 100), make_round(2, 200_000, calls=2)]
    request = budget.build([SYSTEM, head(1, "", 1)], rounds)
    assert budget.estimate(request) <= 1000
    assert_well_formed(request)
    results = [m for m in request if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["c2_0", "c2_1"]
    assert all("characters cut" in m.content for m in results)
    assert all(m.content.startswith("line 2.") for m in results)


def test_malformed_rounds_are_refused() -> None:
    budget = ContextBudget(1000, recent_rounds=3)
    orphan = [Message("assistant", "hi"), Message("tool", "x", tool_call_id="nope")]
    with pytest.raises(ValueError, match="answers no call"):
        budget.build([SYSTEM], [orphan])
    unanswered = make_round(1, 10, calls=2)[:-1]
    with pytest.raises(ValueError, match="without a result"):
        budget.build([SYSTEM], [unanswered])


def test_estimate_counts_characters_and_overhead() -> None:
    budget = ContextBudget(1000, recent_rounds=1)
    assert budget.estimate([]) == 0
    assert budget.estimate([Message("user", "x" * 400)]) == 100 + 4
    call = ToolCall("id1", "write_file", {"path": "a.py", "content": "y" * 800})
    assert budget.estimate([Message("assistant", "", (call,))]) > 200


def test_calibration_moves_gradually_and_is_bounded() -> None:
    budget = ContextBudget(1000, recent_rounds=1)
    sent = [Message("user", "x" * 4000)]
    budget.calibrate(sent, 2004)  # provider counted twice our estimate
    assert budget.correction == pytest.approx(2.0)
    budget.calibrate(sent, 1004)  # then exactly our raw estimate: move a third of the way
    assert budget.correction == pytest.approx(2.0 - 1.0 / 3)
    budget.calibrate(sent, 10**9)
    assert budget.correction <= 4.0
    budget.calibrate(sent, 0)  # nonsense reports are ignored
    assert budget.correction <= 4.0


def test_shrink_halves_and_keeps_calibration() -> None:
    budget = ContextBudget(8000, recent_rounds=3)
    budget.calibrate([Message("user", "x" * 4000)], 1504)
    smaller = budget.shrink()
    assert smaller.budget_tokens == 4000
    assert smaller.recent_rounds == 3
    assert smaller.correction == budget.correction
    assert ContextBudget(300, recent_rounds=1).shrink(0.1).budget_tokens == 256
    with pytest.raises(ValueError):
        budget.shrink(1.5)


def test_cut_middle_keeps_both_ends() -> None:
    text = "\n".join(f"line {i}" for i in range(1000))
    cut = cut_middle(text, 300)
    assert cut.startswith("line 0\n")
    assert cut.endswith("line 999")
    assert "characters cut" in cut
    assert len(cut) < 400
    assert cut_middle("short", 300) == "short"


def test_whole_act_turn_as_latest_round_cuts_older_outputs_first() -> None:
    """The engine passes a whole act turn as one round: its prompt, then several steps."""
    budget = ContextBudget(3000, recent_rounds=3)
    prompt = Message("user", "Task: fix invoice totals\n\nLast check failed: test_total")
    turn: list[Message] = [prompt]
    for step in range(6):
        turn += make_round(step, 6_000)
    request = budget.build([SYSTEM, head(3, "", 3)], [turn])
    assert budget.estimate(request) <= 3000
    assert_well_formed(request)
    assert request[2] == prompt  # the act prompt survives whole
    outputs = [m.content for m in request if m.role == "tool"]
    assert len(outputs) == 6
    assert len(outputs[-1]) > len(outputs[0])  # the newest output keeps the most
    assert all(o.startswith(f"line {n}.0") for n, o in enumerate(outputs))


def test_thousand_step_turn_keeps_prompt_and_newest_steps_within_budget() -> None:
    """A turn that outgrew the budget: its older steps go whole (noted in the prompt),
    the prompt and the newest steps stay, and the request fits."""
    budget = ContextBudget(2000, recent_rounds=3)
    prompt = Message("user", "Task: keep a note per step\n\nFeedback from the last check:\nok")
    turn: list[Message] = [prompt]
    for step in range(1000):
        turn += make_round(step, 300)
        request = budget.build([SYSTEM], [make_round(9999, 50), turn])
        assert budget.estimate(request) <= 2000
        assert_well_formed(request)
        assert request[-1] == turn[-1]  # the answer to the latest call, whole
        prompts = [m for m in request if m.role == "user"]
        assert len(prompts) == 1 and prompts[0].content.startswith(prompt.content)
    assert "earlier steps of this turn omitted to fit the context budget" in prompts[0].content
    kept = [int(m.tool_calls[0].id[1:].split("_")[0]) for m in request if m.role == "assistant"]
    assert kept == list(range(1000 - len(kept), 1000)) and len(kept) >= 3
    assert f"({1000 - len(kept)} earlier steps" in prompts[0].content


def _request(budget: ContextBudget, pinned: list[Message], rounds: list) -> object:
    try:
        return [
            (m.role, m.content, m.tool_calls, m.tool_call_id) for m in budget.build(pinned, rounds)
        ]
    except ValueError as exc:
        return str(exc)


def test_a_growing_turn_gets_the_requests_a_fresh_budget_builds() -> None:
    """Requests inside one turn reuse what the previous request of the turn learnt (where
    its steps begin, their sizes, which steps are well-formed); every request must be the
    one a budget that never saw the turn builds, malformed steps and their errors included."""
    rnd = random.Random(11)
    pinned = [SYSTEM, head(3, "E   assert 41 == 42\n" * 20, 6)]
    earlier = make_round(0, 300)
    turn = [Message("user", "act: fix the invoice totals")]
    warm = ContextBudget(900, 4)
    malformed = errors = 0
    for n in range(1, 400):
        calls = tuple(
            ToolCall(id=f"t{n}_{k}", name="write_file", arguments={"path": f"f{n}", "content": "x"})
            for k in range(rnd.choice([1, 1, 2]))
        )
        turn.append(Message("assistant", f"step {n}", calls))
        for call in calls:
            if n in (150, 320) and call is calls[0]:
                malformed += 1  # a result that answers no call, then one answering an older step
                turn.append(Message("tool", "stray", tool_call_id="t1_0" if n == 320 else "zz"))
                continue
            turn.append(Message("tool", "ok " * rnd.choice([2, 40, 400]), tool_call_id=call.id))
        if n % 37 == 0:
            turn.append(Message("user", "Your last reply was cut off; continue."))
        if n % 3 == 0 or n in (150, 151, 320, 321):
            fresh = ContextBudget(900, 4)
            request = _request(warm, pinned, [earlier, turn])
            assert request == _request(fresh, pinned, [earlier, turn])
            errors += isinstance(request, str)
    assert malformed == 2 and errors > 0
