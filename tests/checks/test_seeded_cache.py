"""A stack's build cache seeded from the repository's own baseline: copied in when a run's
cache is new, saved back only as the baseline alone left it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from looprun.checks import seeded_cache
from looprun.checks.seeded_cache import SOURCES, SeededCache, copy_ahead, seed_home

BASE, CHANGED = "tree-of-the-base", "tree-after-a-turn"


def _check(
    cache: SeededCache, writes: dict[str, str], tree: str = BASE, quiet: bool = True
) -> None:
    """One check on ``tree``: the engine's call before it, what its build writes, the
    call after it."""
    cache.before_check(tree, quiet)
    cache.cache.mkdir(parents=True, exist_ok=True)
    for rel, text in writes.items():
        (cache.cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache.cache / rel).write_text(text)
    cache.after_check()


def _files(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): p.read_text()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_the_baseline_fills_the_seed_and_the_next_run_starts_from_it(tmp_path: Path) -> None:
    seed = tmp_path / "seed" / "go" / "GOCACHE"
    first = SeededCache(tmp_path / "run1" / "go-build", seed)
    _check(first, {"a1/std-testing-d": "compiled testing"})  # the baseline's tests
    _check(first, {"v1/std-vet-facts-d": "vet facts"})  # and its go vet
    assert not seed.exists()  # saved once the baseline is over, not before
    _check(first, {"b2/model-code-d": "what the model's code built"}, CHANGED)
    _check(first, {"c3/later-d": "later"}, CHANGED)
    both = {"a1/std-testing-d": "compiled testing", "v1/std-vet-facts-d": "vet facts"}
    assert _files(seed) == both

    second = SeededCache(tmp_path / "run2" / "go-build", seed)
    second.before_check(BASE, True)
    assert _files(second.cache) == both


def test_what_a_check_writes_after_the_baseline_never_reaches_the_seed(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    run = SeededCache(tmp_path / "run" / "go-build", seed)
    _check(run, {"a1/ok-d": "base"})
    _check(run, {"a1/ok-d": "poisoned by the model's test"}, CHANGED)  # a seeded entry
    _check(run, {"z9/new-d": "x"}, CHANGED)
    assert _files(seed) == {"a1/ok-d": "base"}


def test_a_command_between_checks_ends_the_baseline(tmp_path: Path) -> None:
    """The same tree checked again after another command ran (a model's command may
    write the checks' cache): not the baseline's check, its build is never saved."""
    seed = tmp_path / "seed"
    run = SeededCache(tmp_path / "run" / "go-build", seed)
    _check(run, {"a1/ok-d": "base"})
    _check(run, {"m1/planted-d": "x"}, BASE, quiet=False)
    _check(run, {}, CHANGED)
    assert _files(seed) == {"a1/ok-d": "base"}


def test_a_cache_written_after_the_baseline_is_not_saved(tmp_path: Path) -> None:
    """A command that writes the cache between the baseline and the next check (the
    sandbox lets commands write the checks' directory): no seed at all."""
    seed = tmp_path / "seed"
    run = SeededCache(tmp_path / "run" / "go-build", seed)
    _check(run, {"a1/ok-d": "base"})
    (run.cache / "a1" / "ok-d").write_text("planted")  # a seeded name, other bytes
    _check(run, {}, CHANGED, quiet=False)
    assert not seed.exists()


def test_a_resumed_run_neither_copies_nor_saves(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "s-d").write_text("seeded")
    cache = tmp_path / "run" / "go-build"
    cache.mkdir(parents=True)
    (cache / "m-d").write_text("built from the model's code before the crash")
    resumed = SeededCache(cache, seed)
    _check(resumed, {})
    _check(resumed, {}, CHANGED)
    assert _files(cache) == {"m-d": "built from the model's code before the crash"}
    assert _files(seed) == {"s-d": "seeded"}


def test_the_seed_keeps_what_the_baseline_used_or_built(tmp_path: Path) -> None:
    """Entries copied in are dated back; those go reads it dates anew (as it does any
    entry older than an hour), and those and the new ones are saved; an entry no baseline
    dated anew stays while the seed has held it for less than five days (go reads some by
    path without dating them: ``go vet``'s facts of a dependency), then goes, so dead
    entries (packages built from code that changed since) do not pile up in the seed."""
    seed = tmp_path / "seed"
    one = SeededCache(tmp_path / "r1" / "c", seed)
    _check(one, {"aa/std-d": "std", "bb/old-pkg-d": "built from code since changed"})
    _check(one, {}, CHANGED)
    assert set(_files(seed)) == {"aa/std-d", "bb/old-pkg-d"}
    before = seed.stat().st_ino
    six_days = time.time() - 6 * 24 * 3600
    os.utime(seed / "bb" / "old-pkg-d", (six_days, six_days))

    two = SeededCache(tmp_path / "r2" / "c", seed)
    two.before_check(BASE, True)
    aged = (two.cache / "aa" / "std-d").stat().st_mtime
    assert aged < time.time() - 3600  # dated back
    os.utime(two.cache / "aa" / "std-d")  # go reads it and dates it anew
    (two.cache / "cc").mkdir()
    (two.cache / "cc" / "new-pkg-d").write_text("built now")
    (two.cache / "dd").mkdir()
    (two.cache / "dd" / "facts-d").write_text("read by path, never dated anew")
    (two.cache / "trim.txt").write_text("1")  # the cache's own files stay
    two.after_check()
    _check(two, {}, CHANGED)
    assert _files(seed) == {
        "aa/std-d": "std",
        "cc/new-pkg-d": "built now",
        "dd/facts-d": "read by path, never dated anew",
        "trim.txt": "1",
    }
    assert seed.stat().st_ino != before

    three = SeededCache(tmp_path / "r3" / "c", seed)  # go dates only some: no new seed
    three.before_check(BASE, True)
    for rel in ("aa/std-d", "cc/new-pkg-d"):
        os.utime(three.cache / rel)
    three.after_check()
    kept = seed.stat().st_ino
    _check(three, {}, CHANGED)
    assert seed.stat().st_ino == kept
    assert "dd/facts-d" in _files(seed)


def test_held_out_tests_end_the_baseline(tmp_path: Path) -> None:
    """A check that copies held-out tests in is preceded by the save: what they build
    stays out of the seed."""
    seed = tmp_path / "seed"
    run = SeededCache(tmp_path / "run" / "go-build", seed)
    _check(run, {"a-d": "a"})
    run.end_baseline()
    _check(run, {"h-d": "held-out tests compiled"})
    assert _files(seed) == {"a-d": "a"}


def test_each_working_tree_has_a_seed_of_its_own(tmp_path: Path) -> None:
    env = {"LOOPRUN_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "one")
    one = seed_home(tmp_path / "one", env)
    assert one != seed_home(tmp_path / "two", env)
    assert one == seed_home(tmp_path / "link", env)  # the real path decides
    assert one.is_relative_to(tmp_path / "cache" / "seed")


def test_a_dated_seed_keeps_dates_and_is_saved_again_only_when_rebuilt(tmp_path: Path) -> None:
    """A cache its tool judges by dates (cargo's target directory) is copied both ways
    with its dates, kept whole, and saved with what its baseline was built from; a run
    whose baseline rebuilt nothing leaves the seed as it was."""
    seed = tmp_path / "seed"
    one = SeededCache(tmp_path / "r1" / "t", seed, dated=True)
    one.before_check(BASE, True)
    one.tree_written({"src/lib.rs": "blob-1"})
    _check(one, {"debug/lib.rlib": "built", "debug/.fingerprint/f": "fp"})
    _check(one, {}, CHANGED)
    assert set(_files(seed)) == {"debug/lib.rlib", "debug/.fingerprint/f", SOURCES}
    assert json.loads((seed / SOURCES).read_text()) == {"src/lib.rs": "blob-1"}
    dated = (seed / "debug" / "lib.rlib").stat().st_mtime_ns

    two = SeededCache(tmp_path / "r2" / "t", seed, dated=True)
    two.before_check(BASE, True)
    assert two.sources == {"src/lib.rs": "blob-1"}
    assert (two.cache / "debug" / "lib.rlib").stat().st_mtime_ns == dated
    assert not (two.cache / SOURCES).exists()
    two.tree_written({"src/lib.rs": "blob-1"})
    two.after_check()  # cargo found everything fresh: nothing written
    kept = seed.stat().st_ino
    _check(two, {}, CHANGED)
    assert seed.stat().st_ino == kept  # nothing to save

    three = SeededCache(tmp_path / "r3" / "t", seed, dated=True)
    three.before_check(BASE, True)
    three.tree_written({"src/lib.rs": "blob-2"})  # the base moved on: the crate rebuilt
    (three.cache / "debug" / "lib.rlib").write_text("BUILT")  # same size, a new date
    three.after_check()
    _check(three, {}, CHANGED)
    assert (seed / "debug" / "lib.rlib").read_text() == "BUILT"
    assert json.loads((seed / SOURCES).read_text()) == {"src/lib.rs": "blob-2"}


def test_a_dated_seed_from_the_future_is_not_used(tmp_path: Path) -> None:
    """An output dated after now (the clock went back since the save) would look newer
    than a source the model changes now, and that change would never be built."""
    seed = tmp_path / "seed"
    (seed / "debug").mkdir(parents=True)
    (seed / "debug" / "lib.rlib").write_text("built")
    (seed / SOURCES).write_text(json.dumps({"src/lib.rs": "blob"}))
    later = time.time() + 3600
    os.utime(seed / "debug" / "lib.rlib", (later, later))
    run = SeededCache(tmp_path / "run" / "t", seed, dated=True)
    run.before_check(BASE, True)
    assert not run.cache.exists() and run.sources == {}


def test_a_build_cannot_write_a_dated_seed_s_record(tmp_path: Path) -> None:
    """A file the baseline's build writes where the seed keeps its record of sources is
    left out: the record says what the engine wrote the check tree from, nothing else."""
    seed = tmp_path / "seed"
    one = SeededCache(tmp_path / "r1" / "t", seed, dated=True)
    one.before_check(BASE, True)
    one.tree_written({"src/lib.rs": "blob-1"})
    _check(one, {"debug/lib.rlib": "built"})
    _check(one, {}, CHANGED)
    recorded = (seed / SOURCES).stat().st_ino

    two = SeededCache(tmp_path / "r2" / "t", seed, dated=True)
    two.before_check(BASE, True)
    two.tree_written({"src/lib.rs": "blob-2"})
    # the record's size and date copied: it would pass for a file the seed already holds
    old = (seed / SOURCES).stat()
    planted = json.dumps({"src/lib.rs": "blob-from-the-build"})[: old.st_size]
    _check(two, {SOURCES: planted.ljust(old.st_size), "debug/lib.rlib": "BUILT"})
    os.utime(two.cache / SOURCES, ns=(old.st_atime_ns, old.st_mtime_ns))
    two.after_check()
    _check(two, {}, CHANGED)
    assert json.loads((seed / SOURCES).read_text()) == {"src/lib.rs": "blob-2"}
    assert (seed / SOURCES).stat().st_ino != recorded


def _saved_seed(tmp_path: Path, dated: bool = False) -> Path:
    """A seed as a run's baseline saves it."""
    seed = tmp_path / "seed"
    run = SeededCache(tmp_path / "r0" / "c", seed, dated=dated)
    run.before_check(BASE, True)
    if dated:
        run.tree_written({"src/lib.rs": "blob-1"})
    _check(run, {"a1/std-d": "std", "b2/vet-d": "facts"})
    _check(run, {}, CHANGED)
    return seed


def _copies(scratch: Path) -> list[Path]:
    return sorted(scratch.glob(".seed-*")) if scratch.is_dir() else []


def test_the_first_check_takes_the_copy_made_while_the_run_started(tmp_path: Path) -> None:
    seed, scratch = _saved_seed(tmp_path), tmp_path / "checks"
    copy_ahead(seed, False, scratch)
    ahead = seeded_cache._AHEAD[seed]
    ahead.thread.join()  # (the check would wait for it too)
    made_ino = ahead.into.stat().st_ino
    assert _copies(scratch) == [ahead.into]
    run = SeededCache(tmp_path / "r1" / "c", seed)
    run.before_check(BASE, True)
    assert run.cache.stat().st_ino == made_ino and not _copies(scratch)  # moved, not copied
    assert _files(run.cache) == _files(seed)
    assert run.copied_at is not None
    assert (run.cache / "a1" / "std-d").stat().st_mtime < time.time() - 3600  # dated back
    run.after_check()
    _check(run, {}, CHANGED)  # and the run goes on as with a copy of its own


def test_a_copy_made_before_the_seed_was_saved_again_is_not_taken(tmp_path: Path) -> None:
    seed, scratch = _saved_seed(tmp_path), tmp_path / "checks"
    copy_ahead(seed, False, scratch)
    other = SeededCache(tmp_path / "r9" / "c", seed)  # another run saves a new seed
    other.before_check(BASE, True)
    _check(other, {"c3/new-d": "new"})
    for rel in ("a1/std-d", "b2/vet-d"):
        os.utime(other.cache / rel)  # used
    other.after_check()
    _check(other, {}, CHANGED)
    assert "c3/new-d" in _files(seed)

    run = SeededCache(tmp_path / "r1" / "c", seed)
    run.before_check(BASE, True)
    assert _files(run.cache) == _files(seed)  # the seed as it is now
    assert not _copies(scratch)  # the stale copy is gone


def test_a_dated_seed_copied_ahead_keeps_its_dates_and_record(tmp_path: Path) -> None:
    seed, scratch = _saved_seed(tmp_path, dated=True), tmp_path / "checks"
    copy_ahead(seed, True, scratch)
    run = SeededCache(tmp_path / "r1" / "t", seed, dated=True)
    run.before_check(BASE, True)
    assert run.sources == {"src/lib.rs": "blob-1"}
    assert not (run.cache / SOURCES).exists()
    stamp = (seed / "a1" / "std-d").stat().st_mtime_ns
    assert (run.cache / "a1" / "std-d").stat().st_mtime_ns == stamp


def test_a_copy_no_check_took_is_gone_when_the_process_ends(tmp_path: Path) -> None:
    seed, scratch = _saved_seed(tmp_path), tmp_path / "checks"
    code = (
        "import sys; from pathlib import Path;"
        "from looprun.checks.seeded_cache import copy_ahead;"
        "copy_ahead(Path(sys.argv[1]), False, Path(sys.argv[2]))"
    )
    subprocess.run([sys.executable, "-c", code, str(seed), str(scratch)], check=True)
    assert scratch.is_dir() and not _copies(scratch)
