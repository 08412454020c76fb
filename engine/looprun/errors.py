"""One error tree for the whole engine; the CLI maps it to exit codes in one place."""

from __future__ import annotations

from dataclasses import dataclass

# Documented exit codes. Outcomes of a run map to these; see README "Exit codes".
EXIT_DONE = 0
EXIT_ERROR = 1
EXIT_INVALID = 2
EXIT_EXHAUSTED = 3
EXIT_STALLED = 4
EXIT_ESCALATED = 5
EXIT_ABORTED = 6


def one_line(text: str) -> str:
    """A message on one line (a verdict, a row of ``looprun runs``, a git failure): git's
    ``hint:`` lines dropped, the other lines joined."""
    lines = [ln.strip() for ln in text.splitlines()]
    return "; ".join(ln for ln in lines if ln and not ln.startswith("hint:"))


class LooprunError(Exception):
    """Root of every error looprun raises on purpose. Never shown with a traceback."""

    exit_code = EXIT_ERROR


class UsageError(LooprunError):
    """The command line asked for something impossible (unknown run id, bad --set)."""

    exit_code = EXIT_INVALID


@dataclass(frozen=True)
class Location:
    """Where something sits in a source file; line and col are 1-based (0 = unknown)."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.col or 1}"
        return self.file


@dataclass(frozen=True)
class Problem:
    """One mistake found in a template: where it is and what is wrong."""

    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class TemplateError(LooprunError):
    """A template is invalid. Carries every problem found, not just the first."""

    exit_code = EXIT_INVALID

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]):
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ExpressionError(LooprunError):
    """A condition or message failed while being evaluated at run time."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"{where}: {message}")


class ModelError(LooprunError):
    """The model provider failed in a way retrying will not fix (auth, not found, bad request)."""


class ModelSetupError(ModelError):
    """A model cannot be used as configured (its API key variable is not set): a setup
    mistake to fix before anything runs, so it exits like a usage error."""

    exit_code = EXIT_INVALID


class ContextTooLong(ModelError):
    """The provider rejected a request as too long for the model's context window."""


class ToolError(LooprunError):
    """A tool call could not be carried out; returned to the model as a tool result."""


class PolicyViolation(ToolError):
    """A tool call was refused by the template's act constraints."""

    def __init__(self, rule: str, message: str):
        self.rule = rule
        super().__init__(message)
