"""What a check needs to know about one ecosystem, behind one shape.

A stack is a unit: its observer pack (``templates/observers/NAME.yaml``) says which
checks run and how their output is read; its adapter (a module beside this one holding a
``STACK``) says how to recognise a repository of it, which programs the checks need, which
files configure the checks (taken from the run's base in the tree a check runs on), which
files are never trusted (build output, bytecode, metadata), which dependency directories
are shared read-only, and where its tools keep their caches. The loop never branches on a
stack: the check runner asks the adapter named by an observer's ``stack:`` key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from looprun.data.value import valueclass


@valueclass
class Tool:
    """A program a stack's checks run, and how a user gets it."""

    program: str  # looked up on PATH before the run starts
    install: str  # what to do when it is missing: "install Go (apt-get install golang-go)"


@valueclass
class SetupInput:
    """What a stack's setup may look at before a run starts: files as the run's base holds
    them (never the working tree a model writes to later), the directory of its installed
    tools, and what the user chose."""

    read: Callable[[str], bytes | None]  # a root-relative file at the base; None: absent
    workdir: Path  # for installed tools (node_modules/.bin), which the base does not hold
    given: Mapping[str, str]  # the --set values
    declared: frozenset[str]  # the template's input names: only these may be set


@valueclass
class Setting:
    """An input a stack's setup chose, recorded with the run like a --set value (a resume
    and the sub-loops reuse it); ``value`` None sets nothing and only says ``why``."""

    name: str
    value: str | None
    why: str


# raises UsageError when the repository leaves the choice to the user
Setup = Callable[[SetupInput], tuple[Setting, ...]]


@valueclass
class Stack:
    """One ecosystem's adapter: plain data, read by detection and the check runner."""

    name: str  # the pack: templates/observers/NAME.yaml
    # files at the repository's root whose presence marks the stack (go.mod, Cargo.toml)
    markers: tuple[str, ...]
    # source suffixes that mark it when no marker file is present (".go")
    sources: tuple[str, ...] = ()
    tools: tuple[Tool, ...] = ()
    # gitignore-style globs of what configures the checks (package.json, Cargo.toml,
    # pom.xml, pytest.ini ...): the tree a check runs on holds them as they were at the
    # run's base, whatever the working tree says
    pinned: tuple[str, ...] = ()
    # gitignore-style globs never copied into a check's tree, even when the diff has them:
    # build output, bytecode, package metadata a tool would trust (target/, __pycache__/)
    untrusted: tuple[str, ...] = ()
    # top-level directories of installed dependencies (node_modules) that a check's tree
    # links to read-only instead of copying; a change to them during the run is tampering
    shared: tuple[str, ...] = ()
    # environment variable -> a directory under the run's cache its tools write there
    # (GOCACHE -> "go-build"), so caches work inside the sandbox and stay out of the tree
    caches: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # the caches among them a run's may start as a copy of, one only the base's build wrote
    # (checks/seeded_cache): Go's build cache, cargo's target directory
    seeded: tuple[str, ...] = ()
    # how the stack's tools tell a cached build is fresh: "content" (entries keyed by all
    # their inputs, as Go's are) or "dates" (a build newer than its sources is fresh, as
    # cargo's is: the seed keeps its dates, and the check tree dates the files the seed was
    # built from back, so only what differs from them is built again)
    fresh_by: Literal["content", "dates"] = "content"
    # environment variables every check of this stack runs with (GOFLAGS=-mod=readonly)
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # inputs of the pack read from the repository at the run's base (which test runner the
    # scripts use), before any model call; None: the pack's defaults and --set only
    setup: Setup | None = None
    # the root files that setup reads, read from the base together before it runs
    setup_reads: tuple[str, ...] = ()
    # how the test command is narrowed to some test ids: the words appended to it; None:
    # the ids themselves, as pytest takes its node ids
    select: Callable[[Sequence[str]], tuple[str, ...]] | None = None
    # the test ids a test file placed at a root-relative path defines, read from its text
    # (never run); None: the file's path selects its tests, as it does for pytest
    tests_in: Callable[[str, str], tuple[str, ...]] | None = None
    # of the test files holding parametrized ids, those whose ids may differ on another
    # run of the same tree, read (never run) through a reader of root-relative files; None
    # from it, or no such function: only a second run of the baseline can tell
    varying: (
        Callable[[Callable[[str], str | None], Sequence[str]], tuple[str, ...] | None] | None
    ) = None
    # the words that make the test command list the tests it would run, without running
    # any (its parser, told ``listed``, reads their ids spelled as a run reports them),
    # so the baseline learns which ids move from a listing rather than a second run;
    # None: the stack cannot list them, and the second run stays
    listing: tuple[str, ...] | None = None

    def describe(self) -> str:
        return f"{self.name} ({', '.join(self.markers)})"
