"""``looprun --until CMD``: the run's template made from the command line.

The template text comes from :mod:`looprun.template.until`; here it meets the working
directory: which of the command's words name a file or a directory there (those become
read-only for the run), where the text is kept (``.looprun/until/<digest>.yaml``, so the
run, its report and ``looprun resume`` read one file like any template run), and
``--save FILE``, the same text handed to the user, never over a file already there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looprun.errors import UsageError
from looprun.system.atomic import write_atomic
from looprun.system.safefs import state_dir
from looprun.template.until import candidate_paths, split_command, until_template

UNTIL_DIR = "until"


def check_options(options: Mapping[str, Any]) -> None:
    """A template and ``--until`` are two answers to one question: exactly one is given;
    ``--protect`` and ``--save`` only go with ``--until``."""
    until, template = options.get("until"), options.get("template")
    if until is not None and template is not None:
        raise UsageError(
            f"give a TEMPLATE or --until CMD, not both (got {template!r} and --until); "
            "`--save FILE` writes the --until loop as a template to grow"
        )
    if until is None and template is None:
        raise UsageError("give a TEMPLATE to run, or --until CMD (a command that must exit 0)")
    if until is None:
        for flag, key in (("--protect", "protect"), ("--save", "save")):
            if options.get(key):
                raise UsageError(f"{flag} goes with --until CMD, not with a TEMPLATE")


def named_paths(workdir: Path, command: str) -> tuple[list[str], list[str]]:
    """The files and the directories of ``workdir`` the command's words name (a link is
    the link itself, never followed)."""
    files: list[str] = []
    dirs: list[str] = []
    for word in candidate_paths(split_command(command)):
        try:
            mode = os.lstat(workdir / word).st_mode
        except (OSError, ValueError):
            continue
        (dirs if stat.S_ISDIR(mode) else files).append(word)
    return files, dirs


def template_text(workdir: Path, options: Mapping[str, Any]) -> str:
    """The --until loop's template, for this working directory."""
    command = str(options["until"])
    files, dirs = named_paths(workdir, command)
    extra = [str(g) for g in options.get("protect") or () if str(g).strip()]
    return until_template(command, files, dirs, extra)


def template_ref(workdir: Path, options: Mapping[str, Any]) -> tuple[str, str]:
    """Write the template into the run state (no link followed, whole or not at all) and
    return its path and text; the name is the text's digest, so the same command line
    names the same file."""
    text = template_text(workdir, options)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    path = state_dir(workdir) / UNTIL_DIR / f"{digest}.yaml"
    write_atomic(path, text, nofollow=True, sync="content")
    return str(path), text


def save_new(target: str, text: str) -> Path:
    """``--save FILE``: ``text`` at FILE, whole, and only if nothing is there (a file, a
    link, a directory): written beside it, then linked to the name, which fails rather
    than replace what exists."""
    path = Path(target).expanduser()
    parent = path.parent if str(path.parent) else Path(".")
    if not path.name or path.name in (".", ".."):
        raise UsageError(f"--save {target}: not a file name")
    try:
        dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"--save {target}: the directory {parent} does not exist") from None
    except NotADirectoryError:
        raise UsageError(f"--save {target}: {parent} is not a directory") from None
    except PermissionError:
        raise UsageError(f"--save {target}: {parent} cannot be opened") from None
    temp = f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        try:
            os.lstat(path.name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        else:
            raise UsageError(f"--save {target}: already exists; not overwritten")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(temp, flags, 0o644, dir_fd=dir_fd)
        except PermissionError:
            raise UsageError(f"--save {target}: {parent} is not writable") from None
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(text.encode("utf-8"))
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(temp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileExistsError:
                raise UsageError(f"--save {target}: already exists; not overwritten") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return path
