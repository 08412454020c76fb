"""``looprun observe``: try a parser on a report or a command and see the facts it yields.

Prints exactly what conditions get (``Observation.to_facts()``) as JSON. Exit status:
0 when the observation is ok, 1 when it is not (including an unusable report), 2 for
usage errors (unknown parser, bad ``--option``, neither FILE nor ``--run``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from looprun.checks.runner import observe_command
from looprun.errors import EXIT_DONE, EXIT_ERROR, UsageError
from looprun.observe.registry import BUILTIN, UnknownParser, option_problems, parser_names
from looprun.sandbox import Confinement, sandbox_for
from looprun.sandbox.hidden import hidden_paths

_NEEDS_FILE = frozenset({"junit", "sarif", "coverage", "json"})


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def parse_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``k=v`` pairs; values are JSON when they parse as JSON, else strings; a repeated
    key collects a list (``--option allow=src/** --option allow=tests/**``)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        if key in out:
            prev = out[key]
            out[key] = [*(prev if isinstance(prev, list) else [prev]), value]
        else:
            out[key] = value
    return out


def observe(
    parser: str,
    file: str | None,
    run: str | None,
    options: Iterable[str] = (),
    *,
    workdir: str | Path = ".",
    timeout_s: float = 600.0,
    base: str | None = None,
    sandbox: str = "off",
    network: bool = False,
) -> tuple[str, int]:
    """The observation as JSON text, and the exit status for the command line."""
    if parser not in BUILTIN and parser not in parser_names():
        raise UsageError(f"unknown parser {parser!r}; known: {', '.join(parser_names())}")
    if file is None and run is None and parser in _NEEDS_FILE:
        raise UsageError(f"the {parser} parser needs a report FILE, or --run with --file")
    if run is None and parser == "exit_code":
        raise UsageError("the exit_code parser needs --run COMMAND")
    parsed = parse_options(options)
    for _key, message, _name in option_problems(parser, parsed):
        raise UsageError(f"--option: {message}")
    root = Path(workdir)
    if not root.is_dir():
        raise UsageError(f"--workdir {workdir}: not a directory")
    confined = None
    if run is not None:
        root = root.resolve()
        report = (root / file).resolve() if file else root
        # a report named outside the workdir is the invoker's choice: its directory too
        writable = (root,) if report.is_relative_to(root) else (root, report.parent)
        confinement = Confinement(
            writable,
            read_only=(root / ".git",),
            network=network,
            hidden=hidden_paths(os.environ),
        )
        confined = sandbox_for(sandbox, confinement, _warn)
    try:
        obs = observe_command(
            parser,
            workdir=root.resolve(),
            command=run,
            file=Path(file) if file else None,
            options=parsed,
            timeout_s=timeout_s,
            base=base,
            sandbox=confined,
        )
    except UnknownParser as exc:
        raise UsageError(str(exc)) from None
    text = json.dumps(obs.to_facts(), indent=2, ensure_ascii=False, default=str)
    return text, EXIT_DONE if obs.ok else EXIT_ERROR
