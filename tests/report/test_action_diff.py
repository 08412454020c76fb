"""The action's template review, run locally as the runner runs it: the step's script in
bash, a real pull-request event file, a real git repository with the base and the head,
and a loopback HTTP server standing in for the GitHub API (real requests, recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.report.test_action import REPO, Runner, _action
from tests.support.git_repos import git_repo

BUGFIX = (REPO / "templates" / "bugfix.yaml").read_text()
TOKEN = "ghs_loopbackTOKEN1234567890"
MARKER = "<!-- looprun-diff -->"


class FakeGitHub:
    """The issue-comments endpoints of the GitHub REST API, on 127.0.0.1."""

    def __init__(self, existing: list[dict[str, Any]]):
        self.comments = existing
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int, doc: Any) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _record(self) -> Any:
                size = int(self.headers.get("Content-Length") or 0)
                doc = json.loads(self.rfile.read(size)) if size else None
                outer.requests.append((self.command, self.path, dict(self.headers), doc))
                return doc

            def do_GET(self) -> None:
                self._record()
                self._answer(200, outer.comments)

            def do_POST(self) -> None:
                doc = self._record()
                outer.comments.append(
                    {"id": 900 + len(outer.comments), "body": doc["body"], "user": {"type": "Bot"}}
                )
                self._answer(201, outer.comments[-1])

            def do_PATCH(self) -> None:
                doc = self._record()
                self._answer(200, {"id": 1, "body": doc["body"]})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    # a person quoting the marker: never the comment the action edits
    api = FakeGitHub([{"id": 7, "body": MARKER + " quoted", "user": {"type": "User"}}])
    thread = threading.Thread(target=api.server.serve_forever, daemon=True)
    thread.start()
    yield api
    api.server.shutdown()
    api.server.server_close()


def _commit(repo: Path, message: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.org"}  # fmt: skip
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def _pull_request(tmp_path: Path, head_text: str) -> tuple[Path, str]:
    """A repository whose HEAD is a pull request's head over ``base``."""
    repo = tmp_path / "repo"
    (repo / "templates").mkdir(parents=True)
    (repo / "templates" / "team.yaml").write_text(BUGFIX)
    (repo / "README.md").write_text("x\n")
    git_repo(repo)
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    (repo / "templates" / "team.yaml").write_text(head_text)
    (repo / "README.md").write_text("y\n")
    _commit(repo, "head")
    return repo, base


def _runner(tmp_path: Path, api: FakeGitHub, base: str) -> Runner:
    runner = Runner(tmp_path)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42, "base": {"sha": base}}}))
    shim = tmp_path / "looprun"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m looprun "$@"\n')
    shim.chmod(0o755)
    runner.exported.update(
        {
            "LOOPRUN_BIN": str(shim),  # this checkout, as the install step would provide
            "PYTHONPATH": str(REPO / "engine"),
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": api.url,
            "GITHUB_REPOSITORY": "acme/loops",
        }
    )
    return runner


def _review_step() -> list[dict[str, Any]]:
    return [s for s in _action()["runs"]["steps"] if s.get("id") == "review"]


INPUTS = {"review-templates": "'templates/**/*.yaml'", "github-token": TOKEN}


def test_a_loosening_pull_request_gets_one_comment(tmp_path: Path, github: FakeGitHub) -> None:
    repo, base = _pull_request(
        tmp_path, BUGFIX.replace("max_diff_lines: 400", "max_diff_lines: 2000")
    )
    runner = _runner(tmp_path, github, base)
    code, outputs = runner.run(INPUTS, _review_step(), repo)
    assert code == 0, runner.last.stdout + runner.last.stderr
    assert outputs["template-diff"] == "changed"
    methods = [(m, p) for m, p, _, _ in github.requests]
    assert methods == [
        ("GET", "/repos/acme/loops/issues/42/comments?per_page=100"),
        ("POST", "/repos/acme/loops/issues/42/comments"),
    ]
    _, _, headers, doc = github.requests[1]
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert doc["body"].startswith(MARKER + "\n## looprun diff")
    assert "⚠️ Loosened (1)" in doc["body"] and "`400` → `2000`" in doc["body"]
    assert "Loosened (1)" in runner.summary.read_text()
    assert TOKEN not in runner.last.stdout + runner.last.stderr
    # the next push edits the same comment instead of adding another
    code, _ = runner.run(INPUTS, _review_step(), repo)
    assert code == 0, runner.last.stderr
    assert [(m, p) for m, p, _, _ in github.requests[2:]] == [
        ("GET", "/repos/acme/loops/issues/42/comments?per_page=100"),
        ("PATCH", "/repos/acme/loops/issues/comments/901"),
    ]


def test_nothing_is_posted_when_no_reviewed_template_changes(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo, base = _pull_request(tmp_path, "# only a comment\n" + BUGFIX)
    runner = _runner(tmp_path, github, base)
    code, outputs = runner.run(INPUTS, _review_step(), repo)
    assert code == 0, runner.last.stderr
    assert outputs["template-diff"] == "unchanged"
    assert [m for m, _, _, _ in github.requests] == ["GET"]  # looked for its comment only
    code, outputs = runner.run({**INPUTS, "review-templates": "loops/*.yaml"}, _review_step(), repo)
    assert code == 0 and outputs["template-diff"] == "none"


def test_an_invalid_template_fails_the_step_without_a_comment(
    tmp_path: Path, github: FakeGitHub
) -> None:
    repo, base = _pull_request(tmp_path, BUGFIX.replace("max_iterations: 12", "max_iterations: x"))
    runner = _runner(tmp_path, github, base)
    code, _ = runner.run(INPUTS, _review_step(), repo)
    assert code == 2
    assert "templates/team.yaml:" in runner.last.stderr
    assert github.requests == []
