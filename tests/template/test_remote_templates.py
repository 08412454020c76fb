"""Remote templates (``extends: git+URL@REF#PATH``) through the real CLI, against real
git servers on this machine: bare repositories over ``file://`` and over HTTP
(``git http-backend`` as CGI behind a loopback server), pinned by ``looprun.lock``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.cli import looprun
from tests.support.git_repos import git

BASE = "looprun: 1\nname: platform-bugfix\nextends: bugfix\ninclude: [limits.yaml]\n"
LIMITS = "limits:\n  max_iterations: 7\n"


class Platform:
    """The platform team's templates repository and the bare repository it pushes to."""

    def __init__(self, root: Path):
        self.work = root / "platform"
        self.bare = root / "served" / "platform.git"
        self.work.mkdir()
        git("init", "-q", "-b", "main", cwd=self.work)
        self.commit({"base.yaml": BASE, "limits.yaml": LIMITS}, tag="v1")
        self.bare.parent.mkdir()
        git("clone", "-q", "--bare", str(self.work), str(self.bare), cwd=root)

    def commit(self, files: dict[str, str], tag: str | None = None) -> str:
        for name, text in files.items():
            (self.work / name).write_text(text)
        git("add", ".", cwd=self.work)
        git("commit", "-q", "-m", "change", cwd=self.work)
        if tag:
            git("tag", "-f", tag, cwd=self.work)
        if self.bare.exists():
            git("push", "-q", "--force", str(self.bare), "main", "--tags", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)


class Team:
    """A product team's repository whose template extends the platform's by reference."""

    def __init__(self, root: Path, reference: str):
        self.dir = root / "team"
        (self.dir / "templates").mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=self.dir)
        self.template = self.dir / "templates" / "team.yaml"
        self.template.write_text(f"looprun: 1\nname: team-bugfix\nextends: {reference}\n")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return looprun(*args, cwd=self.dir)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(where))
    return where


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    return Platform(tmp_path)


class _GitCGI(BaseHTTPRequestHandler):
    """``git http-backend`` behind a loopback server: the smart HTTP protocol, for real."""

    project_root = ""

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": self.project_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server(platform: Platform) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    handler = type("Handler", (_GitCGI,), {"project_root": str(platform.bare.parent)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/platform.git", server
    finally:
        server.shutdown()
        server.server_close()


def file_ref(platform: Platform, ref: str = "v1", path: str = "base.yaml") -> str:
    return f"git+{platform.bare.as_uri()}@{ref}#{path}"


def test_unpinned_reference_is_a_located_error_until_locked(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, file_ref(platform))
    before = team.cli("validate", "templates/team.yaml")
    assert before.returncode == 2
    assert "templates/team.yaml:3:10: extends:" in before.stdout
    assert "no looprun.lock" in before.stdout
    locked = team.cli("lock", "templates/team.yaml")
    assert locked.returncode == 0, locked.stderr
    lock = json.loads((team.dir / "looprun.lock").read_text())
    entry = lock["references"][f"git+{platform.bare.as_uri()}@v1"]
    assert entry["kind"] == "tag"
    assert entry["commit"] == git("rev-parse", "v1^{commit}", cwd=platform.work)
    assert sorted(entry["files"]) == ["base.yaml", "limits.yaml"]  # the nested include too
    assert lock["templates"] == ["templates/team.yaml"]
    ok = team.cli("validate", "templates/team.yaml")
    assert ok.returncode == 0, ok.stdout
    assert f"base.yaml from git+{platform.bare.as_uri()}@v1 at {entry['commit']}" in ok.stdout
    explained = team.cli("explain", "templates/team.yaml", "--format", "json")
    assert json.loads(explained.stdout)["limits"]["max_iterations"] == 7


def test_moved_tag_is_an_error_until_refreshed(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, file_ref(platform))
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    old = (team.dir / "looprun.lock").read_text()
    new = platform.commit({"limits.yaml": "limits:\n  max_iterations: 99\n"}, tag="v1")
    relock = team.cli("lock")  # fetches: the force-pushed tag is seen, never taken
    assert relock.returncode == 2
    assert "templates/team.yaml:3:10" in relock.stderr and "the tag moved" in relock.stderr
    assert (team.dir / "looprun.lock").read_text() == old  # nothing written
    run_check = team.cli("validate", "templates/team.yaml")
    assert run_check.returncode == 2 and "the tag moved" in run_check.stdout
    ref_key = f"git+{platform.bare.as_uri()}@v1"
    accepted = team.cli("lock", "--refresh", ref_key)
    assert accepted.returncode == 0, accepted.stderr
    assert f"moved {ref_key} at {new[:12]}" in accepted.stdout
    explained = team.cli("explain", "templates/team.yaml", "--format", "json")
    assert json.loads(explained.stdout)["limits"]["max_iterations"] == 99


def test_cached_content_that_differs_from_the_lock_is_refused(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, file_ref(platform))
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    lock_path = team.dir / "looprun.lock"
    lock = json.loads(lock_path.read_text())
    (entry,) = lock["references"].values()
    entry["files"]["limits.yaml"] = "sha256:" + "0" * 64
    lock_path.write_text(json.dumps(lock))
    bad = team.cli("validate", "templates/team.yaml")
    assert bad.returncode == 2
    assert "limits.yaml: the cached content differs from the lock" in bad.stdout
    assert "Traceback" not in bad.stdout + bad.stderr


def test_lock_out_of_date_and_missing_reference_and_path(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, file_ref(platform))
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    team.template.write_text(
        f"looprun: 1\nname: team-bugfix\nextends: {file_ref(platform, ref='main')}\n"
    )
    stale = team.cli("validate", "templates/team.yaml")
    assert stale.returncode == 2
    assert "templates/team.yaml:3:10" in stale.stdout and "the lock is out of date" in stale.stdout
    team.template.write_text(
        f"looprun: 1\nname: team-bugfix\nextends: {file_ref(platform, ref='v9')}\n"
    )
    missing = team.cli("lock", "templates/team.yaml")
    assert missing.returncode == 2
    assert (
        "templates/team.yaml:3:10" in missing.stderr
        and "no tag, branch or commit 'v9'" in missing.stderr
    )
    team.template.write_text(
        f"looprun: 1\nname: team-bugfix\nextends: {file_ref(platform, path='nope.yaml')}\n"
    )
    no_file = team.cli("lock", "templates/team.yaml")
    assert no_file.returncode == 2 and "nope.yaml: no such file" in no_file.stderr


def test_error_inside_remote_content_names_the_reference_and_line(
    tmp_path: Path, platform: Platform
):
    platform.commit({"limits.yaml": "limits:\n  max_iterations: nope\n"}, tag="v2")
    team = Team(tmp_path, file_ref(platform, ref="v2"))
    out = team.cli("lock", "templates/team.yaml")
    assert out.returncode == 2
    assert f"git+{platform.bare.as_uri()}@v2#limits.yaml:2:19: limits.max_iterations" in out.stderr
    assert not (team.dir / "looprun.lock").exists()


def test_remote_path_may_not_leave_its_repository(tmp_path: Path, platform: Platform):
    platform.commit({"base.yaml": BASE.replace("limits.yaml", "../../etc/passwd")}, tag="v3")
    team = Team(tmp_path, file_ref(platform, ref="v3"))
    out = team.cli("lock", "templates/team.yaml")
    assert out.returncode == 2 and "must be a file inside the repository" in out.stderr


def test_over_http_then_offline_from_the_cache(
    tmp_path: Path, http_server: tuple[str, ThreadingHTTPServer]
):
    url, server = http_server
    team = Team(tmp_path, f"git+{url}@v1#base.yaml")
    locked = team.cli("lock", "templates/team.yaml")
    assert locked.returncode == 0, locked.stderr
    server.shutdown()
    server.server_close()  # the server is gone: the cache serves what the lock pins
    offline = team.cli("validate", "templates/team.yaml")
    assert offline.returncode == 0, offline.stdout
    explained = team.cli("explain", "templates/team.yaml")
    assert explained.returncode == 0 and f"git+{url}@v1" in explained.stdout
    refetch = team.cli("lock")  # making a lock needs the server
    assert refetch.returncode == 2 and "cannot fetch" in refetch.stderr


def test_subloop_uses_a_remote_template(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, "bugfix")
    team.template.write_text(
        f"looprun: 1\nname: outer\nextends: feature\neach_task:\n  uses: {file_ref(platform)}\n"
    )
    out = team.cli("validate", "templates/team.yaml")
    assert out.returncode == 2 and "templates/team.yaml:5:9" in out.stdout


def test_update_moves_a_tag_to_the_newest_and_rewrites_only_the_reference(
    tmp_path: Path, platform: Platform
):
    team = Team(tmp_path, file_ref(platform))
    original = team.template.read_text() + "# keep this comment\n"
    team.template.write_text(original)
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    new = platform.commit({"limits.yaml": "limits:\n  max_iterations: 12\n"}, tag="v1.10")
    platform.commit({"limits.yaml": "limits:\n  max_iterations: 3\n"}, tag="v1.9")
    out = team.cli("update")
    assert out.returncode == 0, out.stderr
    key = f"git+{platform.bare.as_uri()}@v1"
    assert f"{key} (" in out.stdout and f"-> {key}.10 ({new[:12]})" in out.stdout
    assert team.template.read_text() == original.replace("@v1#", "@v1.10#")
    lock = json.loads((team.dir / "looprun.lock").read_text())
    assert list(lock["references"]) == [f"{key}.10"]
    assert team.cli("validate", "templates/team.yaml").returncode == 0
    again = team.cli("update")
    assert "already up to date" in again.stdout


def test_bundled_sample_team_template_extends_the_pinned_platform_template(tmp_path: Path):
    script = Path(__file__).resolve().parents[2] / "samples" / "shared_templates" / "build.py"
    built = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "shared")],
        capture_output=True,
        text=True,
        check=True,
    )
    template = Path(built.stdout.strip())
    team = template.parents[1]
    assert looprun("lock", "templates/payments-bugfix.yaml", cwd=team).returncode == 0
    ok = looprun("validate", "templates", cwd=team)
    assert ok.returncode == 0, ok.stdout
    assert "bugfix.yaml from git+file://" in ok.stdout
    shown = looprun("explain", "templates/payments-bugfix.yaml", "--format", "json", cwd=team)
    composed = json.loads(shown.stdout)
    assert composed["limits"]["max_iterations"] == 8  # the platform's limit
    assert composed["act"]["constraints"]["paths"]["allow"] == [
        "payments/**",
        "tests/**",
    ]  # the team's own


def test_subloop_template_pinned_in_the_lock(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, "bugfix")
    team.template.write_text(
        f"looprun: 1\nname: outer\nextends: feature\neach_task:\n  uses: {file_ref(platform)}\n"
    )
    locked = team.cli("lock", "templates/team.yaml")
    assert locked.returncode == 0, locked.stderr
    ok = team.cli("validate", "templates/team.yaml")
    assert ok.returncode == 0, ok.stdout
    assert "base.yaml from git+" in ok.stdout


def test_nested_reference_into_another_repository_is_pinned_and_never_rewritten(
    tmp_path: Path, platform: Platform
):
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    (other / "obs.yaml").write_text("limits:\n  max_iterations: 5\n")
    git("add", ".", cwd=other)
    git("commit", "-q", "-m", "o", cwd=other)
    git("tag", "o1", cwd=other)
    nested = f"git+{other.as_uri()}@o1#obs.yaml"
    platform.commit({"base.yaml": BASE.replace("[limits.yaml]", f"[{nested}]")}, tag="v4")
    team = Team(tmp_path, file_ref(platform, ref="v4"))
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    lock = json.loads((team.dir / "looprun.lock").read_text())
    assert f"git+{other.as_uri()}@o1" in lock["references"]
    git("tag", "o2", cwd=other)
    out = team.cli("update")
    assert out.returncode == 0, out.stderr
    assert "written inside a remote template" in out.stdout
    composed = json.loads(team.cli("explain", "templates/team.yaml", "--format", "json").stdout)
    assert composed["limits"]["max_iterations"] == 5


def test_run_refuses_a_moved_tag_before_anything_runs(tmp_path: Path, platform: Platform):
    team = Team(tmp_path, file_ref(platform))
    assert team.cli("lock", "templates/team.yaml").returncode == 0
    platform.commit({"limits.yaml": "limits:\n  max_iterations: 50\n"}, tag="v1")
    assert team.cli("lock").returncode == 2  # the cache now knows the tag moved
    script = tmp_path / "script.yaml"
    script.write_text("turns: []\n")
    run = team.cli(
        "run", "templates/team.yaml", "--intent", "fix it", "--model", f"script:{script}"
    )
    assert run.returncode == 2
    assert "templates/team.yaml:3:10" in run.stderr and "the tag moved" in run.stderr
    assert not (team.dir / ".looprun").exists()  # no run was started
