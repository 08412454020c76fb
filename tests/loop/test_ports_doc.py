"""docs/engine.md's table of ports is the protocols: every port, every member, and real
implementations that have those members."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from looprun.loop import ports
from looprun.loop.act.step import ActStep

DOC = Path(__file__).resolve().parents[2] / "docs" / "engine.md"
PROTOCOLS = {
    name: getattr(ports, name)
    for name in (
        "Model",
        "ToolboxFactory",
        "Toolbox",
        "Workspace",
        "Guard",
        "Observer",
        "Journal",
        "ContextBuilder",
        "Approver",
        "Clock",
        "Actor",
        "HeldOutVariants",
    )
} | {"ActStep": ActStep}


def _rows() -> list[list[str]]:
    text = DOC.read_text("utf-8")
    section = text[text.index("## Ports\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _members(protocol: type) -> set[str]:
    """What a protocol declares: its methods and properties, and its annotated attributes."""
    own = {k for k in vars(protocol) if not k.startswith("_") or k == "__call__"}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_every_port_is_in_the_table() -> None:
    listed = {name for row in _rows() for name in _names(row[0])}
    fields = {f.name for f in dataclasses.fields(ports.Ports)}
    assert fields == listed


@pytest.mark.parametrize("row", [r for r in _rows() if r[1].startswith("`")], ids=lambda r: r[1])
def test_each_protocol_is_listed_whole(row: list[str]) -> None:
    protocol = PROTOCOLS[_names(row[1])[0]]
    assert set(_names(row[2])) == _members(protocol)


@pytest.mark.parametrize("row", [r for r in _rows() if r[1].startswith("`")], ids=lambda r: r[1])
def test_the_real_implementations_have_every_member(row: list[str]) -> None:
    protocol = PROTOCOLS[_names(row[1])[0]]
    named = [n for n in _names(row[3]) if n.startswith("looprun.")]
    assert named or protocol is ports.ToolboxFactory, f"no implementation named for {row[1]}"
    for dotted in named:
        module, _, name = dotted.rpartition(".")
        impl = getattr(importlib.import_module(module), name)
        missing = {m for m in _members(protocol) if not hasattr(impl, m)}
        # attributes set in __init__ (``ref``) are not on the class: look at the annotations
        missing -= set(getattr(impl, "__annotations__", {}))
        missing -= _init_attributes(impl)
        assert not missing, f"{dotted} lacks {sorted(missing)}"


def _init_attributes(cls: type) -> set[str]:
    """Names ``__init__`` sets on ``self`` (``self.ref = ...``): not on the class itself."""
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return set()
    return set(re.findall(r"self\.(\w+)", source))


def test_a_member_missing_from_the_table_is_found() -> None:
    row = ["`guard`", "`Guard`", "`check_diff`, `needs_approval`", "`looprun.act.policy.Policy`"]
    assert set(_names(row[2])) != _members(PROTOCOLS["Guard"])
