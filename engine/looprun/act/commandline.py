"""Reading a model-proposed command line without a shell.

Model commands never reach a shell: they are split with ``shlex`` and run as an argv.
A model that writes ``pytest; rm -rf ~`` expects a shell, so anything only a shell
would interpret is found here and refused with a clear reason, rather than silently
passed on as an argument. Allow patterns are matched token by token.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from fnmatch import fnmatchcase

# Programs whose job is to run another command (or a string of shell code). They are
# refused unless an allow pattern names them literally as its program.
WRAPPERS: frozenset[str] = frozenset(
    {
        "sh", "bash", "zsh", "dash", "ksh", "mksh", "csh", "tcsh", "fish", "busybox",
        "env", "xargs", "sudo", "su", "doas", "pkexec", "runuser", "nohup", "setsid",
        "timeout", "nice", "ionice", "stdbuf", "chroot", "time", "exec", "eval", "command",
        "builtin", "script", "watch", "flock", "parallel", "strace", "ltrace", "unshare",
        "nsenter", "chrt", "taskset", "systemd-run", "ssh",
    }
)  # fmt: skip

_PYTHON = re.compile(r"^(python|pypy)[0-9.]*$")
_INLINE_FLAGS: dict[str, frozenset[str]] = {
    "node": frozenset({"-e", "--eval", "-p", "--print"}),
    "deno": frozenset({"eval"}),
    "perl": frozenset({"-e", "-E"}),
    "ruby": frozenset({"-e"}),
    "php": frozenset({"-r"}),
    "lua": frozenset({"-e"}),
}

_NAME_START = re.compile(r"[A-Za-z_0-9@*#?$!-]")


def shell_features(command: str) -> list[str]:
    """Shell syntax in ``command`` that a shell would act on, in order of appearance.

    Quoting is honoured: ``-k "a;b"`` passes a harmless ``;`` to the program. Inside
    double quotes a shell still expands ``$(...)``, backticks and ``$VAR``, so those
    count there too. Newlines and carriage returns count anywhere.
    """
    found: list[str] = []

    def add(feature: str) -> None:
        if feature not in found:
            found.append(feature)

    state = ""  # "" unquoted, "'" in single quotes, '"' in double quotes
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if c in "\r\n":
            add("newline")
            i += 1
            continue
        if state == "'":
            if c == "'":
                state = ""
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c == "`":
            add("`")
        elif c == "$" and i + 1 < n:
            nxt = command[i + 1]
            if nxt == "(":
                add("$(")
            elif nxt == "{":
                add("${")
            elif _NAME_START.match(nxt):
                add("$VAR")
        if state == '"':
            if c == '"':
                state = ""
        elif c in "'\"":
            state = c
        elif c in ";&|<>()":
            two = command[i : i + 2]
            if two in ("&&", "||", ">>", "<<", ">&", "&>", "<(", ">("):
                add(two)
                i += 2
                continue
            add(c)
        i += 1
    return found


def split(command: str) -> list[str]:
    """``shlex`` split in POSIX mode; raises ValueError on unbalanced quotes."""
    return shlex.split(command, comments=False, posix=True)


def pattern_matches(pattern: str, argv: Sequence[str]) -> bool:
    """Whether ``argv`` matches an allow pattern, token by token.

    Each pattern token is a glob over one argument (``--junitxml=*``, ``tests/*``); a
    token that is exactly ``*`` matches any number of arguments, including none, so
    ``python -m pytest *`` also allows a bare ``python -m pytest``.
    """
    try:
        tokens = split(pattern)
    except ValueError:
        return False
    return _match(tokens, list(argv))


def _match(tokens: list[str], argv: list[str]) -> bool:
    # Iterative wildcard matching with backtracking over lone-``*`` tokens.
    t = a = 0
    star_t, star_a = -1, 0
    while a < len(argv):
        if t < len(tokens) and tokens[t] == "*":
            star_t, star_a = t, a
            t += 1
        elif t < len(tokens) and fnmatchcase(argv[a], tokens[t]):
            t += 1
            a += 1
        elif star_t >= 0:
            t = star_t + 1
            star_a += 1
            a = star_a
        else:
            return False
    while t < len(tokens) and tokens[t] == "*":
        t += 1
    return t == len(tokens)


def wrapper_of(argv: Sequence[str]) -> str | None:
    """The wrapper or inline-code form ``argv`` uses (``bash``, ``python -c``), if any."""
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    if prog in WRAPPERS:
        return prog
    if _PYTHON.match(prog):
        return _python_inline(prog, argv[1:])
    flags = _INLINE_FLAGS.get(prog)
    if flags:
        for arg in argv[1:]:
            if arg in flags or any(arg.startswith(f + "=") for f in flags if f.startswith("--")):
                return f"{prog} {arg}"
    return None


def _python_inline(prog: str, args: Sequence[str]) -> str | None:
    """``python -c CODE`` (also bundled as ``-Sc``); stops at a script or ``-m``."""
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if not arg.startswith("-") or arg.startswith("--") or arg == "-":
            return None
        for pos, flag in enumerate(arg[1:], start=1):
            if flag == "c":
                return f"{prog} {arg}"
            if flag == "m":
                return None
            if flag in "WX":  # takes a value: attached, or the next argument
                skip = pos == len(arg) - 1
                break
    return None


def pattern_allows_wrapper(pattern: str, wrapper: str) -> bool:
    """A pattern allows a wrapper only by naming it literally (program and flag)."""
    try:
        tokens = split(pattern)
    except ValueError:
        return False
    if not tokens:
        return False
    parts = wrapper.split(" ", 1)
    if os.path.basename(tokens[0]) != parts[0]:
        return False
    return len(parts) == 1 or parts[1] in tokens[1:]


# Options whose value names a directory the program deletes before use.
CLEARING_OPTIONS: frozenset[str] = frozenset({"--basetemp"})
# Options that delete a directory named somewhere else (a config file the repository
# ships): what they delete cannot be judged from the command line.
INDIRECT_CLEARING: frozenset[str] = frozenset({"--cache-clear"})
_MAX_NESTING = 6


def path_arguments(argv: Sequence[str]) -> list[tuple[str, str | None]]:
    """Every argument (after the program) that may name a path: ``(value, option)``.

    The argument itself, the value of ``--opt=value`` and ``key=value`` forms, nested
    (``--override-ini=cache_dir=/x``, ``-ocache_dir=/x``), the words of a value that
    holds several (``addopts=--rootdir /``), the value attached to a short option
    (``-c/etc/x``), and the argument after an option that deletes its value
    (``--basetemp DIR``). ``option`` is the option or key the value belongs to, if any.
    """
    found: list[tuple[str, str | None]] = []
    args = list(argv[1:])
    for i, arg in enumerate(args):
        _collect(arg, None, found, 0)
        if arg in CLEARING_OPTIONS and i + 1 < len(args):
            found.append((args[i + 1], arg))
    return found


def _collect(arg: str, option: str | None, found: list[tuple[str, str | None]], depth: int) -> None:
    if not arg or depth > _MAX_NESTING:
        return
    found.append((arg, option))
    if any(ch.isspace() for ch in arg):  # a value the program splits into arguments
        try:
            words = split(arg)
        except ValueError:
            words = arg.split()
        for word in words:
            _collect(word, option, found, depth + 1)
        return
    name, eq, value = arg.partition("=")
    if eq and value:
        _collect(value, name, found, depth + 1)
    elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        _collect(arg[2:], arg[:2], found, depth + 1)


def unjudgeable(value: str) -> str | None:
    """Why a path argument cannot be judged from its text, or None: a program may
    expand ``~`` or ``$VAR`` itself (pytest does for ``--rootdir``), to anywhere."""
    if value.startswith("~"):
        return "starts with ~, which a program may expand to a home directory"
    if "$" in value:
        return "holds $, which a program may expand from the environment"
    return None


def literal_tokens(patterns: Sequence[str]) -> frozenset[str]:
    """Glob-free tokens of allow patterns: arguments a template author wrote out."""
    out: set[str] = set()
    for pattern in patterns:
        try:
            tokens = split(pattern)
        except ValueError:
            continue
        out.update(t for t in tokens[1:] if not any(ch in t for ch in "*?["))
    return frozenset(out)


def pattern_allows_feature(pattern: str, feature: str) -> bool:
    """A pattern allows a piece of shell syntax only by containing it literally."""
    if feature == "newline":
        return False
    if feature == "$VAR":
        return "$" in pattern
    return feature in pattern
