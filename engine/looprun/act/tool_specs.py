"""The built-in tools as the model sees them: each one's name, description and JSON
parameters, and the check of a call's arguments against them (plain words back to the
model, never an exception)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from looprun.models.base import ToolSpec
from looprun.system.redact import SURROGATE, escape_surrogates


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


def _params(required: Sequence[str], **props: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }


SPECS: dict[str, ToolSpec] = {
    "read_file": ToolSpec(
        "read_file",
        "Read a text file of the repository. Very large files are cut, with a note.",
        _params(["path"], path=_string("File path relative to the repository root")),
    ),
    "write_file": ToolSpec(
        "write_file",
        "Create or overwrite a file with the given content (parent directories are created).",
        _params(
            ["path", "content"],
            path=_string("File path relative to the repository root"),
            content=_string("The complete new content of the file"),
        ),
    ),
    "edit_file": ToolSpec(
        "edit_file",
        "Replace one exact passage of a file. `old` must occur exactly once in the file "
        "(include enough surrounding lines to make it unique); it is replaced by `new`.",
        _params(
            ["path", "old", "new"],
            path=_string("File path relative to the repository root"),
            old=_string("The exact text to replace, including whitespace"),
            new=_string("The replacement text"),
        ),
    ),
    "list_files": ToolSpec(
        "list_files",
        "List files under a directory (default: the repository root), skipping ignored "
        "files. `glob` filters with gitignore-style patterns such as `*.py` or `src/**/*.ts`.",
        _params(
            [],
            path=_string("Directory relative to the repository root (default: the root)"),
            glob=_string("Optional glob filter, e.g. *.py"),
        ),
    ),
    "search": ToolSpec(
        "search",
        "Search text files for a Python regular expression; answers `file:line: text` lines.",
        _params(
            ["pattern"],
            pattern=_string("Python regular expression"),
            path=_string("File or directory to search (default: the repository root)"),
        ),
    ),
    "run": ToolSpec(
        "run",
        "Run one allowed command (no shell: no pipes, redirections, `&&` or `;`) in the "
        "repository root and return its exit code and output (long output is cut in the middle).",
        _params(["command"], command=_string("The command line, e.g. python -m pytest -q")),
    ),
    "flag_for_human": ToolSpec(
        "flag_for_human",
        "Stop and hand the task to a person when it cannot be done as asked (it is "
        "contradictory, impossible, or needs a change you may not make). The run ends "
        "escalated with your reason, never as done; make no further calls after it.",
        _params(
            ["reason"],
            reason=_string("Why the task cannot be done as asked, in a few sentences"),
        ),
    ),
}


def check_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> str | None:
    """A plain-words problem with the arguments, or None when they fit the spec."""
    props: Mapping[str, Any] = spec.parameters["properties"]
    missing = [name for name in spec.parameters["required"] if name not in args]
    if missing:
        return f"missing argument(s): {', '.join(missing)}"
    extra = [name for name in args if name not in props]
    if extra:
        return f"unknown argument(s): {', '.join(sorted(extra))} (expected: {', '.join(props)})"
    for name, value in args.items():
        if value is not None and not isinstance(value, str):
            return f"argument {name!r} must be a string, not {type(value).__name__}"
        if value is None and name in spec.parameters["required"]:
            return f"argument {name!r} must be a string"
    return None


def invalid_unicode(args: Mapping[str, Any]) -> str | None:
    """A string argument holding a lone surrogate (a JSON ``\\ud800`` escape) names no
    file and cannot be written as UTF-8: refused as it is, never half-used."""
    for key, value in args.items():
        if isinstance(value, str):
            m = SURROGATE.search(value)
            if m is not None:
                return (
                    f"`{key}` holds invalid Unicode (a lone surrogate, "
                    f"{escape_surrogates(m.group())}, at character {m.start()}); "
                    "send valid UTF-8 text"
                )
    return None
