"""A stack's build cache that starts warm: copied from a seed the run's baseline filled.

Each run's checks build in a cache of their own, so nothing a model's code wrote into one
is ever read by a later check. For a cache whose entries are keyed by their inputs (Go's
build cache: an action id is the hash of everything that went into it) a copy of one that
only the base's own build wrote is as good as a warm one, and spares every run a cold
compile of the standard library's test dependencies (and ``go vet``'s analysis of them).

The seed belongs to one working tree (keyed by its real path), so no repository's checks
fill another's. It is written only by the engine, never by a check: a run copies it in
when its cache is new (the copy is started in a thread as the run starts, while its
template loads, and the first check takes it if the seed has not been saved again
since), and saves the cache as it stood after the baseline's last check. A check
belongs to the baseline while it runs on the tree the first check ran on and no
command but the stack's checks has started since (a model's command may write the
checks' caches). The cache is fingerprinted after each such check and saved only when it
still matches that fingerprint before and after the copy (every file's inode and ctime:
no command can set a ctime back), at the start of the first check that is not the
baseline's: so the seed holds everything the baseline built (its ``go vet`` too), and
nothing a check of the model's code or a model's command wrote. A resumed run, whose
cache already holds what checks of the model's code built, never saves.

The seed holds what the last baseline used or built, and what it has held for less than
five days, so it does not grow without end (a module's own packages are keyed by the
directory they are built in: the check tree's, the same in every run of a working tree,
so they are found again until their code changes): the entries copied in are dated two
hours back, go dates each entry it reads that is older than an hour anew, and the save
leaves out the ones still dated back that the seed has held longer (go reads some
entries by path without dating them, ``go vet``'s facts of a dependency among them:
dropped at once, they would be made again every other run). A run that used and built
nothing else saves nothing. The saved entries the old seed already held with the same
size are hard links to it (no command writes a seed: the sandbox keeps it read-only),
the rest are copied.

A cache whose tool judges freshness by dates (cargo: an output newer than every source it
was built from is fresh, and its fingerprints name paths relative to the package and the
target directory, so a copy elsewhere stays valid) is seeded ``dated``: copied both ways
with its files' dates, kept whole, and saved with the files its baseline was built from
(path and blob, ``SOURCES``). A run's check tree gives each file it first writes with the
same path and blob as one of those a fixed date far back (``SOURCE_DATE``), so the seed's
outputs are fresh for exactly the files whose content they were built from; every other
file is written now, newer than any output, and what depends on it is built again. Its
saved files the old seed held with the same size and date are hard links to it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from looprun.system.cache_home import engine_cache, workdir_key

# relative path -> (inode, ctime, size) of every entry below a cache directory
Fingerprint = dict[str, tuple[int, int, int]]
# relative path -> (size, mtime) of the regular files a dated seed compares
Dates = dict[str, tuple[int, int]]

# how far back the entries copied in are dated: go marks an entry it reads anew once its
# date is an hour old (its cache's mtime interval), so the save tells the used ones apart
_AGED_S = 2 * 3600
_USED_S = 3600
# how long a seed keeps an entry no baseline was seen to use (go's own cache trims an
# entry unused for five days)
_KEPT_S = 5 * 24 * 3600
# a dated seed's record of the files its outputs were built from: {path: blob}
SOURCES = ".looprun-sources.json"
# the date a check tree gives a file the seed was built from (2000-01-01, UTC): older
# than any output a build ever wrote
SOURCE_DATE = 946684800


def seed_home(workdir: Path, env: Mapping[str, str] | None = None) -> Path:
    """``$LOOPRUN_CACHE_DIR/seed/KEY`` (else under the user's cache home), KEY naming the
    working tree's real path."""
    return engine_cache(env) / "seed" / workdir_key(workdir)


def _names(directory: Path) -> set[str]:
    out: set[str] = set()
    for here, _dirs, files in os.walk(directory):
        rel = os.path.relpath(here, directory)
        out.update(os.path.normpath(os.path.join(rel, f)) for f in files)
    return out


def _copy_in(seed: Path, cache: Path, dated: bool) -> None:
    """Copy the seed's regular files to ``cache`` (made new): each dated ``_AGED_S`` back,
    or, ``dated``, with its own date (and without the record of sources). A dated file
    from the future (the clock went back since) fails the copy: a source written now would
    look older than it, and its change would never be built."""
    now = time.time()
    aged = now - _AGED_S
    cache.parent.mkdir(parents=True, exist_ok=True)
    for here, dirs, files in os.walk(seed):
        rel = os.path.relpath(here, seed)
        os.mkdir(os.path.normpath(os.path.join(cache, rel)), 0o755)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
        for name in files:
            src, dst = os.path.join(here, name), os.path.join(cache, rel, name)
            if not os.path.isfile(src) or os.path.islink(src):
                continue
            if dated:
                if rel != "." or name != SOURCES:
                    shutil.copy2(src, dst)
                    if os.stat(dst).st_mtime > now:
                        raise OSError(f"{src} is dated in the future")
            else:
                shutil.copyfile(src, dst)
                os.utime(dst, (aged, aged))


def _held_since(path: Path, since: float) -> bool:
    """Whether the seed holds ``path`` as a copy made after ``since`` (a saved file the
    old seed held is a link to it, so its date is when the seed first held it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_mtime > since


def _sources(seed: Path) -> dict[str, str]:
    """A dated seed's record of the files it was built from (empty when unreadable)."""
    try:
        data = json.loads((seed / SOURCES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _dates(directory: Path, names: list[str]) -> Dates:
    """(size, mtime) of each of ``names`` below ``directory`` that is a regular file."""
    out = {}
    for rel in names:
        with contextlib.suppress(OSError):
            st = os.lstat(directory / rel)
            if stat.S_ISREG(st.st_mode):
                out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def _fingerprint(directory: Path) -> Fingerprint:
    """Every file, link and directory below ``directory`` (links not followed)."""
    return _scan(directory)[0]


def _scan(directory: Path) -> tuple[Fingerprint, dict[str, os.stat_result]]:
    """:func:`_fingerprint`, and the stat of each regular file by its normalized path
    (one walk for a save that has both to read)."""
    out: Fingerprint = {}
    files: dict[str, os.stat_result] = {}
    for here, dirs, names in os.walk(directory):
        rel = os.path.relpath(here, directory)
        for name in (*dirs, *names):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(here, name))
                out[os.path.join(rel, name)] = (st.st_ino, st.st_ctime_ns, st.st_size)
                if stat.S_ISREG(st.st_mode):
                    files[os.path.normpath(os.path.join(rel, name))] = st
    return out, files


def _ino(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


class _Ahead:
    """A copy of one seed made in a thread while the run starts (:func:`copy_ahead`)."""

    def __init__(self, seed: Path, dated: bool, into: Path) -> None:
        self.seed, self.dated, self.into = seed, dated, into
        self.ino = _ino(seed)  # a seed saved again since is another seed: not this copy
        self.copied_at = time.time() - _AGED_S
        self.ok = False
        self.thread = threading.Thread(target=self._copy, name="looprun-seed", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        try:
            _copy_in(self.seed, self.into, self.dated)
            self.ok = self.ino is not None and _ino(self.seed) == self.ino
        except OSError:
            self.ok = False

    def discard(self) -> None:
        self.thread.join(timeout=30)
        shutil.rmtree(self.into, ignore_errors=True)


_AHEAD: dict[Path, _Ahead] = {}
_AHEAD_LOCK = threading.Lock()


def copy_ahead(seed: Path, dated: bool, scratch: Path) -> None:
    """Start copying ``seed`` (as a run's first check would, dated alike) into a new
    directory under ``scratch``, in a thread, for that check to take: a seed is hundreds of
    files, and creating them overlaps the loading of the template and the run's setup
    instead of coming before the first check. ``scratch`` must be on the file system of
    the runs' caches and writable by no command (the copy is the engine's until taken);
    a copy not taken is removed when the process exits."""
    if not seed.is_dir():
        return
    with _AHEAD_LOCK:
        if seed in _AHEAD:
            return
        ahead = _AHEAD[seed] = _Ahead(seed, dated, scratch / f".seed-{uuid.uuid4().hex}")
    atexit.register(ahead.discard)


def _take(seed: Path, cache: Path, dated: bool) -> float | None:
    """The copy of ``seed`` made ahead, moved to ``cache``: the date its entries were given
    (None: there is none, or it is not a whole copy of the seed as it is now)."""
    with _AHEAD_LOCK:
        ahead = _AHEAD.pop(seed, None)
    if ahead is None:
        return None
    ahead.thread.join()
    if not (ahead.ok and ahead.dated == dated and _ino(seed) == ahead.ino):
        ahead.discard()
        return None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        os.rename(ahead.into, cache)
    except OSError:
        ahead.discard()
        return None
    return ahead.copied_at


class SeededCache:
    """One stack cache directory of a run and the seed it starts from."""

    def __init__(self, cache: Path, seed: Path, *, dated: bool = False) -> None:
        self.cache = cache
        self.seed = seed
        self.dated = dated  # its tool judges freshness by dates (see the module's doc)
        # dated: the files the copied-in seed was built from, path -> blob
        self.sources: dict[str, str] = {}
        self.built_from: dict[str, str] | None = None  # dated: what the baseline built from
        self.fresh = not cache.exists()  # made by this run, not found from an earlier process
        self.checks = 0
        self.tree: str | None = None  # what the first check ran on
        self.baseline = self.fresh  # only the baseline's checks have built in it so far
        self.built: Fingerprint | None = None  # the cache after the baseline's last check
        self.copied_at: float | None = None  # the date the entries copied in were given

    def before_check(self, tree: str, quiet: bool) -> None:
        """Called before each of the stack's checks, with the tree it runs on and whether
        no other command started since the last check: the first copies the seed in (a
        new cache only), the first that is not the baseline's saves the seed."""
        self.checks += 1
        if not self.fresh:
            return
        if self.checks == 1:
            self.tree = tree
            if self.seed.is_dir() and not self.cache.exists():
                try:
                    copied_at = _take(self.seed, self.cache, self.dated)
                    if copied_at is None:
                        copied_at = time.time() - _AGED_S
                        _copy_in(self.seed, self.cache, self.dated)
                    if self.dated:
                        self.sources = _sources(self.seed)
                    else:
                        self.copied_at = copied_at
                except OSError:
                    shutil.rmtree(self.cache, ignore_errors=True)  # starts cold
                    self.sources = {}
        elif tree != self.tree or not quiet:
            self.end_baseline()

    @property
    def wants_tree(self) -> bool:
        """Whether ``tree_written`` is owed: a dated cache's first check is about to run."""
        return self.dated and self.checks == 1 and self.built_from is None

    def tree_written(self, files: Mapping[str, str]) -> None:
        """The check tree's files (path -> blob) as the first check runs on them: what a
        dated seed saved from this baseline was built from."""
        if self.wants_tree:
            self.built_from = dict(files)

    def end_baseline(self) -> None:
        """No later check is the baseline's: the seed is saved now if ever (before a check
        whose tests are not the repository's own: held-out tests stay out of the seed)."""
        if self.fresh and self.baseline and self.checks:
            self.baseline = False
            self._save()

    def after_check(self) -> None:
        """Called once a check ended: a baseline check's cache is fingerprinted."""
        if self.baseline and self.cache.is_dir():
            self.built = _fingerprint(self.cache)

    def _holds(self, kept: list[str], old: Dates, new: Dates) -> bool:
        """Whether the seed already holds what a save would write: the same files (and,
        dated, with the same sizes and dates ``old`` and ``new``, built from the same
        files)."""
        if not self.seed.is_dir():
            return False
        if not self.dated:
            return set(kept) == _names(self.seed)
        return (
            set(kept) == _names(self.seed) - {SOURCES}
            and old == new
            and _sources(self.seed) == (self.built_from or {})
        )

    def _kept(self, files: dict[str, os.stat_result]) -> list[str]:
        """Of the cache's regular ``files`` (path -> stat), those the baseline used or
        built (all of them when nothing was copied in), and those the seed has held for
        less than ``_KEPT_S`` (go does not date anew every file it reads: ``go vet`` reads
        the facts of a dependency's analysis by path, so a rule of "used" alone would drop
        them every other run and have them made again the next); a file outside go's
        entry directories (trim.txt, README) always. Never a file where a dated seed keeps
        its record: that record is the engine's alone."""
        out = []
        recent = time.time() - _KEPT_S
        for rel, st in files.items():
            top = os.sep not in rel
            if self.dated and rel == SOURCES:
                continue
            used = self.copied_at is None or st.st_mtime > self.copied_at + _USED_S
            if used or top or _held_since(self.seed / rel, recent):
                out.append(rel)
        return out

    def _save(self) -> None:
        """Replace the seed with what the baseline used or built, when that is not what the
        seed holds and the cache is still as the baseline left it; the new seed is renamed
        into place whole, so a reader never sees half of one."""
        built = self.built
        if built is None or not self.cache.is_dir():
            return
        tmp = self.seed.with_name(f".{self.seed.name}.{uuid.uuid4().hex}")
        old = tmp.with_name(tmp.name + ".old")
        try:
            now, files = _scan(self.cache)
            if now != built:
                return  # something wrote in it after the baseline: not the base's build
            kept = self._kept(files)
            old_dates = _dates(self.seed, kept) if self.dated else {}
            new_dates = _dates(self.cache, kept) if self.dated else {}
            if self._holds(kept, old_dates, new_dates):
                return
            for rel in kept:
                dst, src = tmp / rel, self.cache / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                before = self.seed / rel
                if self.dated:
                    if rel in old_dates and old_dates[rel] == new_dates.get(rel):
                        os.link(before, dst)
                    else:
                        shutil.copy2(src, dst)
                elif before.is_file() and before.stat().st_size == src.stat().st_size:
                    os.link(before, dst)
                else:
                    shutil.copyfile(src, dst)
            if self.dated:
                record = json.dumps(self.built_from or {}, sort_keys=True)
                (tmp / SOURCES).write_text(record, encoding="utf-8")
            if _fingerprint(self.cache) != built:
                return  # changed while it was copied
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.seed, old)
            os.rename(tmp, self.seed)
        except OSError:
            pass  # another run saved one first; a seed is an optimisation only
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
