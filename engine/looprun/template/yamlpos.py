"""YAML loading that remembers where every value came from.

PyYAML's composed nodes carry line/column marks; this module turns them into plain
data (dicts, lists, scalars) plus a table from JSON path to source position, so a
schema error on ``limits.max_iterations`` can be reported at ``file:12:19``.

Deliberate differences from ``yaml.safe_load``, each to make config less surprising:
mapping keys are always the text as written (``on:`` stays ``"on"``, never ``True``),
timestamps stay strings, and a repeated key is an error rather than a silent overwrite.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from looprun.data.value import valueclass
from looprun.errors import Location, Problem, TemplateError
from looprun.template import deps
from looprun.template.sharing.refs import RemoteFile

JsonPath = tuple[str | int, ...]
# a local file, or a remote one (``git+URL@REF#PATH``) whose text is given
SourcePath = Path | RemoteFile

MAX_NODES = 200_000  # guards against alias expansion bombs ("billion laughs")


# libyaml's parser when available (several times faster), else the pure-Python one.
_Base: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """Safe loading without the timestamp resolver: dates in config stay text."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@valueclass
class Document:
    """A loaded YAML file: plain data and the position of every value and key in it."""

    path: SourcePath
    data: Any
    values: dict[JsonPath, Location] = field(default_factory=dict, repr=False)
    keys: dict[JsonPath, Location] = field(default_factory=dict, repr=False)
    # Block scalars (``|``/``>``): where their first content line starts.
    blocks: dict[JsonPath, Location] = field(default_factory=dict, repr=False)

    @property
    def start(self) -> Location:
        return Location(str(self.path), 1, 1)

    def value_at(self, path: JsonPath) -> Location:
        """Where the value at ``path`` is written, or its nearest written ancestor."""
        return _nearest(self.values, path) or self.start

    def text_line(self, path: JsonPath, line: int) -> Location:
        """Where line ``line`` (1-based) of the text value at ``path`` is written."""
        block = self.blocks.get(path)
        if block is not None:
            return Location(block.file, block.line + line - 1, block.col)
        start = self.value_at(path)
        if line <= 1:
            return start
        return Location(start.file, start.line + line - 1, 1)

    def key_at(self, path: JsonPath) -> Location:
        """Where the key of ``path`` is written (falls back to the value's position)."""
        return self.keys.get(path) or self.value_at(path)


def _nearest(table: dict[JsonPath, Location], path: JsonPath) -> Location | None:
    for n in range(len(path), -1, -1):
        found = table.get(path[:n])
        if found is not None:
            return found
    return None


def _loc(path: SourcePath, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(str(path), 1, 1)
    return Location(str(path), mark.line + 1, mark.column + 1)


def read_text(path: Path) -> str:
    """Read a template file as UTF-8 text, or raise a located TemplateError saying why not."""
    return _read(path)[0]


def _read(path: Path) -> tuple[str, str]:
    """The file's text and the sha256 of its bytes (what an on-disk result is keyed by)."""
    where = Location(str(path), 1, 1)
    if not path.exists():
        raise TemplateError([Problem(where, "no such file")])
    if path.is_dir():
        raise TemplateError([Problem(where, "is a directory, not a template file")])
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TemplateError([Problem(where, f"cannot read file: {exc.strerror or exc}")]) from None
    if b"\x00" in raw[:8192]:
        raise TemplateError([Problem(where, "not a text file (binary content); expected YAML")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        at = Location(str(path), line, col)
        raise TemplateError(
            [Problem(at, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8")]
        ) from None
    return text.removeprefix("\ufeff"), hashlib.sha256(raw).hexdigest()


def load_document(path: SourcePath, text: str | None = None) -> Document:
    """Parse one YAML file into a Document; every problem is a located TemplateError.

    Documents are cached per file identity (path, size, mtime), so a fragment included by
    several templates is parsed once per process. Callers must not mutate the result.
    Each file read is noted (with its content digest) for :mod:`looprun.template.deps`.
    """
    if text is not None:
        return _parse(path, text)
    if isinstance(path, RemoteFile):  # remote text is read, and checked, by the caller
        raise TemplateError([Problem(Location(str(path), 1, 1), "remote file read without text")])
    try:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        key = None
    if key is not None and key in _CACHE:
        doc, digest = _CACHE[key]
        deps.read(path, digest)
        return doc
    text, digest = _read(path)
    doc = _parse(path, text)
    deps.read(path, digest)
    if key is not None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = (doc, digest)
    return doc


_CACHE: dict[tuple[str, int, int, int], tuple[Document, str]] = {}


def _parse(path: SourcePath, text: str) -> Document:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or "invalid YAML"
        if exc.context and exc.problem_mark is not None:
            what = f"{what} ({exc.context})"
        raise TemplateError([Problem(_loc(path, mark), f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as exc:
        raise TemplateError([Problem(Location(str(path), 1, 1), f"YAML error: {exc}")]) from None
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()
    if node is None:
        raise TemplateError(
            [Problem(Location(str(path), 1, 1), "file is empty; expected a template")]
        )
    builder = _Builder(path, loader, text)
    data = builder.build(node, ())
    if builder.problems:
        raise TemplateError(builder.problems)
    return Document(path, data, builder.values, builder.keys, builder.blocks)


class _Builder:
    """Turns composed nodes into plain data, recording positions and collecting problems."""

    def __init__(self, path: SourcePath, loader: _Loader, text: str):
        self.path = path
        self.lines = text.splitlines()
        self.loader = loader
        self.values: dict[JsonPath, Location] = {}
        self.keys: dict[JsonPath, Location] = {}
        self.blocks: dict[JsonPath, Location] = {}
        self.problems: list[Problem] = []
        self.count = 0
        self._active: set[int] = set()

    def build(self, node: yaml.Node, path: JsonPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            if self.count == MAX_NODES + 1:
                self.problems.append(
                    Problem(
                        _loc(self.path, node.start_mark), "document too large (alias expansion?)"
                    )
                )
            return None
        self.values.setdefault(path, _loc(self.path, node.start_mark))
        if isinstance(node, yaml.ScalarNode):
            if node.style in ("|", ">"):
                self._block_start(node, path)
            return self._scalar(node)
        if id(node) in self._active:
            self.problems.append(Problem(_loc(self.path, node.start_mark), "recursive YAML alias"))
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            return self._mapping(node, path)
        finally:
            self._active.discard(id(node))

    def _block_start(self, node: yaml.ScalarNode, path: JsonPath) -> None:
        mark = node.start_mark
        if mark.line + 1 >= len(self.lines):
            return
        line_text = self.lines[mark.line + 1]
        indent = len(line_text) - len(line_text.lstrip(" "))
        self.blocks.setdefault(path, Location(str(self.path), mark.line + 2, indent + 1))

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            self.problems.append(Problem(_loc(self.path, node.start_mark), f"invalid value: {exc}"))
            return None
        if isinstance(value, bytes):  # !!binary: keep it representable as JSON
            return value.decode("utf-8", "replace")
        return value

    def _pairs(self, node: yaml.MappingNode) -> Iterator[tuple[yaml.Node, yaml.Node, bool]]:
        """Key/value nodes, merge keys (``<<``) expanded first; flag says 'from a merge'."""
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
                for src in sources:
                    if not isinstance(src, yaml.MappingNode):
                        self.problems.append(
                            Problem(_loc(self.path, src.start_mark), "'<<' must merge a mapping")
                        )
                        continue
                    for k, v, _ in self._pairs(src):
                        yield k, v, True
            else:
                own.append((key, value))
        for key, value in own:
            yield key, value, False

    def _mapping(self, node: yaml.MappingNode, path: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: set[str] = set()
        for key_node, value_node, from_merge in self._pairs(node):
            where = _loc(self.path, key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Problem(where, "mapping keys must be plain text"))
                continue
            key = str(key_node.value)
            if key in out and not (key in merged and not from_merge):
                if from_merge:
                    continue  # an earlier merge source or the mapping itself wins
                first = self.keys.get((*path, key))
                at = f" (first defined at line {first.line})" if first else ""
                self.problems.append(Problem(where, f"duplicate key '{key}'{at}"))
                continue
            child = (*path, key)
            if key in merged:  # the mapping's own key overrides a merged one
                merged.discard(key)
                self._forget(child)
            elif from_merge:
                merged.add(key)
            self.keys[child] = where
            out[key] = self.build(value_node, child)
        return out

    def _forget(self, prefix: JsonPath) -> None:
        n = len(prefix)
        for table in (self.values, self.keys):
            for p in [p for p in table if p[:n] == prefix]:
                del table[p]
