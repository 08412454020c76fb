"""What each agent CLI can be made to enforce, checked when a template loads.

looprun enforces paths, diff size, forbidden patterns and approvals on the real diff
after every turn, whatever the CLI. What it cannot check after the fact - which commands
ran, how many times a tool was called - must be passed to the CLI as the CLI's own rules;
where a CLI has no such rule, ``validate`` refuses the template instead of pretending.
Pure data and functions: the template layer imports this, nothing here runs a CLI.
"""

from __future__ import annotations

import json
import re

from looprun.data.value import valueclass

SUPPORTED: tuple[str, ...] = ("claude-code", "codex", "aider", "opencode", "gemini")

# Claude Code permission rules: Bash(prefix:*) allows a command starting with the prefix,
# Bash(exact) one command exactly. looprun's command patterns are globs: "cmd *" and
# "cmd" have a rule, any other wildcard has none.
_GLOB = re.compile(r"[*?\[\]]")


# ``agent`` before any CLI turn (or in a template without one): every fact, empty. The
# shape refine rules and `looprun test` cases read; the actor's report fills it.
EMPTY_FACTS: dict[str, object] = {
    "ran": False,
    "exit_code": None,
    "error": "",  # normalised: timeout | auth | rate_limit | server | max_turns | ...
    "error_detail": "",
    "turns": 0,
    "tool_calls": 0,
    "tools": [],
    "denials": 0,
    "denied": [],
    "final_message": "",
    "session_id": "",
    "tokens": 0,
    "cost_usd": 0.0,
}


@valueclass
class Refusal:
    """A template setting the CLI cannot enforce; ``where`` is the path under the document."""

    where: tuple[str | int, ...]
    message: str


def claude_bash_rule(pattern: str) -> str | None:
    """The Claude Code rule for a looprun command pattern, or None when it has none."""
    text = pattern.strip()
    if text.endswith(" *") and not _GLOB.search(text[:-2]):
        return f"Bash({text[:-2].strip()}:*)"
    if not _GLOB.search(text) and text:
        return f"Bash({text})"
    return None


# opencode's permission names for its own tools (its ``edit`` covers write and patch); with
# no allow_tools these are allowed, everything else is denied.
OPENCODE_TOOLS = frozenset(
    ("read", "edit", "glob", "grep", "list", "todowrite", "todoread", "webfetch", "websearch")
)
OPENCODE_DEFAULT_TOOLS = ("read", "edit", "glob", "grep", "list")
# Gemini CLI's built-in tool names a template may allow (its shell only through commands).
GEMINI_TOOLS = frozenset(
    (
        "read_file",
        "read_many_files",
        "write_file",
        "replace",
        "list_directory",
        "glob",
        "grep_search",
        "write_todos",
        "web_fetch",
        "google_web_search",
    )
)
GEMINI_DEFAULT_TOOLS = (
    "read_file",
    "read_many_files",
    "write_file",
    "replace",
    "list_directory",
    "glob",
    "grep_search",
)


def _prefix_or_exact(pattern: str) -> tuple[str, bool] | None:
    """``("cmd", True)`` for ``cmd *`` (any arguments), ``("cmd", False)`` for an exact
    command, None for any other wildcard: the two shapes every CLI's rules can express."""
    text = pattern.strip()
    if text.endswith(" *") and not _GLOB.search(text[:-2]) and text[:-2].strip():
        return text[:-2].strip(), True
    if text and not _GLOB.search(text):
        return text, False
    return None


def opencode_bash_rule(pattern: str) -> str | None:
    """opencode's ``bash`` permission pattern for a looprun command pattern, or None."""
    shape = _prefix_or_exact(pattern)
    if shape is None:
        return None
    command, any_args = shape
    return f"{command} *" if any_args else command


def gemini_shell_rules(patterns: tuple[str, ...]) -> list[tuple[str, str]]:
    """Gemini CLI ``run_shell_command`` rule conditions for looprun command patterns:
    ``commandRegex`` is matched against the call's JSON arguments from the command's
    start, so an exact command ends at the string's closing quote and ``cmd *`` is ``cmd``
    followed by the closing quote or a space (Gemini CLI checks each command of a chain
    on its own, and refuses a pattern with nested quantifiers)."""
    out: list[tuple[str, str]] = []
    for pattern in patterns:
        shape = _prefix_or_exact(pattern)
        if shape is None:
            continue
        command, any_args = shape
        quoted = re.escape(json.dumps(command)[1:-1])
        out.append(("commandRegex", quoted + ('[ "]' if any_args else '"')))
    return out


def agent_refusals(
    cli: str,
    *,
    allow_tools: tuple[str, ...],
    commands: tuple[str, ...],
    per_tool: tuple[str, ...],
    max_turns: bool,
    session: str = "fresh",
) -> list[Refusal]:
    """Every setting ``cli`` cannot enforce, located; [] when the template is runnable."""
    out: list[Refusal] = []
    if per_tool:
        out.append(
            Refusal(
                ("limits", "per_tool"),
                f"per-tool caps ({', '.join(per_tool)}) cannot be passed through to {cli}: "
                "looprun does not see its tool calls until the turn is over; remove them "
                "(`per_tool: null` in a template that extends another) and bound the turn "
                "with act.agent.max_turns or act.agent.timeout",
            )
        )
    if cli == "claude-code":
        out += _command_refusals("Claude Code", commands)
        for i, tool in enumerate(allow_tools):
            if tool == "Bash" or tool.startswith("Bash("):
                out.append(
                    Refusal(
                        ("act", "agent", "allow_tools", i),
                        f"'{tool}' would let Claude Code run commands outside the template's "
                        "rules; list the commands under act.constraints.commands.allow "
                        "(they become Bash(...) rules)",
                    )
                )
    elif cli in ("opencode", "gemini"):
        out += _rule_refusals(cli, allow_tools, commands)
    elif cli == "codex":
        if commands:
            out.append(
                Refusal(
                    ("act", "constraints", "commands"),
                    "codex exec has no command allow-list to pass these patterns to (its "
                    "workspace-write sandbox bounds what commands can change); remove them "
                    "(`commands: null` in a template that extends another)",
                )
            )
        if allow_tools:
            out.append(
                Refusal(
                    ("act", "agent", "allow_tools"),
                    "codex has no per-tool allow list; its sandbox (workspace-write) is the "
                    "boundary - remove allow_tools",
                )
            )
        if max_turns:
            out.append(
                Refusal(
                    ("act", "agent", "max_turns"),
                    "codex exec has no turn cap; bound the turn with act.agent.timeout",
                )
            )
    elif cli == "aider":
        out += _aider_refusals(allow_tools, commands, max_turns, session)
    return out


def _aider_refusals(
    allow_tools: tuple[str, ...], commands: tuple[str, ...], max_turns: bool, session: str
) -> list[Refusal]:
    """Aider edits files through its edit format and, as looprun runs it, runs nothing:
    no shell suggestions, lint or test runs; so nothing about tools or commands can be
    handed to it."""
    out = []
    if commands:
        out.append(
            Refusal(
                ("act", "constraints", "commands"),
                "aider runs no commands under looprun (its shell suggestions, lint and test "
                "runs are off) and has no allow-list to pass these patterns to; remove them "
                "(`commands: null` in a template that extends another)",
            )
        )
    if allow_tools:
        out.append(
            Refusal(
                ("act", "agent", "allow_tools"),
                "aider has no tools to allow: it edits files through its edit format - "
                "remove allow_tools",
            )
        )
    if max_turns:
        out.append(
            Refusal(
                ("act", "agent", "max_turns"),
                "aider has no turn cap to pass max_turns to; bound the turn with act.agent.timeout",
            )
        )
    if session == "resume":
        out.append(
            Refusal(
                ("act", "agent", "session"),
                "aider keeps no session to resume headless (each --message turn starts a "
                "fresh chat); use session: fresh",
            )
        )
    return out


def _command_refusals(name: str, commands: tuple[str, ...]) -> list[Refusal]:
    """The command patterns ``name``'s rules cannot express: only ``cmd *`` (any
    arguments) and an exact command have a rule in every CLI that takes them."""
    return [
        Refusal(
            ("act", "constraints", "commands", "allow", i),
            f"'{pattern}' has no {name} permission rule: use 'command *' (any arguments) "
            "or an exact command, without other wildcards",
        )
        for i, pattern in enumerate(commands)
        if _prefix_or_exact(pattern) is None
    ]


def _rule_refusals(
    cli: str, allow_tools: tuple[str, ...], commands: tuple[str, ...]
) -> list[Refusal]:
    """opencode and Gemini CLI: tools by their own names, commands as prefix/exact rules."""
    known, shell, name = {
        "opencode": (OPENCODE_TOOLS, "bash", "opencode"),
        "gemini": (GEMINI_TOOLS, "run_shell_command", "Gemini CLI"),
    }[cli]
    out = _command_refusals(name, commands)
    for i, tool in enumerate(allow_tools):
        if tool == shell:
            out.append(
                Refusal(
                    ("act", "agent", "allow_tools", i),
                    f"'{tool}' would let {name} run any command; list the commands under "
                    f"act.constraints.commands.allow (they become {shell} rules)",
                )
            )
        elif tool not in known:
            hint = " (its 'edit' covers writing files)" if cli == "opencode" else ""
            out.append(
                Refusal(
                    ("act", "agent", "allow_tools", i),
                    f"'{tool}' is not one of {name}'s tools looprun can allow{hint}; known: "
                    f"{', '.join(sorted(known))}",
                )
            )
    return out
