"""A held-out check: tests the model never sees, in the tree only while their observer runs.

Read-only tests stop a model from weakening them, not from special-casing them: a fix that
answers the reproducing test's exact input, an object whose ``__eq__`` is always true. Only
a check the model cannot read sees that. Its tests live outside the workdir (the sandbox
hides them from every command, the tools cannot leave the workdir and deny the place they
are copied to); the engine copies them in just before the observer's command and removes
them afterwards, whatever happened to the command. The copy is made through directory
descriptors with no link followed, and never over anything already there.

What the observer found decides like any observer's facts, but what any later step can
read - the feedback, the items, the error, the journal, the baseline - is sealed: numbers
and booleans survive (``holdout.ok``, ``holdout.failed``), every name and message becomes
the one generic line. Where the tests may go and which facts survive the sealing are the
language's, checked when the template is validated (``template.holdout``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from looprun.data.freeze import freeze
from looprun.data.value import valueclass
from looprun.errors import LooprunError, UsageError
from looprun.observe.base import Observation
from looprun.observe.normalise import failure_signature
from looprun.system import safefs

if TYPE_CHECKING:
    from looprun.template.model import Constraints, ObserverSpec

GENERIC = "a held-out check failed"
_SKIP = frozenset({"__pycache__", ".pytest_cache"})


class HoldoutError(LooprunError):
    """The held-out tests could not be copied in (the destination exists, a link is there)."""


@valueclass
class Holdout:
    """One observer's held-out tests, resolved for a run."""

    observer: str
    source: Path  # absolute, resolved, outside the workdir
    dest: str  # workdir-relative POSIX path


def _given(spec: ObserverSpec, inputs: Mapping[str, Any]) -> str:
    assert spec.holdout is not None
    if spec.holdout.source is None:
        return ""  # variants: written during the run, into its private store
    context = {"inputs": dict(inputs), "intent": inputs.get("intent", "")}
    return spec.holdout.source.render(context).strip()


def active(observers: Mapping[str, ObserverSpec], inputs: Mapping[str, Any]) -> list[str]:
    """The observers whose held-out tests these inputs name (``from`` not empty); the
    variants a run writes itself are the run's (``checks.variants``)."""
    return [n for n, s in observers.items() if s.holdout is not None and _given(s, inputs)]


def resolve(
    observers: Mapping[str, ObserverSpec],
    inputs: Mapping[str, Any],
    workdir: Path,
    cwd: Path | None = None,
) -> dict[str, Holdout]:
    """The held-out tests of each observer that declares them, checked before a run starts.

    An empty ``from`` (an input left at its default) means no held-out check. A relative
    ``from`` is taken from ``cwd`` (the invoking directory). Errors name the observer and
    where the template declares it.
    """
    root = Path(os.path.realpath(workdir))
    out: dict[str, Holdout] = {}
    for name in active(observers, inputs):
        spec = observers[name]
        assert spec.holdout is not None
        where = f"{spec.holdout.location}: observe.{name}.holdout"
        given = _given(spec, inputs)
        path = Path(os.path.expanduser(given))
        if not path.is_absolute():
            path = (cwd or Path.cwd()) / path
        if not os.path.lexists(path):
            raise UsageError(f"{where}.from: {given!r} does not exist")
        real = Path(os.path.realpath(path))
        if not (real.is_dir() or real.is_file()):
            raise UsageError(f"{where}.from: {given!r} is neither a file nor a directory")
        if real == root or real.is_relative_to(root) or root.is_relative_to(real):
            raise UsageError(
                f"{where}.from: {given!r} is inside the working directory (or holds it); "
                "held-out tests must live outside it, where the model's tools cannot read them"
            )
        dest = spec.holdout.dest
        if os.path.lexists(root / dest):
            raise UsageError(
                f"{where}.to: {dest!r} already exists in the working directory; a held-out "
                "check never overwrites files (remove it, or choose another `to`)"
            )
        out[name] = Holdout(name, real, dest)
    return out


def _copy_tree(src: Path, dfd: int) -> None:
    """Regular files and directories of ``src`` into the directory ``dfd``; links and
    caches in the source are left out."""
    with os.scandir(src) as entries:
        for entry in entries:
            if entry.name in _SKIP or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                os.mkdir(entry.name, 0o700, dir_fd=dfd)
                sub = os.open(entry.name, safefs.DIR_FLAGS, dir_fd=dfd)
                try:
                    _copy_tree(Path(entry.path), sub)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(Path(entry.path), entry.name, dfd)


def _copy_file(src: Path, name: str, dfd: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o600, dir_fd=dfd)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as data:
        shutil.copyfileobj(data, out)


@contextlib.contextmanager
def copied_in(holdout: Holdout, workdir: Path) -> Iterator[None]:
    """The held-out tests at ``workdir/dest`` for the duration of the block, then removed
    with every directory made for them, whatever ended the block."""
    parts = PurePosixPath(holdout.dest).parts
    fds: list[int] = [safefs.open_dir(Path(os.path.realpath(workdir)))]
    made: list[tuple[int, str]] = []  # (parent fd, name) of directories made on the way
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, safefs.DIR_FLAGS, dir_fd=fds[-1])
            except FileNotFoundError:
                os.mkdir(part, 0o700, dir_fd=fds[-1])
                made.append((fds[-1], part))
                nxt = os.open(part, safefs.DIR_FLAGS, dir_fd=fds[-1])
            except OSError as exc:
                raise HoldoutError(
                    f"held-out check {holdout.observer!r}: {holdout.dest!r}: a parent is not "
                    f"a real directory ({exc.strerror})"
                ) from None
            fds.append(nxt)
        parent, name = fds[-1], parts[-1]
        try:
            os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            raise HoldoutError(
                f"held-out check {holdout.observer!r}: {holdout.dest!r} exists in the "
                "working tree; the held-out tests are never copied over it"
            )
        try:
            if holdout.source.is_dir():
                os.mkdir(name, 0o700, dir_fd=parent)
                made.append((parent, name))
                sub = os.open(name, safefs.DIR_FLAGS, dir_fd=parent)
                try:
                    _copy_tree(holdout.source, sub)
                finally:
                    os.close(sub)
            else:
                _copy_file(holdout.source, name, parent)
                made.append((parent, name))
            yield
        finally:
            for dfd, made_name in reversed(made):
                if made_name == name and dfd == parent:
                    safefs.remove_entry(dfd, made_name, strict=True)
                else:
                    with contextlib.suppress(OSError):  # a command left files there
                        os.rmdir(made_name, dir_fd=dfd)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def sealed(obs: Observation) -> Observation:
    """What the loop keeps of a held-out observation: ok, counts and number or boolean
    facts; names, messages and output become the generic line."""
    facts = {
        k: v for k, v in obs.facts.items() if isinstance(v, (bool, int, float)) and k != "tampering"
    }
    line = "" if obs.ok else GENERIC
    return dataclasses.replace(
        obs,
        items=(),
        feedback=line,
        error=None if obs.error is None else GENERIC,
        facts=freeze(facts),
        signature=failure_signature([], line),
    )


def denied_to_model(constraints: Constraints, dests: Sequence[str]) -> Constraints:
    """``constraints`` with each held-out destination denied to the tools, for reads and
    writes alike (and, through the diff check, to the model's commands)."""
    if not dests:
        return constraints
    globs = [g for d in dests for g in (f"/{d}", f"/{d}/**")]
    deny = (*constraints.paths.deny, *(g for g in globs if g not in constraints.paths.deny))
    return dataclasses.replace(constraints, paths=dataclasses.replace(constraints.paths, deny=deny))
