"""Composition: ``extends`` a parent template and ``include`` fragments, with positions kept.

Merge rules (one rule set, applied at every level):

* mappings merge key by key, recursively;
* scalars and lists replace what they override (``refine``, ``exit``, ``act.tools``,
  ``plan.tasks``, path globs ...: restate the whole list to change it);
* ``key: null`` removes the key (``observe: {lint: null}`` drops an inherited observer);
* ``refine`` given as a mapping edits the inherited tree instead of replacing it (add rules
  before, after or next to a rule named by its ``id``, replace or remove one: see
  ``refine_edits``).

Order: the parent (``extends``) first, then each ``include`` fragment in order, then the
file's own content. Every value keeps the location of the file it came from, so a
mistake inside a parent or a fragment is reported in that file.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import Location, Problem, TemplateError
from looprun.system.resources import builtin_names, builtin_template, templates_dir
from looprun.template import deps, slots
from looprun.template.refine_edits import RefineEditor
from looprun.template.schema_check import schema_problems
from looprun.template.sharing.refs import RefError, RemoteFile, is_remote
from looprun.template.suggest import did_you_mean
from looprun.template.yamlpos import Document, JsonPath, load_document

# What a fragment may contribute; ``looprun``, ``description`` and ``include`` are its own.
FRAGMENT_KEYS = ("inputs", "models", "act", "observe", "exit", "refine", "limits", "context")
_FRAGMENT_OWN = ("looprun", "description", "include")
MAX_DEPTH = 16


Source = Path | RemoteFile


def display(path: Source) -> str:
    """A path as the user would like to read it: relative to the working directory if inside."""
    if isinstance(path, RemoteFile):
        return str(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@valueclass
class _Confinement:
    root: Path  # resolved
    links: frozenset[str]  # repository-relative paths that are symbolic links


_CONFINED: ContextVar[_Confinement | None] = ContextVar("looprun_compose_root", default=None)


@contextmanager
def confined_to(root: Path, links: Iterable[str] = ()) -> Iterator[None]:
    """Compose only from files under ``root``: a revision extracted from git objects, whose
    ``extends``/``include``/``uses`` must never reach the host's file system (an absolute
    path, a ``../`` out of it, or a path through one of its symbolic ``links`` is a
    problem at the reference, not a file read)."""
    token = _CONFINED.set(_Confinement(root.resolve(), frozenset(links)))
    try:
        yield
    finally:
        _CONFINED.reset(token)


def _check_confined(ref: str, base_dir: Path) -> None:
    here = _CONFINED.get()
    if here is None or base_dir.resolve().is_relative_to(templates_dir().resolve()):
        return  # not confined, or a built-in template naming its own fragments
    if ref.startswith("~") or Path(ref).is_absolute():
        raise RefError(
            f"'{ref}' is an absolute path; a revision is read only from its own git objects"
        )
    joined = Path(os.path.normpath(base_dir.resolve() / ref))
    try:
        parts = joined.relative_to(here.root).parts
    except ValueError:
        raise RefError(
            f"'{ref}' is outside the repository; a revision is read only from its own git objects"
        ) from None
    for i in range(1, len(parts) + 1):
        if "/".join(parts[:i]) in here.links:
            raise RefError(f"'{ref}' is a symbolic link in the revision, which is not followed")


def resolve_ref(ref: str, base_dir: Path) -> Path | None:
    """A referenced template: a path relative to ``base_dir`` first, else a built-in name."""
    candidate = Path(ref).expanduser()
    if not candidate.is_absolute():
        candidate = base_dir / candidate
    exists = candidate.exists()
    deps.probe(candidate, exists)  # a file created here later names another template
    if exists:
        return candidate
    name = ref.removesuffix(".yaml").removesuffix(".yml")
    return builtin_template(name)


def resolve_source(ref: str, base: Source, at: Location) -> Source | None:
    """What ``ref``, written in ``base``, names: a ``git+`` reference pinned by the lock; in
    a remote file, a path in the same repository at the same commit (else a built-in);
    locally, ``resolve_ref``. Raises RefError when a remote reference cannot be used."""
    if is_remote(ref):
        if isinstance(base, RemoteFile):
            return base.resolver.pin(ref)
        # the lock and the git cache: only for a template that names a remote reference
        from looprun.template.sharing.resolver import resolver_for

        return resolver_for(base).pin(ref, local=(at.file, at.line, at.col))
    if isinstance(base, RemoteFile):
        try:
            sibling = base.sibling(ref)
        except ValueError as exc:
            raise RefError(str(exc)) from None
        if base.resolver.kind(sibling) is not None:
            return sibling
        return builtin_template(ref.removesuffix(".yaml").removesuffix(".yml"))
    _check_confined(ref, base.parent)
    return resolve_ref(ref, base.parent)


def read_remote(target: Source) -> str | None:
    """The text of a remote file, checked against the lock (None for a local file)."""
    if not isinstance(target, RemoteFile):
        return None
    return str(target.resolver.read(target)[0])


def missing_ref_message(ref: str) -> str:
    hint = did_you_mean(ref.removesuffix(".yaml").removesuffix(".yml"), _all_builtins())
    return (
        f"cannot find template '{ref}': no such file next to this template and no built-in "
        f"template of that name{hint}"
    )


def stack_packs() -> list[str]:
    """The stacks that have a pack: ``templates/observers/NAME.yaml``."""
    return sorted(p.stem for p in templates_dir().glob("observers/*.yaml"))


def _all_builtins() -> list[str]:
    names = set(builtin_names())
    names.update(
        str(p.relative_to(templates_dir()).with_suffix(""))
        for p in templates_dir().glob("*/*.yaml")
    )
    return sorted(names)


def _tables(doc: Document) -> tuple[dict[JsonPath, Location], ...]:
    return (doc.values, doc.keys, doc.blocks)


class _Under:
    """A document's located paths by each path above them (itself included), in the
    document's order: what a merge takes with a value, found without scanning."""

    def __init__(self, doc: Document) -> None:
        self.tables: list[dict[JsonPath, list[JsonPath]]] = []
        for table in _tables(doc):
            under: dict[JsonPath, list[JsonPath]] = {}
            for p in table:
                for i in range(1, len(p) + 1):
                    under.setdefault(p[:i], []).append(p)
            self.tables.append(under)


@dataclass
class _Layer:
    """Mutable merge state: data plus the location of every value and key."""

    data: dict[str, Any]
    values: dict[JsonPath, Location]
    keys: dict[JsonPath, Location]
    blocks: dict[JsonPath, Location]
    problems: list[Problem]
    # A fragment's refine edits name rules of the template that includes it: they stay as
    # written until they are merged into that template.
    keep_edits: bool = False

    @classmethod
    def empty(cls) -> _Layer:
        return cls({}, {}, {}, {}, [])

    def merge(self, doc: Document, skip: tuple[str, ...] = ()) -> None:
        body = {k: v for k, v in doc.data.items() if k not in skip}
        if () in doc.values:
            self.values[()] = doc.values[()]
        self._merge_map(self.data, body, (), doc, _Under(doc))

    def _merge_map(
        self, dst: dict[str, Any], src: dict[str, Any], path: JsonPath, doc: Document, under: _Under
    ) -> None:
        # The tables hold a location only for a path the data holds, so a key the data
        # lacks has nothing located under it to forget.
        for key, value in src.items():
            child = (*path, key)
            if value is None:
                if key in dst:
                    del dst[key]
                    self._forget(child)
                continue
            if child == ("refine",) and isinstance(value, dict) and not self.keep_edits:
                self._edit_refine(value, doc)
                continue
            if isinstance(value, dict):
                if not isinstance(dst.get(key), dict):
                    if key in dst:
                        self._forget(child)
                    dst[key] = {}
                self._take(child, doc)
                self._merge_map(dst[key], value, child, doc, under)
                continue
            if key in dst:
                self._forget(child)
            dst[key] = copy.deepcopy(value)
            for mine, theirs, paths in zip(self._tables(), _tables(doc), under.tables, strict=True):
                for p in paths.get(child, ()):
                    mine[p] = theirs[p]

    def _edit_refine(self, edits: dict[str, Any], doc: Document) -> None:
        mine = (self.values, self.keys, self.blocks)
        editor = RefineEditor(self.data.get("refine"), mine, doc, ("refine",))
        rules, tables = editor.apply(edits)
        self.problems.extend(editor.problems)
        self.data["refine"] = rules
        at = doc.values.get(("refine",))
        self._forget(("refine",))
        for table, located in zip(mine, tables, strict=True):
            table.update(located)
        if at is not None:
            self.values[("refine",)] = at
        if ("refine",) in doc.keys:
            self.keys[("refine",)] = doc.keys[("refine",)]

    def _tables(self) -> tuple[dict[JsonPath, Location], ...]:
        return (self.values, self.keys, self.blocks)

    def _forget(self, prefix: JsonPath) -> None:
        n = len(prefix)
        for table in self._tables():
            for p in [p for p in table if p[:n] == prefix]:
                del table[p]

    def _take(self, path: JsonPath, doc: Document) -> None:
        """The locations of ``path`` itself (not of what is under it)."""
        for mine, theirs in zip(self._tables(), _tables(doc), strict=True):
            if path in theirs:
                mine[path] = theirs[path]

    def document(self, path: Source) -> Document:
        return Document(path, self.data, self.values, self.keys, self.blocks)


def _ref_list(doc: Document, key: str, problems: list[Problem]) -> list[tuple[str, JsonPath]]:
    value = doc.data.get(key)
    if value is None:
        return []
    if isinstance(value, str) and key == "extends":
        return [(value, (key,))]
    if isinstance(value, list) and key == "include":
        out = []
        for i, item in enumerate(value):
            if isinstance(item, str) and item.strip():
                out.append((item, (key, i)))
            else:
                problems.append(
                    Problem(
                        doc.value_at((key, i)), f"{key}[{i}]: expected a path or a built-in name"
                    )
                )
        return out
    what = "a path or a built-in name" if key == "extends" else "a list of paths or built-in names"
    problems.append(Problem(doc.value_at((key,)), f"{key}: expected {what}"))
    return []


def _pinned(includes: list[tuple[str, JsonPath]]) -> contextlib.AbstractContextManager[None]:
    """The stack the first include naming a stack's pack pins (no pin: nothing changes)."""
    packs = set(stack_packs())
    for ref, _at in includes:
        m = slots.PACK_REF.match(ref)
        if m and m.group(1) in packs:
            return slots.pinned_by(ref, m.group(1))
    return contextlib.nullcontext()


def _chain(stack: tuple[Source, ...], last: Source) -> str:
    return " -> ".join(display(p) for p in (*stack, last))


def compose(
    path: Source,
    stack: tuple[Source, ...] = (),
    *,
    fragment: bool = False,
    text: str | None = None,
) -> Document:
    """Load ``path`` and resolve its ``extends`` and ``include`` into one located document.
    A remote file's ``text`` is read (and checked against the lock) by the caller, which
    knows where the reference was written; without it, it is read here."""
    if isinstance(path, RemoteFile) and text is None:
        try:
            text = read_remote(path)
        except RefError as exc:
            raise TemplateError([Problem(Location(str(path), 1, 1), str(exc))]) from None
    doc = load_document(path, text)
    if not isinstance(doc.data, dict):
        raise TemplateError(
            [Problem(doc.value_at(()), "expected a mapping of template keys at the top level")]
        )
    problems: list[Problem] = []
    here = path.resolve()
    layer = _Layer.empty()
    layer.keep_edits = fragment
    stack = (*stack, here)

    def sub(ref: str, at: JsonPath, kind: str) -> Document | None:
        loc = doc.value_at(at)
        rendered, why = slots.render(ref)
        if rendered is None:
            problems.append(Problem(loc, f"{kind}: '{ref}': {why}"))
            return None
        slot, ref = ref != rendered, rendered
        try:
            target = resolve_source(ref, path, loc)
            remote_text = read_remote(target) if target is not None else None
        except RefError as exc:
            problems.append(Problem(loc, f"{kind}: {exc}"))
            return None
        if target is None:
            choice = slots.current()
            if slot:
                packs = ", ".join(stack_packs())
                message = f"no pack '{ref}' for stack '{choice.name}' (packs: {packs})"
            else:
                message = missing_ref_message(ref)
            problems.append(Problem(loc, f"{kind}: {message}"))
            return None
        if target.resolve() in stack:
            problems.append(Problem(loc, f"{kind} cycle: {_chain(stack, target)}"))
            return None
        if len(stack) > MAX_DEPTH:
            problems.append(Problem(loc, f"{kind}: nesting deeper than {MAX_DEPTH} levels"))
            return None
        if isinstance(target, Path) and target.is_dir():
            problems.append(Problem(loc, f"{kind}: '{ref}' is a directory, not a template file"))
            return None
        try:
            return compose(target, stack, fragment=(kind == "include"), text=remote_text)
        except TemplateError as exc:
            problems.extend(exc.problems)
            return None

    if fragment:
        for key in doc.data:
            if key not in FRAGMENT_KEYS and key not in _FRAGMENT_OWN:
                problems.append(
                    Problem(
                        doc.key_at((key,)),
                        f"'{key}' is not allowed in a fragment (a fragment may hold: "
                        f"{', '.join(FRAGMENT_KEYS)})",
                    )
                )
    includes = _ref_list(doc, "include", problems)
    if not fragment:
        # a template that includes a stack's pack itself composes its parents (a built-in's
        # `observers/{{ inputs.stack }}.yaml`) in that stack
        with _pinned(includes):
            for ref, at in _ref_list(doc, "extends", problems):
                parent = sub(ref, at, "extends")
                if parent is not None:
                    layer.merge(parent)
    for ref, at in includes:
        frag = sub(ref, at, "include")
        if frag is not None:
            layer.merge(frag, skip=_FRAGMENT_OWN)
    problems += layer.problems
    layer.problems.clear()
    if problems:
        if not fragment:  # still report this file's own mistakes, not only the composition's
            problems += [p for p in schema_problems(doc) if "missing required key" not in p.message]
        raise TemplateError(problems)
    skip: tuple[str, ...] = _FRAGMENT_OWN if fragment else ("extends", "include")
    if fragment:
        skip = tuple(k for k in doc.data if k not in FRAGMENT_KEYS)
    layer.merge(doc, skip=skip)
    if layer.problems:
        raise TemplateError(layer.problems)
    return layer.document(path)
