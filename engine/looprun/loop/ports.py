"""The small protocols the loop core depends on, and the bundle that carries them.

The engine knows nothing of HTTP, git or YAML: the model, tools, workspace, observers,
journal and clock all come in through these ports, so tests and outer loops swap
implementations by passing different objects, never by monkeypatching.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from looprun.data.changes import FileChange
from looprun.data.usage import UnsavedUsage
from looprun.data.value import valueclass
from looprun.models.base import Message, Model, ToolCall, ToolSpec
from looprun.observe.base import Observation
from looprun.template.model import Constraints, ObserverSpec, ScopedPattern

if TYPE_CHECKING:
    from looprun.loop.act.step import ActStep
    from looprun.loop.core import Loop


class ViolationLike(Protocol):
    """A refused action, as the loop records it."""

    rule: str
    message: str
    tool: str
    detail: str


class ToolOutcome(Protocol):
    """What a tool call produced, as the loop needs it."""

    content: str
    is_error: bool
    violation: ViolationLike | None
    changed: tuple[str, ...]
    flag: str | None  # the model's reason when it flagged the task for a person


class Toolbox(Protocol):
    """The tools of one act turn, within the template's constraints."""

    def specs(self) -> list[ToolSpec]: ...
    def call(self, call: ToolCall) -> ToolOutcome: ...


class ToolboxFactory(Protocol):
    """Builds the act turn's tools for one iteration, bounded by the run's deadline."""

    def __call__(
        self, constraints: Constraints, tools: Sequence[str], *, deadline: float | None
    ) -> Toolbox: ...


class Workspace(Protocol):
    """The working tree: base, checkpoints on private refs, restore, diff."""

    def base(self) -> str: ...
    def checkpoint(self, ref: str) -> str: ...
    def restore(self, ref_or_sha: str) -> None: ...
    def diff(self, base: str | None = None) -> str: ...
    def diff_parts(self, base: str | None = None) -> tuple[str, ...]: ...
    def changed_files(self, base: str | None = None) -> list[str]: ...
    def snapshot(self) -> str: ...
    def exclude(self, paths: Sequence[str]) -> None: ...
    def file_changes(
        self, since: str, until: str | None = None, *, contents: bool = False
    ) -> list[FileChange]: ...
    def describe_base(self) -> str: ...
    def repository_changed(self) -> list[tuple[str, str]]: ...


class Guard(Protocol):
    """The policy checks the engine runs on the real diff after each act turn."""

    def review_diff(
        self, parts: Sequence[str], scoped: Sequence[ScopedPattern]
    ) -> tuple[Sequence[ViolationLike], int]: ...
    def check_protected(
        self,
        changes: Iterable[FileChange],
        globs: Iterable[str],
        doctests: bool,
        scope: str,
        allow_new: Iterable[str] = (),
    ) -> Sequence[ViolationLike]: ...
    def needs_approval(self, rel_paths: Iterable[str]) -> list[str]: ...


class Observer(Protocol):
    """Runs one observer on the real working tree and returns what it found."""

    def observe(
        self,
        spec: ObserverSpec,
        context: Mapping[str, Any],
        *,
        deadline: float | None,
        base: str,
    ) -> Observation: ...
    def related_tests(self, changed: Sequence[str]) -> tuple[str, ...] | None:
        """The test files related to the ``changed`` paths; None when unsure."""
        ...

    def related_items(self, changes: Sequence[FileChange]) -> tuple[str, ...] | None:
        """The tests naming a definition the ``changes`` (with their texts) changed;
        None when unsure."""
        ...

    def varying_params(self, spec: ObserverSpec, files: Sequence[str]) -> tuple[str, ...] | None:
        """Of the test ``files`` holding parametrized ids, those whose ids may differ on
        another run of the same tree, read from their text by ``spec``'s stack; None when
        it cannot tell (a second run does)."""
        ...

    def keeps_tree(self, spec: ObserverSpec) -> bool:
        """Whether ``spec``'s command runs where it cannot write the working tree, so
        there are no edits of its to look for."""

    def list_ids(
        self, spec: ObserverSpec, context: Mapping[str, Any], *, base: str
    ) -> tuple[str, ...] | None:
        """The test ids ``spec``'s command names on the tree now (of the files
        ``spec.select`` names, when it does), spelled as its runs report them, listed by
        its stack without running a test; None when the stack cannot list them or the list
        could not be read whole (a second run tells instead)."""
        ...


@valueclass
class Triage:
    """What held-out variants did on the tree the task that asked for them left: counts
    only, never their names or messages."""

    tests: int  # variants that ran
    kept: int  # of them, those that failed there with the task's tests' exception type
    error: str = ""  # why they could not run ('' when they ran)


class HeldOutVariants(Protocol):
    """The run's private store of held-out variants, outside the working tree, where no
    tool and no sandboxed command can read them; the check that runs them reads it."""

    def unavailable(self) -> str:
        """Why variants cannot be kept from this run's commands ('' when they can)."""
        ...

    def write(self, observer: str, file: str, text: str, dest: str = "") -> None:
        """Keep ``text`` as the observer's variants (``file``), replacing earlier ones;
        ``dest``: where they are copied when they run ('' for the observer's ``to``)."""
        ...

    def triage(
        self,
        spec: ObserverSpec,
        context: Mapping[str, Any],
        *,
        expected: Sequence[str],
        deadline: float | None,
        base: str,
    ) -> Triage:
        """Run ``observer``'s stored variants on the tree now and keep those that fail
        with one of the ``expected`` exception types; the rest never run again."""
        ...


class Journal(Protocol):
    """Where a run records itself; every call is durable when it returns."""

    @property
    def seq(self) -> int: ...  # the number of the last event written
    @property
    def exchange_count(self) -> int: ...  # model exchanges written so far
    def event(self, kind: str, **data: Any) -> None: ...
    def save_state(self, state: Mapping[str, Any]) -> None: ...
    def save_observation(self, number: int, record: Mapping[str, Any]) -> None: ...
    def fresh_artifacts(self) -> None: ...
    def exchange(self, record: Mapping[str, Any]) -> None: ...
    def save_summary(self, summary: Mapping[str, Any]) -> None: ...
    def unsaved_usage(self, journal_seq: int, exchanges: int) -> UnsavedUsage: ...
    def invocation_text(self, invocation: Mapping[str, Any]) -> str: ...


class ContextBuilder(Protocol):
    """Fits the pinned messages and the most recent rounds into the context budget."""

    def build(
        self, pinned: Sequence[Message], rounds: Sequence[Sequence[Message]]
    ) -> list[Message]: ...


class Approver(Protocol):
    """Asks a person about changes under ``approve`` paths; None when nobody can answer."""

    def ask(self, paths: Sequence[str], diff: str) -> bool | None: ...


@valueclass
class AgentRequest:
    """What one act turn asks of the CLI."""

    prompt: str
    system: str
    iteration: int
    task_id: str
    timeout_s: float
    session_id: str = ""  # resume this CLI session; "" starts a fresh one
    # the usage the CLI reported for this session so far (running-total CLIs need it)
    session_usage: Mapping[str, int] = field(default_factory=dict)


@valueclass
class AgentReport:
    """What the CLI reported about one turn; ``error`` is normalised ("" when none)."""

    exit_code: int | None
    error: str = ""  # timeout | auth | rate_limit | server | max_turns | crashed | ...
    error_detail: str = ""
    turns: int = 0
    tool_calls: tuple[str, ...] = ()  # tool names in call order, the CLI's own names
    denials: tuple[str, ...] = ()  # tools the CLI refused to run (its permission rules)
    final_message: str = ""
    session_id: str = ""
    prompt_tokens: int = 0  # this call only
    completion_tokens: int = 0
    cost_usd: float = 0.0
    session_usage: Mapping[str, int] = field(default_factory=dict)  # running totals
    artifact: str = ""  # the raw output kept for this turn

    def facts(self) -> dict[str, Any]:
        return {
            "ran": True,
            "exit_code": self.exit_code,
            "error": self.error,
            "error_detail": self.error_detail,
            "turns": self.turns,
            "tool_calls": len(self.tool_calls),
            "tools": list(self.tool_calls),
            "denials": len(self.denials),
            "denied": list(self.denials),
            "final_message": self.final_message,
            "session_id": self.session_id,
            "tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


class Actor(Protocol):
    """Runs one act turn by an agent CLI (``act.agent``) and reports what it claims."""

    def act(self, request: AgentRequest) -> AgentReport: ...


class Clock(Protocol):
    """Monotonic time, for the wall-time limit and each iteration's duration."""

    def monotonic(self) -> float: ...


class SystemClock:
    """The real monotonic clock."""

    def monotonic(self) -> float:
        return time.monotonic()


class NoApprover:
    """Non-interactive runs: nobody to ask, so the run stops as escalated."""

    def ask(self, paths: Sequence[str], diff: str) -> bool | None:
        return None


class KeepRecent:
    """A plain context builder: pinned messages plus the last ``recent_rounds`` rounds whole."""

    def __init__(self, budget_tokens: int = 0, recent_rounds: int = 3):
        self.recent_rounds = recent_rounds

    def build(
        self, pinned: Sequence[Message], rounds: Sequence[Sequence[Message]]
    ) -> list[Message]:
        kept = list(rounds)[-self.recent_rounds :] if self.recent_rounds else []
        return [*pinned, *(m for r in kept for m in r)]


class NullJournal:
    """Records nothing; for outer loops' dry runs and benchmarks."""

    seq = 0
    exchange_count = 0

    def event(self, kind: str, **data: Any) -> None:
        pass

    def save_state(self, state: Mapping[str, Any]) -> None:
        pass

    def save_observation(self, number: int, record: Mapping[str, Any]) -> None:
        pass

    def fresh_artifacts(self) -> None:
        pass

    def exchange(self, record: Mapping[str, Any]) -> None:
        pass

    def save_summary(self, summary: Mapping[str, Any]) -> None:
        pass

    def unsaved_usage(self, journal_seq: int, exchanges: int) -> UnsavedUsage:
        return UnsavedUsage()  # nothing recorded, so nothing unsaved

    def invocation_text(self, invocation: Mapping[str, Any]) -> str:
        return json.dumps(invocation, default=str)


@valueclass
class Ports:
    """Everything one loop needs from the outside world."""

    model: Model  # the act role
    toolbox: ToolboxFactory
    workspace: Workspace
    guard: Guard
    observer: Observer
    journal: Journal
    context: ContextBuilder
    plan_model: Model | None = None  # defaults to ``model``
    holdout_model: Model | None = None  # writes held-out variants; defaults to ``plan_model``
    variants: HeldOutVariants | None = None  # where they are kept; None: nowhere to hide them
    approver: Approver = field(default_factory=NoApprover)
    clock: Clock = field(default_factory=SystemClock)
    report: Callable[[str], None] = lambda line: None  # one progress line per step
    # how the outside world is wired for this run (e.g. the sandbox), recorded with
    # run_started and resumed; plain data, the loop does not interpret it
    setup: Mapping[str, Any] = field(default_factory=dict)
    actor: Actor | None = None  # act.agent: the agent CLI that acts instead of ``model``
    # each_task: the act step that runs the sub-loops, made for this loop (run/subloops)
    subloops: Callable[[Loop], ActStep] | None = None
