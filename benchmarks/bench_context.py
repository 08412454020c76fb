"""Characters and estimated tokens sent to the model over a long simulated run: with the
context budget (flat once the budget is reached) against a naive loop that keeps every
round (grows linearly).

    python benchmarks/bench_context.py [--budget 8000] [--rounds 3] [--iterations 100]
"""

from __future__ import annotations

import argparse
import random
import time

from looprun.loop.context import ContextBudget
from looprun.models.base import Message, ToolCall

CHECKPOINTS = (1, 10, 50, 100)


def simulated_run(iterations: int, seed: int = 1):
    """Yield (pinned, rounds) as a loop would have them before each model call."""
    rng = random.Random(seed)
    rounds: list[list[Message]] = []
    system = Message("system", "You are fixing a bug. Use the tools; keep the diff small.")
    for n in range(1, iterations + 1):
        summary = "\n".join(
            f"iteration {i}: edited src/invoice.py; test_total failed; sig=ZeroDivisionError@87"
            for i in range(1, n)
        )
        feedback = "\n".join(f'  File "src/invoice.py", line {80 + i}, in total' for i in range(20))
        head = Message(
            "user",
            "Intent: division by zero in invoice totals\n\nTask: make the suite pass\n\n"
            f"The last check failed:\ntest_total: ZeroDivisionError\n{feedback}\n\n"
            f"Earlier attempts:\n{summary}",
        )
        yield [system, head], rounds
        call = ToolCall(f"call_{n}", "run", {"command": "python -m pytest -q"})
        output = "F" * rng.randint(1_500, 12_000)
        rounds = [
            *rounds,
            [
                Message("assistant", f"Attempt {n}.", (call,)),
                Message("tool", output, tool_call_id=call.id),
            ],
        ]


def chars(messages: list[Message]) -> int:
    return sum(len(m.content) + sum(len(str(c.arguments)) for c in m.tool_calls) for m in messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    budget = ContextBudget(args.budget, args.rounds)
    naive = ContextBudget(10**9, 10**9)  # keeps everything: only used to estimate
    rows = []
    started = time.perf_counter()
    for n, (pinned, rounds) in enumerate(simulated_run(args.iterations), start=1):
        built = budget.build(pinned, rounds)
        if n in CHECKPOINTS or n == args.iterations:
            everything = [*pinned, *(m for r in rounds for m in r)]
            rows.append(
                (
                    n,
                    chars(everything),
                    naive.estimate(everything),
                    chars(built),
                    budget.estimate(built),
                )
            )
    elapsed = time.perf_counter() - started
    print(
        f"budget_tokens={args.budget} recent_rounds={args.rounds} "
        f"(estimate: 4 chars/token + 4 per message)"
    )
    print(
        f"{'iteration':>9} | {'naive chars':>11} {'naive tokens':>12} | "
        f"{'budget chars':>12} {'budget tokens':>13}"
    )
    for n, nc, nt, bc, bt in rows:
        print(f"{n:>9} | {nc:>11,} {nt:>12,} | {bc:>12,} {bt:>13,}")
    print(
        f"built {args.iterations} requests in {elapsed * 1000:.0f} ms "
        f"({elapsed / args.iterations * 1000:.2f} ms each)"
    )


if __name__ == "__main__":
    main()
