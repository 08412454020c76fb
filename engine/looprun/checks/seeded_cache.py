"""A stack's build cache that starts warm: copied from a seed the run's baseline filled.

Each run's checks build in a cache of their own, so nothing a model's code wrote into one
is ever read by a later check. For a cache whose entries are keyed by their inputs (Go's
build cache: an action id is the hash of everything that went into it) a copy of one that
only the base's own build wrote is as good as a warm one, and spares every run a cold
compile of the standard library's test dependencies.

The seed belongs to one working tree (keyed by its real path), so no repository's checks
fill another's. It is written only by the engine, never by a check: a run copies it in
when its cache is new, and saves its cache back as the seed at the stack's second check,
before that check runs, when only the baseline has built in it. A resumed run, whose cache
already holds what checks of the model's code built, never saves.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

from looprun.system.cache_home import cache_home


def seed_home(workdir: Path, env: Mapping[str, str] | None = None) -> Path:
    """``$LOOPRUN_CACHE_DIR/seed/KEY`` (else under the user's cache home), KEY naming the
    working tree's real path."""
    env = os.environ if env is None else env
    root = Path(env["LOOPRUN_CACHE_DIR"]) if env.get("LOOPRUN_CACHE_DIR") else cache_home(env)
    key = hashlib.sha256(os.fsencode(os.path.realpath(workdir))).hexdigest()[:24]
    return root / "seed" / key


def _names(directory: Path) -> set[str]:
    out: set[str] = set()
    for here, _dirs, files in os.walk(directory):
        rel = os.path.relpath(here, directory)
        out.update(os.path.join(rel, f) for f in files)
    return out


class SeededCache:
    """One stack cache directory of a run and the seed it starts from."""

    def __init__(self, cache: Path, seed: Path) -> None:
        self.cache = cache
        self.seed = seed
        self.fresh = not cache.exists()  # made by this run, not found from an earlier process
        self.checks = 0

    def before_check(self) -> None:
        """Called before each of the stack's checks: the first copies the seed in (a new
        cache only), the second saves the baseline's cache as the seed."""
        self.checks += 1
        if not self.fresh:
            return
        if self.checks == 1:
            if self.seed.is_dir() and not self.cache.exists():
                with contextlib.suppress(OSError):
                    shutil.copytree(self.seed, self.cache, symlinks=True)
        elif self.checks == 2 and self.cache.is_dir():
            self._save()

    def _save(self) -> None:
        """Replace the seed with the cache when the cache holds entries the seed lacks; the
        new seed is renamed into place whole, so a reader never sees half of one."""
        if self.seed.is_dir() and _names(self.cache) <= _names(self.seed):
            return
        tmp = self.seed.with_name(f".{self.seed.name}.{uuid.uuid4().hex}")
        old = tmp.with_name(tmp.name + ".old")
        try:
            self.seed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(self.cache, tmp, symlinks=True)
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.seed, old)
            os.rename(tmp, self.seed)
        except OSError:
            pass  # another run saved one first; a seed is an optimisation only
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
