"""Which files are ignored, decided once: the ignore rules of a base, kept as one exclude
file, so a ``.gitignore`` or ``info/exclude`` written during a run hides nothing."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

from looprun.workspace.git import Git, GitError


def _escape_glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\!#])", r"\\\1", text)


def flatten_ignore(directory: str, text: str) -> list[str]:
    """The lines of ``directory/.gitignore`` rewritten relative to the top of the tree,
    so they can be given to git as one exclude file: a pattern with a slash before its
    end is anchored at ``directory``, one without matches at any depth below it."""
    out: list[str] = []
    prefix = "/" + _escape_glob(directory.strip("/")) + "/" if directory.strip("/") else ""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not prefix:
            out.append(line)
            continue
        neg, body = ("!", line[1:]) if line.startswith("!") else ("", line)
        anchored = "/" in body.rstrip().rstrip("/")
        out.append(neg + prefix + (body.lstrip("/") if anchored else "**/" + body))
    return out


def base_ignore_rules(git: Git, tree: str) -> str:
    """The ignore rules a base had, as one exclude file: the user's global excludes file,
    ``info/exclude`` and every ``.gitignore`` in the base tree (deeper ones later, so
    they win as in git). Read once per base; later edits of these files change nothing."""
    key = (str(git.workdir), str(git.git_dir or ""), tree)
    cached = _RULES_CACHE.get(key)
    if cached is None:
        listing = git.run("ls-tree", "-r", "-z", "--full-tree", tree)
        files: list[tuple[str, str]] = []
        for rec in listing.split("\0"):
            meta, _, path = rec.partition("\t")
            if path.rsplit("/", 1)[-1] == ".gitignore" and meta.split(" ")[1:2] == ["blob"]:
                files.append((path, git.run("cat-file", "blob", meta.split(" ")[2])))
        cached = _RULES_CACHE[key] = _combine(git, files)
    return cached


def remember_ignore_rules(git: Git, tree: str, rules: str) -> None:
    """Record the rules read when ``tree`` was taken as a base, so every later snapshot
    against it (the workspace's and the git_diff observer's) uses exactly those."""
    _RULES_CACHE[(str(git.workdir), str(git.git_dir or ""), tree)] = rules


def current_ignore_rules(git: Git, exclude: str) -> str:
    """The same rules read from the working tree as it is now (for the start state, before
    a base exists): the ``.gitignore`` files a snapshot now would hold."""
    out = git.run(
        "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
        ":(glob)**/.gitignore", f":(exclude){exclude}",
    )  # fmt: skip
    files: list[tuple[str, str]] = []
    for path in dict.fromkeys(p for p in out.split("\0") if p):
        with contextlib.suppress(OSError):
            files.append((path, (Path(git.workdir) / path).read_text("utf-8", "replace")))
    return _combine(git, files)


# Caches that tools create beside the code with a ``.gitignore`` of their own (``*``):
# always ignored, since a directory's own ``.gitignore`` written during a run counts for
# nothing (it is how a model would hide a file). Python does not import from them.
TOOL_CACHES = (
    ".pytest_cache/", ".ruff_cache/", ".mypy_cache/", ".hypothesis/", "__pycache__/",
)  # fmt: skip


def _combine(git: Git, files: list[tuple[str, str]]) -> str:
    lines: list[str] = list(TOOL_CACHES)
    for source in _global_and_info_excludes(git):
        with contextlib.suppress(OSError):
            lines += Path(source).read_text("utf-8", "replace").splitlines()
    for path, text in sorted(files, key=lambda item: (item[0].count("/"), item[0])):
        lines += flatten_ignore(path.rpartition("/")[0], text)
    return "\n".join(lines) + "\n"


_RULES_CACHE: dict[tuple[str, str, str], str] = {}


def _global_and_info_excludes(git: Git) -> list[str]:
    out = []
    configured = (git.config_value("core.excludesFile") or "").strip()
    if configured.startswith("%(prefix)/"):  # git's install prefix: git knows it
        configured = git.run("config", "--path", "core.excludesFile", check=False).strip()
    elif configured.startswith("~"):
        configured = os.path.expanduser(configured)
    if configured:
        out.append(configured)
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        out.append(os.path.join(xdg, "git", "ignore"))
    with contextlib.suppress(GitError):  # else no repository holds one
        out.append(str(git.info_path("exclude")))
    return out


def ignored_paths(
    git: Git, rules: str, exclude: str = ".looprun", head: str | bool | None = True
) -> set[str]:
    """Untracked paths the rules ignore, a wholly ignored directory as one ``dir/``.
    ``head``: the commit HEAD points at, when the caller knows it (None: no commit yet);
    True asks git."""
    spec = ["."] + ([f":(exclude){exclude}"] if not exclude.startswith("..") else [])
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".exclude") as fh:
        fh.write(rules)
        fh.flush()
        with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            if git.head() if head is True else head:
                git.run("read-tree", "HEAD", env=env)
            out = git.run_bytes(
                "ls-files", "-z", "-o", "-i", "--directory", f"--exclude-from={fh.name}",
                "--", *spec, env=env,
            )  # fmt: skip
    return {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}


def exclude_locally(git: Git, line: str) -> None:
    """Add ``line`` to the repository's ``info/exclude`` unless it is there: an ignore
    rule local to this clone, never committed (the engine's state directory)."""
    exclude = git.info_path("exclude")
    try:
        existing = exclude.read_text("utf-8").splitlines()
    except FileNotFoundError:
        existing = []
    if line in existing:
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(exclude, flags, 0o644), "a", encoding="utf-8") as fh:
        prefix = "" if not existing or exclude.read_text("utf-8").endswith("\n") else "\n"
        fh.write(f"{prefix}{line}\n")
