"""Where looprun keeps what it may rebuild: ``$XDG_CACHE_HOME/looprun``
(``~/.cache/looprun`` by default)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".cache")
    return Path(base) / "looprun"


def engine_cache(env: Mapping[str, str] | None = None) -> Path:
    """Where the engine keeps its runs' caches: ``$LOOPRUN_CACHE_DIR`` if set, else
    :func:`cache_home`."""
    env = os.environ if env is None else env
    return Path(env["LOOPRUN_CACHE_DIR"]) if env.get("LOOPRUN_CACHE_DIR") else cache_home(env)


def workdir_key(workdir: Path) -> str:
    """A name for one working tree among the engine's caches: a digest of its real path."""
    return hashlib.sha256(os.fsencode(os.path.realpath(workdir))).hexdigest()[:24]
