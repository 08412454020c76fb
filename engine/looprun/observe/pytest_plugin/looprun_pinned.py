"""Judge a refactoring by mutation: every code line it changed must be one the suite checks.

A refactoring keeps behaviour only where a test would notice a change. For each line the
run changed outside the tests, the whole suite (with the base's pinned configuration)
must run it, measured under coverage.py, and must fail on at least one small change to it
(the mutations of ``looprun_mutants``: a comparison negated, an operator swapped, a
returned value replaced by ``None``, a constant off by one ...), tried one at a time until
one is noticed. A changed line no test runs, or whose every mutant goes unnoticed, is
reported as not pinned: its behaviour may have changed with nobody the wiser.

Lines that admit no mutation (a bare call, an assignment from a call) and lines that are
not executable are not judged. At most ``--max`` lines are judged, spread evenly over the
changed ones, each with at most ``--per-line`` mutants. Runs in the check's own copy of
the tree and restores every file it changes; writes the same report shape as
``looprun_mutants``, counting lines instead of mutants. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from looprun_mutants import (
    Mutant,
    arguments,
    generate,
    is_test,
    line_coverage,
    noticed,
    pytest_pins,
    spread,
)


def _lines(ranges: list[list[int]]) -> set[int]:
    """The lines of ``[[first, last], ...]``, as looprun's diff gives them."""
    return {n for first, last in ranges for n in range(int(first), int(last) + 1)}


def judge(args: argparse.Namespace, pinned: list[str]) -> dict[str, object]:
    changed = {
        path: _lines(ranges)
        for path, ranges in json.loads(args.changed).items()
        if path.endswith(".py") and not is_test(path) and os.path.isfile(path)
    }
    report: dict[str, object] = {
        "ok": True,
        "files": sorted(changed),
        "total": 0,
        "killed": 0,
        "survived": [],
        "not_judged": 0,
        "score": 1.0,
        "error": None,
    }
    if not any(changed.values()):
        return report
    data = os.path.join(os.path.dirname(os.path.abspath(args.report)), "pinned.coverage")
    started = time.monotonic()
    executed, missing, error = line_coverage([], sorted(changed), pinned, data, args.timeout * 3)
    if error is not None:
        return {**report, "ok": False, "score": 0.0, "error": error}
    # a mutant that loops forever is noticed by the timeout: a few times the unchanged run
    limit = min(args.timeout, max(10.0, 4 * (time.monotonic() - started)))
    judged: list[list[Mutant]] = []  # a changed line's mutants
    unrun: list[str] = []
    for path in sorted(changed):
        with open(path, "rb") as handle:
            source = handle.read()
        for line in sorted(changed[path]):
            if line in missing.get(path, set()):
                unrun.append(f"{path}:{line}: no test runs this line")
            elif line in executed.get(path, set()):
                mutants = generate(path, source, {line})
                if mutants:
                    judged.append(mutants)
    chosen = spread(judged, args.max)
    survived = list(unrun)
    for mutants in chosen:
        tried = mutants[: args.per_line]
        if not any(noticed(m, [], pinned, limit) for m in tried):
            more = f" (and {len(tried) - 1} other change(s))" if len(tried) > 1 else ""
            survived.append(f"{tried[0].label()}{more}: no test notices")
    total = len(unrun) + len(chosen)
    killed = total - len(survived)
    return {
        **report,
        "total": total,
        "killed": killed,
        "survived": survived,
        "not_judged": len(judged) - len(chosen),
        "score": round(killed / total, 3) if total else 1.0,
    }


def main(argv: list[str]) -> int:
    parser = arguments("looprun_pinned")
    parser.add_argument("--per-line", dest="per_line", type=int, default=3)
    parser.add_argument("--deselect", default="[]", help="JSON list of ids left out")
    args = parser.parse_args(argv)
    # the failures already there neither pin a line nor block one: left out of every run
    left_out = [w for i in json.loads(args.deselect) for w in ("--deselect", str(i))]
    report = judge(args, [*pytest_pins(args), *left_out])
    with open(args.report, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
