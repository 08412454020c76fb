"""Pin the configuration a pytest check runs with to the run's base.

pytest finds its configuration (``addopts``, ``-p``, ``testpaths``, ``python_files``...)
in files of the tree it tests, so a model that writes such a file changes what the check
runs. Here pytest's discovery is followed on the base commit (read from git, never from
the working tree, and from the file system only above the working tree, which no command
can write): the file that would win is copied into a run directory commands cannot write,
and the check is told to use it with ``-c COPY --rootdir ROOT --confcutdir ROOT``. With no
configuration at the base the copy is an empty ``pytest.ini``, so a file the model adds is
never read either.

What the copy cannot carry by itself is made explicit: ``pythonpath`` (relative to the
configuration file's directory) is passed again as absolute paths with ``-o``, and the
conftest cut-off pytest derives from that directory is passed as ``--confcutdir``.

The check's interpreter runs in safe-path mode (``PYTHONSAFEPATH``, set by the runner), so
``python -m pytest`` does not put the working directory first on ``sys.path`` while pytest
starts: a ``pytest.py``, ``_pytest/`` or ``json.py`` the model adds there is not imported
in place of pytest's own. The tests get that directory back through ``pythonpath``, which
pytest applies itself once it runs, behind the directories that must stay ahead of the
project's (looprun's own plugin).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from looprun.data.value import valueclass
from looprun.system.atomic import write_atomic
from looprun.system.safefs import open_dir
from looprun.workspace.git import Git, GitError

# pytest's own precedence, per directory (``_pytest.config.findpaths``)
CONFIG_NAMES = (
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
EMPTY_NAME = "pytest.ini"  # a dedicated file is the configuration even when empty
# pytest options that take a separate value, which is then no path argument
_VALUED = frozenset(
    (  # noqa: SIM905 - a list of words reads better here
        "-k -m -p -c -o -W -r -n --rootdir --confcutdir --junitxml --junit-xml --junitprefix "
        "--junit-prefix --basetemp --deselect --ignore --ignore-glob --tb --maxfail --durations "
        "--durations-min --log-level --log-file --log-format --log-date-format --log-cli-level "
        "--log-cli-format --log-cli-date-format --log-file-level --log-file-format "
        "--log-file-date-format --import-mode --override-ini --config-file --capture --color "
        "--code-highlight --show-capture --assert --doctest-glob --doctest-report --cov "
        "--cov-report --cov-config --dist --timeout --max-worker-restart"
    ).split()
)
# looprun's plain re-run of tests and its mutation runners (observe/pytest_plugin/) take the
# same pinning options, so their rootdir and pythonpath are the suite's
_RUNNERS = frozenset({"pytest", "py.test", "looprun_plain", "looprun_mutants", "looprun_pinned"})
_OPERATORS = frozenset({";", "&&", "||", "|", "&", "(", ")"})


class PinError(Exception):
    """The base's configuration cannot be pinned (the check must not run unpinned)."""


@valueclass
class Located:
    """What pytest would use at the base: the winning file (its bytes) and the rootdir."""

    rootdir: Path
    name: str = EMPTY_NAME  # the copy keeps the name, so pytest parses it the same way
    content: bytes = b""
    source: str = ""  # where it was found, for messages ("" when nothing was)


# --- which arguments the command gives pytest -------------------------------------------


def _tokens(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError as exc:
        raise PinError(f"cannot read the command's arguments: {exc}") from None


def _runner_at(tokens: list[str]) -> int:
    """The index of the last ``pytest`` the command runs (a program or a ``-m`` module)."""
    start = None
    for i, token in enumerate(tokens):
        runner = not token.startswith("-") and "=" not in token
        if runner and PurePosixPath(token).name in _RUNNERS and tokens[i - 1 : i] != ["-p"]:
            start = i
    if start is None:
        raise PinError("the command runs no pytest (no `pytest` or `-m pytest` in it)")
    return start


def runs_as_module(command: str) -> bool:
    """Whether pytest runs as ``-m pytest`` (``python -m``, ``coverage run -m``), which
    puts the current directory on ``sys.path``; a ``pytest`` script puts its own."""
    tokens = _tokens(command)
    at = _runner_at(tokens)
    return tokens[at - 1 : at] == ["-m"]


def command_args(command: str) -> tuple[list[str], str | None, str | None]:
    """The path arguments of the pytest invocation a shell command ends with, and the
    ``-c`` and ``--rootdir`` values it gives (``None`` when absent).

    The pinning options are appended to the command, so it must end with pytest's
    arguments: a command that runs no pytest, or runs something after it, is refused."""
    tokens = _tokens(command)
    start = _runner_at(tokens) + 1
    args: list[str] = []
    config = rootdir = None
    pending: str | None = None
    for token in tokens[start:]:
        if token in _OPERATORS:
            raise PinError(
                f"the command goes on after pytest's arguments ({token!r}); the pinned "
                "options are appended to it, so it must end with the pytest invocation"
            )
        if pending is not None:
            config = token if pending in ("-c", "--config-file") else config
            rootdir = token if pending == "--rootdir" else rootdir
            pending = None
        elif token.startswith("--") and "=" in token:
            name, _, value = token.partition("=")
            config = value if name == "--config-file" else config
            rootdir = value if name == "--rootdir" else rootdir
        elif token in _VALUED:
            pending = token
        elif token.startswith("-c") and len(token) > 2:
            config = token[2:]
        elif not token.startswith("-"):
            args.append(token.split("::")[0])
    return args, config, rootdir


# --- the base's tree --------------------------------------------------------------------


class BaseTree:
    """The files of the base commit under the working tree, and the real file system
    above it (which no command can write)."""

    def __init__(self, workdir: Path, git: Git | None, base: str | None):
        self.workdir = workdir
        self._git, self._base = git, base
        self._listed: dict[PurePosixPath, dict[str, tuple[str, str]]] = {}

    def _inside(self, path: Path) -> PurePosixPath | None:
        try:
            return PurePosixPath(path.relative_to(self.workdir).as_posix())
        except ValueError:
            return None

    def _entries(self, folder: PurePosixPath) -> dict[str, tuple[str, str]]:
        if folder not in self._listed:
            entries: dict[str, tuple[str, str]] = {}
            if self._git is not None and self._base:
                # `./`: relative to the working tree, wherever it is in the repository
                spec = f"{self._base}:./{'' if str(folder) == '.' else folder}"
                code, out, _ = self._git.run_status("ls-tree", "--full-tree", "-z", spec)
                for line in out.split("\0") if code == 0 else ():
                    meta, _, name = line.partition("\t")
                    if name:
                        mode, _kind, oid = meta.split()
                        entries[name] = (mode, oid)
            self._listed[folder] = entries
        return self._listed[folder]

    def _entry(self, rel: PurePosixPath) -> tuple[str, str] | None:
        if str(rel) == ".":
            return ("040000", "")
        return self._entries(rel.parent).get(rel.name)

    def kind(self, path: Path) -> str | None:
        """``"file"``, ``"dir"``, ``"link"`` or ``None`` (absent) at the base."""
        rel = self._inside(path)
        if rel is None:
            if path.is_symlink():
                return "link"
            return "dir" if path.is_dir() else "file" if path.is_file() else None
        entry = self._entry(rel)
        if entry is None:
            return None
        # a submodule (160000) is a directory whose files the base's tree does not hold
        return {"040000": "dir", "160000": "dir", "120000": "link"}.get(entry[0], "file")

    def read(self, path: Path) -> bytes:
        rel = self._inside(path)
        if rel is None:
            return path.read_bytes()
        entry = self._entry(rel)
        if entry is None or self._git is None:
            raise PinError(f"{rel} is not in the base commit")
        return self._git.run_bytes("cat-file", "blob", entry[1])

    def where(self, path: Path) -> str:
        rel = self._inside(path)
        return str(path) if rel is None else str(rel)


# --- pytest's discovery on that tree ---------------------------------------------------


def _ini_sections(text: str) -> dict[str, dict[str, str]]:
    """Sections and values of an INI file, read the way pytest's ``iniconfig`` does
    (a section header starts its line; an indented line continues the last value)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    key: str | None = None
    for raw in text.removeprefix("\ufeff").splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip()[0] in "#;":
            continue
        if line[0] == "[":
            header = re.split("[#;]", line, maxsplit=1)[0].rstrip()
            if header.endswith("]"):
                current, key = sections.setdefault(header[1:-1], {}), None
        elif line[0].isspace():
            if current is not None and key is not None:
                current[key] += "\n" + line.strip()
        elif current is not None:
            name, sep, value = line.partition("=")
            if ":" in name or not sep:
                name, _, value = line.partition(":")
            key = name.strip()
            current[key] = value.strip()
    return sections


def _toml_table(name: str, text: str) -> dict[str, object] | None:
    import tomllib

    document = tomllib.loads(text)  # its TOMLDecodeError is a ValueError
    if name != "pyproject.toml":
        return dict(document.get("pytest") or {})  # type: ignore[call-overload]
    tool = document.get("tool")
    table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return None
    ini = table.get("ini_options")
    rest = {k: v for k, v in table.items() if k != "ini_options"}
    return rest or (dict(ini) if isinstance(ini, dict) else None)


def config_values(name: str, content: bytes) -> dict[str, object] | None:
    """The pytest options a file named ``name`` holds, or ``None`` when pytest does not
    take it as its configuration (a tox.ini without ``[pytest]``...). A file pytest could
    not parse is taken (pytest stops on it at the same place), with no values."""
    try:
        text = content.decode("utf-8")
        if name.endswith(".toml"):
            return _toml_table(name, text)
        sections = _ini_sections(text)
    except (UnicodeDecodeError, TypeError, ValueError):
        return {}
    if name in ("pytest.ini", ".pytest.ini"):
        return dict(sections.get("pytest", {}))
    if name == "setup.cfg":
        return dict(sections["tool:pytest"]) if "tool:pytest" in sections else None
    return dict(sections["pytest"]) if "pytest" in sections else None


def _existing_dirs(tree: BaseTree, invocation: Path, args: Iterable[str]) -> list[Path]:
    out = []
    for arg in args:
        path = Path(arg) if Path(arg).is_absolute() else invocation / arg
        path = Path(*_normal(path.parts))
        kind = tree.kind(path)
        if kind is not None:
            out.append(path if kind == "dir" else path.parent)
    return out


def _normal(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            if len(out) > 1:
                out.pop()
        elif part != ".":
            out.append(part)
    return out


def _common_ancestor(invocation: Path, dirs: list[Path]) -> Path:
    ancestor: Path | None = None
    for path in dirs:
        if ancestor is None or path in ancestor.parents:
            ancestor = path
        elif ancestor not in path.parents and path != ancestor:
            ancestor = Path(os.path.commonpath([path, ancestor]))
    return ancestor or invocation


def _search(tree: BaseTree, starts: Iterable[Path]) -> Located | None:
    fallback: Located | None = None
    for start in starts:
        for folder in (start, *start.parents):
            for name in CONFIG_NAMES:
                path = folder / name
                kind = tree.kind(path)
                if kind is None or kind == "dir":
                    continue
                if kind == "link":
                    raise PinError(
                        f"{tree.where(path)} is a symbolic link at the base; only a regular "
                        "file can be pinned"
                    )
                content = tree.read(path)
                found = Located(folder, name, content, tree.where(path))
                if config_values(name, content) is not None:
                    return found
                if name == "pyproject.toml" and fallback is None:
                    fallback = found
    return fallback


def locate(tree: BaseTree, invocation: Path, args: list[str], config: str | None) -> Located:
    """The configuration pytest would read at the base for these arguments: the file a
    ``-c`` names, else the first one found from the arguments' common ancestor upwards,
    else none (with the rootdir pytest then falls back to)."""
    if config is not None:
        path = Path(config) if Path(config).is_absolute() else invocation / config
        if tree.kind(path) != "file":
            raise PinError(f"-c {config}: no such regular file at the base")
        return Located(path.parent, path.name, tree.read(path), tree.where(path))
    dirs = _existing_dirs(tree, invocation, args)
    ancestor = _common_ancestor(invocation, dirs)
    found = _search(tree, [ancestor])
    if found is not None:
        return found
    for folder in (ancestor, *ancestor.parents):
        if tree.kind(folder / "setup.py") == "file":
            return Located(folder)
    if dirs and dirs != [ancestor]:
        found = _search(tree, dirs)
        if found is not None:
            return found
    rootdir = _common_ancestor(invocation, [invocation, ancestor])
    return Located(ancestor if rootdir == Path(rootdir.anchor) else rootdir)


# --- the flags the check runs with -------------------------------------------------------


def _listed(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return shlex.split(str(value)) if value else []


def _overridden(command: str, name: str) -> str | None:
    """The last value the command gives ``name`` with ``-o``/``--override-ini``: the
    pinned ``-o`` comes after it and would replace it, so it is carried over."""
    tokens = _tokens(command)
    rest = tokens[_runner_at(tokens) + 1 :]
    value = None
    for i, token in enumerate(rest):
        if token in ("-o", "--override-ini"):
            option = rest[i + 1] if i + 1 < len(rest) else ""
        elif token.startswith("--override-ini="):
            option = token.partition("=")[2]
        elif token.startswith("-o"):
            option = token[2:]
        else:
            continue
        key, sep, given = option.partition("=")
        value = given if sep and key.strip() == name else value
    return value


def flags(
    found: Located,
    copy: Path,
    command: str,
    rootdir: str | None = None,
    *,
    workdir: Path | None = None,
    ahead: tuple[Path, ...] = (),
) -> str:
    """The pytest options that make it read ``copy`` as the base's configuration; with a
    ``workdir``, the directory safe-path mode kept off ``sys.path``, given back after the
    base's ``pythonpath`` (where ``python -m`` had it) and behind ``ahead``."""
    root = found.rootdir if rootdir is None else Path(rootdir)
    values = config_values(found.name, found.content) or {}
    out = ["-c", str(copy), "--rootdir", str(root)]
    addopts = " ".join(_listed(values.get("addopts", "")))
    if "--confcutdir" not in addopts and "--confcutdir" not in command:
        # pytest's default: the configuration file's directory, else the rootdir
        out += ["--confcutdir", str(found.rootdir if found.source else root)]
    given = _overridden(command, "pythonpath")  # the command's own `-o` wins in pytest
    listed = _listed(values.get("pythonpath", "") if given is None else given)
    paths = [(found.rootdir if found.source else root) / p for p in listed]
    paths += [] if workdir is None else [workdir]
    if paths:
        # pytest 9 applies `pythonpath` before it imports `-p` plugins, so what must win
        # over a module of the same name in the project goes first
        absolute = [shlex.quote(str(p)) for p in (*ahead, *paths)]
        out += ["-o", "pythonpath=" + " ".join(absolute)]
    return " ".join(shlex.quote(part) for part in out)


_LOCATED: dict[tuple[str, str, str, tuple[str, ...], str | None], Located] = {}
_LOCATED_MAX = 64


def pin(
    command: str,
    *,
    workdir: Path,
    git_dir: Path | None,
    base: str | None,
    into: Path,
    ahead: tuple[Path, ...] = (),
    tree: Path | None = None,
) -> str:
    """Write the base's configuration for ``command`` into ``into`` (a directory no
    command can write) and return ``command`` with the options that pin it appended.

    The command is to run in safe-path mode: when it runs ``-m pytest`` the working
    directory is passed as ``pythonpath`` (after ``ahead``, directories that must not be
    shadowed by a module of the project). ``tree``: where the command runs when that is
    not ``workdir`` (a clean copy of it): the configuration is found as in ``workdir``,
    its directories are given as they are in the copy."""
    if not base:
        raise PinError("the run has no base commit to read pytest's configuration from")
    args, config, rootdir = command_args(command)
    # a base commit never changes: what it configures is looked up once per command line
    # (every check of a run pins the same one)
    key = (str(workdir), str(git_dir or ""), base, tuple(args), config)
    found = _LOCATED.get(key)
    if found is None:
        try:
            found = locate(BaseTree(workdir, Git(workdir, git_dir), base), workdir, args, config)
        except (GitError, OSError) as exc:
            raise PinError(f"cannot read the base's configuration: {exc}") from exc
        if len(_LOCATED) >= _LOCATED_MAX:
            _LOCATED.clear()
        _LOCATED[key] = found
    if tree is not None and found.rootdir.is_relative_to(workdir):
        found = dataclasses.replace(found, rootdir=tree / found.rootdir.relative_to(workdir))
    os.close(open_dir(into, create=True))
    copy = into / found.name
    write_atomic(copy, found.content, nofollow=True, sync="none")
    cwd = (tree or workdir) if runs_as_module(command) else None
    return f"{command} {flags(found, copy, command, rootdir, workdir=cwd, ahead=ahead)}"
