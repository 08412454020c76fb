"""Typed, immutable template objects: what the loader produces and the loop interprets.

Every expression in here is already compiled (see ``expressions``). Nothing in this
module knows about YAML; ``resolved`` keeps the fully composed document as frozen
plain data for ``looprun explain``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any, Literal

from looprun.data.value import valueclass
from looprun.errors import Location
from looprun.template.expressions import Condition, Text

PlanMode = Literal["none", "static", "model"]
ActionKind = Literal["retry", "rollback", "replan", "escalate", "abort"]
Isolation = Literal["worktree", "none"]
InputType = Literal["string", "integer", "number", "boolean", "list", "command"]
SandboxMode = Literal["auto", "required", "off"]
AgentSession = Literal["fresh", "resume"]

# The agent CLIs a template may name (act.agent.cli); which of them run is the act layer's
# business (act/agents), so the closed set lives here and the support there.
AGENT_CLIS: tuple[str, ...] = ("claude-code", "codex", "aider", "opencode", "gemini")

ACTION_KINDS: tuple[str, ...] = ("retry", "rollback", "replan", "escalate", "abort")
BUILTIN_TOOLS: tuple[str, ...] = (
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "search",
    "run",
    "flag_for_human",  # the honest exit: the task cannot be done as asked
)

# Names the engine itself provides to conditions and messages, besides observer names.
ENGINE_NAMES: frozenset[str] = frozenset(
    {
        "intent",  # the user's intent text (also inputs.intent)
        "inputs",  # every declared input, after defaults and --set
        "iteration",  # 1-based iteration number within the current task
        "task",  # the current task: id, goal, paths, attempt
        "progress",  # repeats (consecutive equal fingerprints), fingerprint, changed
        "policy",  # violations (count), summary, items, diff_lines, pending_approvals
        "budget",  # tokens, cost_usd, elapsed_s, iterations and their remaining_* figures
        "exit",  # ok (all exit conditions hold), failed (list of the ones that do not)
        "subloops",  # outer loops: all_done, failed, counts by outcome, list of results
        "feedback",  # act prompt only: the feedback chosen by the last refine decision
        "run",  # run.id, run.dir, run.artifacts, run.workdir
        "baseline",  # per observer: its facts before the first act turn, and comparisons
        "tasks",  # per completed task id: its observer and baseline facts when it was done
        "agent",  # act.agent: what the CLI reported (exit_code, error, turns, ...): claims
        "heldout",  # held-out variants: status, reason, asked, written, kept, tokens
    }
)

# MCP tools reach the model as ``mcp__SERVER__TOOL`` (the naming Claude Code's
# --allowedTools uses); act.tools allows them by that name, the TOOL part a glob.
MCP_PREFIX = "mcp__"
MCP_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")  # no "__"


def mcp_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an ``mcp__SERVER__TOOL`` name, or None for any other."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX) :].partition("__")
    return (server, tool) if sep and server and tool else None


UNKNOWN = Location("<unknown>")
DEFAULT_MAX_REPEATS = 3  # no-progress detection is on unless a template turns it off
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@valueclass
class InputSpec:
    """A declared input: its type, default and whether it must be given."""

    name: str
    type: InputType = "string"
    required: bool = False
    default: Any = None
    description: str = ""
    location: Location = UNKNOWN


@valueclass
class Protect:
    """Read-only paths: any change to them (since the task, or the run, started) is a
    violation, as are changed or removed doctest examples when ``doctests`` is set."""

    paths: tuple[Text, ...] = ()  # gitignore-style globs; may use intent and inputs
    doctests: bool = False
    # protected paths a *new* file may still be created at (a task that may only add
    # tests); gitignore-style, so ``!**/conftest.py`` keeps a new conftest refused
    allow_new: tuple[Text, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.paths) or self.doctests


@valueclass
class TaskSpec:
    """A planned unit of work; ``done_when`` (if any) must hold, besides ``exit``."""

    id: str
    goal: Text
    done_when: Condition | None = None
    paths: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    location: Location = UNKNOWN
    protect: Protect = Protect()


@valueclass
class PlanSpec:
    """How the intent becomes tasks: none, a static list, or a model planner."""

    mode: PlanMode = "none"
    tasks: tuple[TaskSpec, ...] = ()
    prompt: Text | None = None  # mode: model — how the planner is asked
    max_tasks: int = 8


@valueclass
class PathRules:
    """Which paths the act tools may write: allowed globs minus denied ones."""

    allow: tuple[str, ...] = ("**",)
    deny: tuple[str, ...] = ()


@valueclass
class ScopedPattern:
    """A forbidden pattern checked only in some files, its globs rendered for one run."""

    pattern: str  # as written: a literal, or ``re:...``
    regex: re.Pattern[str]  # compiled once, at load
    paths: tuple[str, ...] = ()  # gitignore-style globs it applies to; () every file
    exclude: tuple[str, ...] = ()  # globs it never applies to, whatever ``paths`` says
    message: str = ""  # why it is forbidden, shown with the violation


@valueclass
class ForbiddenPattern:
    """``{pattern, paths, exclude, message}`` in ``act.constraints.forbidden_patterns``.

    Globs may use ``intent`` and ``inputs`` (``{{ inputs.tests_glob }}``): a pattern
    over "the code that is not a test" is a glob for all code with the tests excluded,
    since one gitignore-style glob cannot say "not under the tests".
    """

    pattern: str
    regex: re.Pattern[str]
    paths: tuple[Text, ...] = ()
    exclude: tuple[Text, ...] = ()
    message: str = ""
    location: Location = UNKNOWN

    def render(self, context: Mapping[str, Any]) -> ScopedPattern:
        def globs(texts: tuple[Text, ...]) -> tuple[str, ...]:
            return tuple(g for t in texts if (g := t.render(context).strip()))

        return ScopedPattern(
            self.pattern, self.regex, globs(self.paths), globs(self.exclude), self.message
        )


@valueclass
class Constraints:
    """Boundaries the engine enforces on every tool call, whatever the model asks."""

    paths: PathRules = PathRules()
    commands: tuple[str, ...] = ()  # allow patterns for model-proposed commands
    max_diff_lines: int | None = None
    forbidden_patterns: tuple[str, ...] = ()  # in every file
    scoped_patterns: tuple[ForbiddenPattern, ...] = ()  # the mapping entries of the list
    approve: tuple[str, ...] = ()  # path globs whose changes need a person's approval
    command_timeout_s: float = 300.0
    max_output_bytes: int = 64_000
    protect: Protect = Protect()  # read-only for the whole run (against the run's base)


@valueclass
class McpServerSpec:
    """An MCP server declared in ``act.mcp``: a command run over stdio (inside the run's
    sandbox, like every command) or a streamable-HTTP ``url``. ``env`` and ``headers``
    values are literal, or ``${VAR}``: taken from looprun's environment at start.
    ``paths``/``write_paths`` name, per tool, the arguments that are workdir paths: the
    engine checks them against ``act.constraints.paths`` before the call is made."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=_empty)
    headers: Mapping[str, str] = field(default_factory=_empty)
    cwd: str | None = None  # workdir-relative
    start_timeout_s: float = 30.0
    call_timeout_s: float = 120.0
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    write_paths: Mapping[str, tuple[str, ...]] = field(default_factory=_empty)
    location: Location = UNKNOWN


@valueclass
class AgentSpec:
    """An agent CLI run headless for each act turn (``act.agent``)."""

    cli: str
    model: str = "default"  # in the CLI's own names; "default": resolved like models.act
    max_turns: int | None = None
    timeout_s: float = 900.0
    session: AgentSession = "fresh"
    allow_tools: tuple[str, ...] = ()  # the CLI's own tool names; () the CLI's defaults
    location: Location = UNKNOWN
    # act.mcp, passed through in the CLI's own config (Claude Code: --mcp-config); the
    # allowed tools are the allow_tools entries named mcp__SERVER__TOOL
    mcp: Mapping[str, McpServerSpec] = field(default_factory=_empty)


@valueclass
class ActSpec:
    """The act turn: prompts, enabled tools, step cap and constraints; or an agent CLI."""

    prompt: Text
    system: Text | None = None
    tools: tuple[str, ...] = BUILTIN_TOOLS
    max_steps: int = 25
    constraints: Constraints = Constraints()
    agent: AgentSpec | None = None
    mcp: Mapping[str, McpServerSpec] = field(default_factory=_empty)


@valueclass
class VariantsSpec:
    """Held-out tests a model writes during the run: variants of the tests task ``of``
    made fail, with other inputs, asked for once that task is done.

    ``count`` renders (from the inputs) to how many; ``prompt`` is the holdout role's
    request (it reads the intent, the inputs, ``count``, ``file`` and ``tests``: the
    files the task added); the answer's code is kept as ``file`` in the run's private
    store, never in the tree. ``test_pattern`` is what a test looks like in the pack's
    language (a pytest function, a Go test function): an answer it does not match holds
    no test, and a file the task changed that it matches may hold the task's tests.
    ``beside``: the file is copied into the directory of the task's first test file, named
    ``to`` (a Go test must sit in its package's directory), instead of a directory ``to``
    holding it.
    """

    of: Text  # the task's id (may read the inputs)
    count: Text
    prompt: Text
    file: str
    test_pattern: re.Pattern[str]  # compiled once, at load, with re.MULTILINE
    beside: bool = False


@valueclass
class HoldoutSpec:
    """Tests kept out of the model's reach, copied into the tree only while the observer runs.

    ``source`` renders (from the inputs) to a path outside the workdir, or ``variants``
    says how the run writes them itself; ``dest`` is the workdir-relative place the copy
    goes, which must not exist when it is made.
    """

    source: Text | None
    dest: str
    location: Location = UNKNOWN
    variants: VariantsSpec | None = None


# a tier run taking at least this share of a whole run's time does not pay for itself
NARROW_SHARE = 0.5


@valueclass
class ObserverSpec:
    """A check run after each act turn; ``run`` is trusted, reviewed template config."""

    name: str
    parser: str
    run: Text | None = None  # shell=True: substituted values are quoted unless ShellCode
    file: Text | None = None
    timeout_s: float = 600.0
    when: Condition | None = None
    options: Mapping[str, Any] = field(default_factory=_empty)
    location: Location = UNKNOWN
    # exit statuses meaning the check itself could not run (pytest 2-4: interrupted by
    # collection errors, internal error, usage error); at the baseline they stop the run
    cannot_run_exit: tuple[int, ...] = ()
    # "pytest": the command runs with the run base's pytest configuration, copied where no
    # command can write (checks/pytest_pin.py), never with what the tree holds now
    pin_config: str | None = None
    # a stack's name (checks/stacks): the command runs on a clean copy of the repository
    # built from the diff, with that stack's configuration pinned to the run's base
    stack: str | None = None
    # a held-out check: its result decides like any observer's, but the model only ever
    # learns that it failed (see checks/holdout.py)
    holdout: HoldoutSpec | None = None
    # staged: where the narrow selection run first comes from (NARROW_SOURCES, in order);
    # the whole command runs when the selection is empty or passes
    narrow: tuple[str, ...] = ()
    # staged: the tiers are skipped (the whole command runs) while the last tier run took
    # at least this share of the last whole run's time; None: always run them
    narrow_share: float | None = NARROW_SHARE
    # the node ids one narrow run appends to the command: set by the engine, never by YAML
    select: tuple[str, ...] = ()
    # why this check cannot run where the template was composed (a stack with no tool for
    # it): a run stops before any model call with this message
    unavailable: str | None = None


# an observer option whose whole value is an input: ``paths: "{{ inputs.target }}"``
INPUT_OPTION = re.compile(r"^\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


def bound_options(options: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """An observer's options with each ``{{ inputs.NAME }}`` value replaced by the input's
    value (the loader checked the names; a value is data, never rendered)."""
    out = dict(options)
    for key, value in options.items():
        m = INPUT_OPTION.match(value) if isinstance(value, str) else None
        if m is not None:
            out[key] = inputs.get(m.group(1))
    return out


# where a staged observer's narrow selection comes from
NARROW_SOURCES: tuple[str, ...] = (
    "last_failing",
    "task_failing",
    "changed_tests",
    "related_tests",  # a tier of its own, run after the others pass
)


@valueclass
class Action:
    """What a refine rule decides. No action can declare success."""

    kind: ActionKind
    message: Text | None = None
    target: str | None = None  # rollback: last_green | base | previous
    location: Location = UNKNOWN


@valueclass
class Rule:
    """One node of the refine tree: ``if``/``then`` (action or sub-tree), or ``else``."""

    condition: Condition | None  # None: an ``else`` rule, always matches
    action: Action | None = None
    children: tuple[Rule, ...] = ()
    location: Location = UNKNOWN
    description: str = ""  # why the rule exists, for reviewers (shown by explain)
    id: str = ""  # the author's name for it; unique in the tree

    @property
    def name(self) -> str:
        """The one name of this rule everywhere (explain, Mermaid, JSON, `looprun test`,
        the journal): its ``id``, else ``file:line`` of the rule."""
        if self.id:
            return self.id
        file = self.location.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{file}:{self.location.line}"


@valueclass
class Limits:
    """The hard caps that stop a run which has not reached its goal."""

    max_iterations: int = 10
    max_tokens: int | None = None
    timeout_s: float | None = None
    max_cost_usd: float | None = None
    per_tool: Mapping[str, int] = field(default_factory=_empty)
    # stop as ``stalled`` when progress.repeats reaches this; None (``false``) turns it off
    max_repeats: int | None = DEFAULT_MAX_REPEATS


@valueclass
class ContextSpec:
    """The context budget for each model call and how many rounds stay verbatim."""

    budget_tokens: int = 24_000
    recent_rounds: int = 3


@valueclass
class SandboxSpec:
    """Whether commands run in an OS sandbox (``--sandbox`` overrides ``mode``), whether
    they may use the network there, and which paths (absolute or ``~/``) they may not
    read on top of the user's credential stores."""

    mode: SandboxMode = "auto"
    network: bool = False
    hide: tuple[str, ...] = ()


@valueclass
class EachTask:
    """Run another template per planned task (nested loops as composition)."""

    uses: str  # as written: a path (relative to the template) or a built-in name
    template: Template
    with_: Mapping[str, Text] = field(default_factory=_empty)
    isolation: Isolation = "worktree"
    parallel: int = 1
    location: Location = UNKNOWN


@valueclass
class Template:
    """A validated, composed template: what the engine interprets."""

    name: str
    source: str  # the file it was loaded from
    description: str = ""
    inputs: Mapping[str, InputSpec] = field(default_factory=_empty)
    models: Mapping[str, str] = field(default_factory=_empty)
    plan: PlanSpec = PlanSpec()
    act: ActSpec | None = None
    observe: Mapping[str, ObserverSpec] = field(default_factory=_empty)  # in declaration order
    exit: tuple[Condition, ...] = ()
    refine: tuple[Rule, ...] = ()
    limits: Limits = Limits()
    context: ContextSpec = ContextSpec()
    each_task: EachTask | None = None
    sandbox: SandboxSpec = SandboxSpec()
    resolved: Mapping[str, Any] = field(default_factory=_empty, repr=False, compare=False)
    # numbers written as `{{ inputs.NAME }}`: dotted path -> input name (resolved already)
    input_numbers: Mapping[str, str] = field(default_factory=_empty, compare=False)
