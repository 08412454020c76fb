"""What every agent CLI adapter provides, and the pieces of parsing they share.

An adapter knows one CLI: its program name, the command line for a turn, the variables
it reads (home, key, server), and how to turn its raw output into a ``Parsed`` report.
It runs nothing itself; the actor does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from looprun.data.value import valueclass
from looprun.template.model import AgentSpec, Constraints


@valueclass
class Turn:
    """The adapter's view of one turn: what to run it with."""

    spec: AgentSpec
    constraints: Constraints
    prompt: str
    system: str
    model: str  # "" : the CLI's own default
    session_id: str  # "" : a fresh session
    new_session_id: str  # for CLIs that take the id of a fresh session up front
    home: Path  # the CLI's home and config, under the run directory
    workdir: Path
    sandboxed: bool = False  # in the run's OS sandbox (a CLI's own may not nest in it)


@dataclass
class Parsed:
    """What an adapter read from the CLI's output."""

    ok: bool = False  # the CLI's final report was found and says it succeeded
    error: str = ""
    error_detail: str = ""
    turns: int = 0
    tool_calls: list[str] = field(default_factory=list)
    denials: list[str] = field(default_factory=list)
    final_message: str = ""
    session_id: str = ""
    prompt_tokens: int = 0  # as the CLI reported them: per call or running total
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None  # None: not reported, priced from the table
    model: str = ""
    cumulative: bool = False  # the usage is the session's running total


class Adapter(Protocol):
    cli: str
    program: str  # the executable looked up on PATH
    package: str  # where it comes from, for the error when it is missing
    key_env: tuple[str, ...]  # variables it may take its key from (passed through only)
    base_url_env: tuple[str, ...]  # variables naming its server, the first set one wins
    servers: tuple[str, ...]  # its provider's servers, when none is named

    def command(self, program: str, turn: Turn) -> list[str]: ...
    def environment(self, turn: Turn, env: Mapping[str, str]) -> dict[str, str]: ...
    def parse(self, output: str) -> Parsed: ...


def json_lines(output: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines stream; other lines (a CLI's stderr) are skipped."""
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def http_error(status: int | None) -> str:
    """A provider's HTTP status as a normalised ``agent.error``."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status is not None and status >= 500:
        return "server"
    return "api_error"


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
