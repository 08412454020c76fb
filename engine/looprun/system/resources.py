"""Where the schemas and built-in templates live: inside the installed package, or at
the top of a source checkout (editable installs and running from the repository)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # system/ -> the looprun package


@cache
def _data_dir(name: str) -> Path:
    installed = _PACKAGE / name
    if installed.is_dir():
        return installed
    return _PACKAGE.parent.parent / name  # engine/looprun -> repository root


def schemas_dir() -> Path:
    return _data_dir("schemas")


def templates_dir() -> Path:
    return _data_dir("templates")


def schema_path(name: str = "template") -> Path:
    return schemas_dir() / f"{name}.schema.json"


def builtin_names() -> list[str]:
    """Names of the built-in templates (``bugfix``, ``feature`` ...), sorted."""
    return sorted(p.stem for p in templates_dir().glob("*.yaml"))


def builtin_template(name: str) -> Path | None:
    """The file of a built-in template or fragment by name (``bugfix``, ``observers/python``)."""
    if not name or name.startswith((".", "/")) or ".." in name.split("/"):
        return None
    candidate = templates_dir() / f"{name}.yaml"
    return candidate if candidate.is_file() else None
