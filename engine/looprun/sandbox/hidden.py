"""Where users keep credentials: paths a sandboxed command may not read.

The root is mounted read-only, not hidden, so without this a test that a cloned
repository ships, or a command the model writes, could print ``~/.ssh/id_ed25519`` or
``~/.aws/credentials`` into output that reaches the model and the run's records. The
bubblewrap backend mounts an empty directory over each of these (``/dev/null`` over a
file); a template's ``sandbox.hide`` names more.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Iterable, Mapping
from pathlib import Path

# relative to each home directory: keys, tokens and the configs that hold them
CREDENTIAL_STORES: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".config/looprun",
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".config/opencode",
    ".local/share/opencode",
    ".aider.conf.yml",
)


def homes(env: Mapping[str, str]) -> list[Path]:
    """Every home a command could look in: ``$HOME``, the user's from the password
    database (they differ under ``sudo -E`` or a changed ``HOME``) and root's."""
    found = [env.get("HOME", "")]
    with contextlib.suppress(KeyError):
        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    found.append("/root")
    out: list[Path] = []
    for home in found:
        if home and os.path.isabs(home) and Path(home) not in out:
            out.append(Path(home))
    return out


def expand(path: str, env: Mapping[str, str]) -> Path:
    """``~`` and ``~/x`` name the user's home; other paths are absolute (the schema and
    the template loader refuse the rest)."""
    if path == "~" or path.startswith("~/"):
        return Path(env.get("HOME") or str(Path.home())) / path[2:]
    return Path(path)


def hidden_paths(env: Mapping[str, str], extra: Iterable[str] = ()) -> tuple[Path, ...]:
    """The credential stores under every home plus ``extra``, as the paths that exist
    now, symlinks resolved (a mount lands on the target). Paths that do not exist are
    left out: the read-only root keeps a command from creating them."""
    wanted = [home / store for home in homes(env) for store in CREDENTIAL_STORES]
    wanted += [expand(path, env) for path in extra]
    out: list[Path] = []
    for path in wanted:
        try:
            if not path.exists():
                continue
            real = path.resolve()
        except OSError:
            continue
        if real not in out:
            out.append(real)
    return tuple(out)
