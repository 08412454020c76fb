"""The pytest outcome channel: a pipe the test command inherits, read while it runs.

The JUnit report is a file in reach of the code under test, and the exit code is a value
it can set; the plugin in ``pytest_plugin/looprun_outcome.py`` records each failure as it
happens and writes it to this pipe instead. ``disagreements`` names what the channel saw
that the report or the exit code does not show.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV = "LOOPRUN_OUTCOME_FD"
EXERCISED_ENV = "LOOPRUN_EXERCISED"
PLUGIN = "looprun_outcome"
# looprun's own writers of the channel: the pytest plugin and the plain re-run of tests
SENDERS = (PLUGIN, "looprun_plain")
PLUGIN_DIR = Path(__file__).resolve().parent / "pytest_plugin"
# an option only the engine gives a parser (a template cannot: it is no declared one): the
# command listed its tests over the channel instead of running them (``--collect-only``)
LISTED = "listed"
_MAX_BYTES = 8 << 20  # beyond this the channel counts as cut short, never as complete
_MAX_EXERCISED = 8  # files kept per failing test (the plugin sends no more)
_MAX_REASON = 300  # characters kept of why a failure was the test's own


@dataclass
class Outcomes:
    """What the plugin said: each failing test once, and whether it reached the end."""

    started: bool = False
    ended: bool = False
    plugin: str = ""
    failed: dict[str, tuple[str, str]] = field(default_factory=dict)  # node id -> junit key
    # node id -> the project files its call phase ran code from (when it was watched)
    exercised: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # node id -> why its failure was raised by the test itself, not by the code under test
    # nor at an assertion on what it returned (when it was watched)
    self_raised: dict[str, str] = field(default_factory=dict)
    # under --collect-only: each collected test's JUnit (classname, name, file or None),
    # and how many the plugin said it sent once it had sent them all (None: it never did)
    collected: list[tuple[str, str, str | None]] = field(default_factory=list)
    listed: int | None = None
    overflow: bool = False
    malformed: int = 0

    def feed(self, line: bytes) -> None:
        try:
            record = json.loads(line)
            event = record["event"]
        except (ValueError, TypeError, KeyError):
            self.malformed += 1
            return
        if event == "start":
            self.started, self.plugin = True, str(record.get("plugin", ""))
        elif event == "failed":
            key = record.get("junit") or ["", ""]
            test = str(record.get("id"))
            self.failed.setdefault(test, (str(key[0]), str(key[-1])))
            files = record.get("exercised")
            if isinstance(files, list) and test not in self.exercised:
                self.exercised[test] = tuple(str(f) for f in files[:_MAX_EXERCISED])
            why = record.get("self_raised")
            if isinstance(why, str) and why and test not in self.self_raised:
                self.self_raised[test] = why[:_MAX_REASON]
        elif event == "collected":
            key, where = record.get("junit"), record.get("file")
            if not (
                isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)
            ):
                self.malformed += 1  # a list with a line that is not the plugin's is unread
                return
            self.collected.append((key[0], key[1], where if isinstance(where, str) else None))
        elif event == "listed":
            count = record.get("count")
            # said twice, or not a count: never a whole list
            self.listed = count if type(count) is int and self.listed is None else -1
        elif event == "end":
            self.ended = True


def _read(fd: int, into: Outcomes) -> None:
    pending = b""
    total = 0
    with open(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            total += len(chunk)
            if total > _MAX_BYTES:
                into.overflow = True
                continue  # keep draining so the writer never blocks
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    into.feed(line)


def with_helpers(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with looprun's helper modules (the outcome plugin, the plain and mutation
    runners) first on ``PYTHONPATH``, so only the workdir (``sys.path[0]`` under
    ``python -m``) precedes them."""
    path = env.get("PYTHONPATH", "")
    if path.split(os.pathsep)[:1] == [str(PLUGIN_DIR)]:
        return dict(env)
    return {**env, "PYTHONPATH": str(PLUGIN_DIR) + (os.pathsep + path if path else "")}


@contextlib.contextmanager
def listening(
    env: Mapping[str, str], *, exercised: bool = False
) -> Iterator[tuple[dict[str, str], int, Outcomes]]:
    """A pipe for one command: the environment and fd to hand it, and what it said
    (complete once the block exits, after the command ended). With ``exercised`` the
    plugin also says which project files each failing test's body ran."""
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    outcomes = Outcomes()
    reader = threading.Thread(target=_read, args=(read_fd, outcomes), daemon=True)
    reader.start()
    child = {**with_helpers(env), ENV: str(write_fd)}
    if exercised:
        child[EXERCISED_ENV] = "1"
    else:
        child.pop(EXERCISED_ENV, None)
    try:
        yield child, write_fd, outcomes
    finally:
        os.close(write_fd)  # the reader sees EOF once every child holding it has exited
        reader.join(timeout=5)


def _ids(tests: Iterable[str]) -> str:
    names = sorted(tests)
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ", ".join(names[:10]) + more


def disagreements(
    outcomes: Outcomes,
    report_failing: set[tuple[str, str]],
    failing_ids: set[str],
    exit_code: int | None,
) -> list[str]:
    """What the channel saw that the report and exit code deny (empty when they agree)."""
    problems: list[str] = []
    if not outcomes.started:
        problems.append(f"the {PLUGIN} pytest plugin never reported (was it unloaded?)")
        return problems
    if outcomes.plugin and Path(outcomes.plugin) not in {PLUGIN_DIR / f"{n}.py" for n in SENDERS}:
        problems.append(
            f"the {PLUGIN} plugin was loaded from {outcomes.plugin}, not looprun's copy"
        )
    missing = sorted(
        test
        for test, key in outcomes.failed.items()
        if key not in report_failing and test not in failing_ids
    )
    if missing:
        problems.append(f"tests that failed but the report does not show failing: {_ids(missing)}")
    if outcomes.failed and exit_code == 0:
        problems.append(f"tests failed but the test command exited 0: {_ids(outcomes.failed)}")
    if not outcomes.ended and exit_code == 0 and not outcomes.overflow:
        problems.append("the outcome channel closed before the test session finished")
    if outcomes.malformed:
        problems.append(
            f"{outcomes.malformed} line(s) on the outcome channel were not the plugin's"
        )
    return problems
