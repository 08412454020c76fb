"""What each agent CLI can be made to enforce, checked when a template loads.

looprun enforces paths, diff size, forbidden patterns and approvals on the real diff
after every turn, whatever the CLI. What it cannot check after the fact - which commands
ran, how many times a tool was called - must be passed to the CLI as the CLI's own rules;
where a CLI has no such rule, ``validate`` refuses the template instead of pretending.
Pure data and functions: the template layer imports this, nothing here runs a CLI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUPPORTED: tuple[str, ...] = ("claude-code", "codex", "aider")
NOT_YET: tuple[str, ...] = ("opencode", "gemini")

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


@dataclass(frozen=True)
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
    if cli in NOT_YET:
        return [
            Refusal(
                ("act", "agent", "cli"),
                f"'{cli}' is not supported yet (supported: {', '.join(SUPPORTED)})",
            )
        ]
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
        for i, pattern in enumerate(commands):
            if claude_bash_rule(pattern) is None:
                out.append(
                    Refusal(
                        ("act", "constraints", "commands", "allow", i),
                        f"'{pattern}' has no Claude Code permission rule: use 'command *' "
                        "(any arguments) or an exact command, without other wildcards",
                    )
                )
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
