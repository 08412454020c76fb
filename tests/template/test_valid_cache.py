"""`looprun validate` remembers files found valid: an unchanged file is not checked again,
and any change to what its validation read (the file, its parent, a fragment, a
sub-loop, a file that would now shadow a built-in, the engine) makes it checked in full.

Every run is a real `python -m looprun validate` process; whether a file was checked is
read from the modules that process loaded (a full check needs PyYAML and the schema).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looprun.template.valid_cache import default_dir, stamp

REPO = Path(__file__).resolve().parents[2]
_PROBE = (
    "import json, runpy, sys\n"
    "sys.argv = ['looprun', 'validate', *json.loads(sys.argv[1])]\n"
    "code = 0\n"
    "try:\n"
    "    runpy.run_module('looprun', run_name='__main__')\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "sys.__stderr__.write('CHECKED=%s\\n' % ('yaml' in sys.modules))\n"
    "sys.exit(code)\n"
)


def validate(
    cache: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str, bool]:
    """Exit code, stdout, and whether any file was checked in full (YAML was loaded)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {}), "LOOPRUN_CACHE_DIR": str(cache)},
        timeout=120,
    )
    checked = proc.stderr.strip().splitlines()[-1]
    assert checked in ("CHECKED=True", "CHECKED=False"), proc.stderr
    return proc.returncode, proc.stdout, checked == "CHECKED=True"


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """A team template extending a local parent (which extends the built-in bugfix),
    including a local fragment; and an outer loop whose tasks run a local sub-loop."""
    d = tmp_path / "loops"
    d.mkdir()
    (d / "parent.yaml").write_text(
        "looprun: 1\nname: parent\nextends: bugfix\nlimits:\n  max_iterations: 7\n"
    )
    (d / "frag.yaml").write_text("looprun: 1\ndescription: tighter\nlimits:\n  max_iterations: 5\n")
    (d / "team.yaml").write_text(
        "looprun: 1\nname: team\nextends: parent.yaml\ninclude: [frag.yaml]\n"
    )
    (d / "sub.yaml").write_text("looprun: 1\nname: sub\nextends: bugfix\n")
    feature = (REPO / "templates" / "feature.yaml").read_text()
    assert "  uses: bugfix\n" in feature
    (d / "outer.yaml").write_text(feature.replace("  uses: bugfix\n", "  uses: sub.yaml\n"))
    return d


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json"))


def test_an_unchanged_valid_file_is_not_checked_again(team: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = validate(cache, "team.yaml", "outer.yaml", cwd=team)
    assert first == (0, "team.yaml: OK\nouter.yaml: OK\n", True)
    assert len(_entries(cache)) == 2
    again = validate(cache, "team.yaml", "outer.yaml", cwd=team)
    assert again == (0, "team.yaml: OK\nouter.yaml: OK\n", False)
    # --no-cache checks in full even so
    assert validate(cache, "--no-cache", "team.yaml", cwd=team) == (0, "team.yaml: OK\n", True)


@pytest.mark.parametrize(
    ("ref", "changed", "new_text", "where"),
    [
        ("team.yaml", "team.yaml", "looprun: 1\nname: team\nextends: parent.yaml\n"
         "include: [frag.yaml]\nlimits:\n  max_iteration: 3\n", "team.yaml:6:3:"),
        ("team.yaml", "parent.yaml", "looprun: 1\nname: parent\nextends: bugfix\n"
         "limits:\n  max_iteration: 3\n", "parent.yaml:5:3:"),
        ("team.yaml", "frag.yaml", "looprun: 1\ndescription: tighter\nlimits:\n"
         "  max_iterationz: 5\n", "frag.yaml:4:3:"),
        ("outer.yaml", "sub.yaml", "looprun: 1\nname: sub\nextends: bugfix\n"
         "limits:\n  max_iterations: 0\n", "sub.yaml:5:19:"),
    ],
)  # fmt: skip
def test_a_change_to_any_file_read_is_checked_and_located(
    team: Path, tmp_path: Path, ref: str, changed: str, new_text: str, where: str
) -> None:
    cache = tmp_path / "cache"
    assert validate(cache, ref, cwd=team)[0] == 0
    assert validate(cache, ref, cwd=team)[2] is False  # remembered
    (team / changed).write_text(new_text)
    code, out, checked = validate(cache, ref, cwd=team)
    assert (code, checked) == (2, True)
    assert out.startswith(where), out
    # exactly what a full check prints, and the same again (problems are never remembered)
    assert validate(cache, "--no-cache", ref, cwd=team) == (2, out, True)
    assert validate(cache, ref, cwd=team) == (2, out, True)


def test_a_file_created_where_a_reference_looked_first_is_seen(team: Path, tmp_path: Path) -> None:
    """`extends: bugfix` names the built-in only while no file ./bugfix exists."""
    cache = tmp_path / "cache"
    assert validate(cache, "sub.yaml", cwd=team)[0] == 0
    assert validate(cache, "sub.yaml", cwd=team)[2] is False
    (team / "bugfix.yaml").write_text("not: [what, extends, names]\n")
    assert validate(cache, "sub.yaml", cwd=team) == (0, "sub.yaml: OK\n", False)
    (team / "bugfix").write_text("looprun: 1\nname: local\nlimits:\n  max_iterations: -1\n")
    code, out, checked = validate(cache, "sub.yaml", cwd=team)
    assert (code, checked) == (2, True)
    assert out.startswith("bugfix:4:19:"), out


def test_an_invalid_file_is_never_remembered(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = tmp_path / "bad.yaml"
    bad.write_text("looprun: 1\nname: bad\nextends: bugfix\nlimits:\n  max_iterations: 0\n")
    first = validate(cache, str(bad), cwd=tmp_path)
    assert first[0] == 2 and first[1].startswith(f"{bad}:5:19:"), first
    assert validate(cache, str(bad), cwd=tmp_path) == first
    assert _entries(cache) == []


@pytest.mark.parametrize(
    "corrupt",
    [
        b"",
        b'{"format": 1, "files": {',
        b"\x00\xff\xfe not json",
        b"[1, 2, 3]",
        b'{"format": 1, "stamp": 3, "ref": null, "files": [], "probes": "x"}',
    ],
)
def test_a_corrupt_entry_is_ignored_and_rewritten(
    team: Path, tmp_path: Path, corrupt: bytes
) -> None:
    cache = tmp_path / "cache"
    assert validate(cache, "team.yaml", cwd=team)[0] == 0
    [entry] = _entries(cache)
    entry.write_bytes(corrupt)
    assert validate(cache, "team.yaml", cwd=team) == (0, "team.yaml: OK\n", True)
    assert json.loads(entry.read_bytes())["format"] == 1  # whole again
    assert validate(cache, "team.yaml", cwd=team)[2] is False


def test_an_entry_of_another_engine_or_with_wrong_digests_is_not_trusted(
    team: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    assert validate(cache, "team.yaml", cwd=team)[0] == 0
    [entry] = _entries(cache)
    good = json.loads(entry.read_text())
    entry.write_text(json.dumps({**good, "stamp": "another looprun or schema"}))
    assert validate(cache, "team.yaml", cwd=team)[2] is True
    files = {path: "0" * 64 for path in good["files"]}
    entry.write_text(json.dumps({**good, "files": files}))
    assert validate(cache, "team.yaml", cwd=team)[2] is True
    assert validate(cache, "team.yaml", cwd=team)[2] is False


def test_the_engine_stamp_follows_the_schema_content_and_the_code(tmp_path: Path) -> None:
    from looprun.system.resources import schemas_dir

    package, schemas = tmp_path / "pkg", tmp_path / "schemas"
    shutil.copytree(REPO / "engine" / "looprun" / "template", package)
    shutil.copytree(schemas_dir(), schemas)
    before = stamp(package, schemas)
    assert stamp(package, schemas) == before
    schema = schemas / "template.schema.json"
    schema.write_text(schema.read_text().replace('"max_iterations"', '"max_iterations" ', 1))
    after_schema = stamp(package, schemas)
    assert after_schema != before
    code = package / "build" / "builder.py"  # a module in a subpackage counts too
    code.write_text(code.read_text() + "\n# changed\n")
    assert stamp(package, schemas) != after_schema


def test_the_cache_lives_under_the_user_cache_directory() -> None:
    assert default_dir({"HOME": "/home/a"}) == Path("/home/a/.cache/looprun/valid")
    assert default_dir({"HOME": "/home/a", "XDG_CACHE_HOME": "/c"}) == Path("/c/looprun/valid")
    assert default_dir({"XDG_CACHE_HOME": "/c", "LOOPRUN_CACHE_DIR": "/x"}) == Path("/x")


def test_a_template_using_a_plugin_parser_is_always_checked(tmp_path: Path) -> None:
    """Whether a plugin's parser exists depends on what is installed, not on any file the
    validation read: such a template is never remembered."""
    site = tmp_path / "site"
    info = site / "looprun_tap-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: looprun-tap\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[looprun.parsers]\ntap = looprun_tap:TapParser\n")
    plugin = os.pathsep.join([str(site), str(REPO / "samples" / "parser_plugin" / "src")])
    tapped = tmp_path / "tapped.yaml"
    tapped.write_text(
        "looprun: 1\nname: tapped\nextends: bugfix\n"
        "observe:\n  tap:\n    parser: tap\n    run: prove -v t/\n"
    )
    cache = tmp_path / "cache"
    ok = (0, "tapped.yaml: OK\n", True)
    assert validate(cache, "tapped.yaml", cwd=tmp_path, env={"PYTHONPATH": plugin}) == ok
    assert validate(cache, "tapped.yaml", cwd=tmp_path, env={"PYTHONPATH": plugin}) == ok
    assert _entries(cache) == []
    code, out, _ = validate(cache, "tapped.yaml", cwd=tmp_path)  # the plugin removed
    assert code == 2 and "unknown parser 'tap'" in out


_AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


def _one_entry(team: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A cache holding the clean verdict on team.yaml: the cache and its entry."""
    cache = tmp_path / "cache"
    assert validate(cache, "team.yaml", cwd=team)[0] == 0
    [entry] = _entries(cache)
    return cache, entry


@_AS_ROOT
@pytest.mark.parametrize("how", ["dir owned by nobody", "dir world-writable", "dir group-writable"])
def test_a_cache_directory_someone_else_can_write_is_neither_read_nor_written(
    team: Path, tmp_path: Path, how: str
) -> None:
    cache, entry = _one_entry(team, tmp_path)
    planted = entry.read_bytes()  # a valid-looking entry another user could have planted
    if how == "dir owned by nobody":
        os.chown(cache, _nobody(), -1)
    else:
        cache.chmod(0o777 if how == "dir world-writable" else 0o770)
    entry.unlink()
    assert validate(cache, "team.yaml", cwd=team) == (0, "team.yaml: OK\n", True)
    assert _entries(cache) == []  # nothing written into it either
    entry.write_bytes(planted)
    assert validate(cache, "team.yaml", cwd=team)[2] is True  # the planted entry is ignored


@_AS_ROOT
@pytest.mark.parametrize("how", ["owned by nobody", "world-writable", "a link"])
def test_an_entry_someone_else_could_have_written_is_not_trusted(
    team: Path, tmp_path: Path, how: str
) -> None:
    cache, entry = _one_entry(team, tmp_path)
    if how == "owned by nobody":
        os.chown(entry, _nobody(), -1)
    elif how == "world-writable":
        entry.chmod(0o666)
    else:
        target = tmp_path / "elsewhere.json"
        entry.rename(target)
        entry.symlink_to(target)
    assert validate(cache, "team.yaml", cwd=team) == (0, "team.yaml: OK\n", True)
    # the check's own verdict replaced it with a private entry, trusted again next time
    assert not entry.is_symlink() and entry.stat().st_uid == os.geteuid()
    assert validate(cache, "team.yaml", cwd=team)[2] is False
