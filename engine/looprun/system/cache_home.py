"""Where looprun keeps what it may rebuild: ``$XDG_CACHE_HOME/looprun``
(``~/.cache/looprun`` by default)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".cache")
    return Path(base) / "looprun"
