"""What a model (and the code it runs) says reaches the journal, the terminal and the next
request safely: invalid Unicode is recorded escaped and the run still ends with an
outcome; terminal control sequences never reach stderr raw; a secret a test prints is
redacted on stderr and in every request sent to the model; a refused huge write is
recorded by size and digest, not copied.

Each case is a real CLI run against the loopback HTTP provider (OpenAI wire format),
in a real repository with a real pytest check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import cli_env
from tests.support.fake_provider import Canned, FakeProvider, openai_reply
from tests.support.git_repos import git_repo

SECRET = "sk-canary-5e1f9a3b7c2d4e6f"
KEY = "sk-proj-test-0a1b2c3d4e5f6a7b"
TEMPLATE = """\
looprun: 1
name: t
plan: {mode: none}
act:
  prompt: "{{ intent }}"
  tools: [read_file, write_file, list_files, search]
  constraints: {paths: {allow: ["src/**"]}}
observe:
  tests:
    run: "python -m pytest -q -p no:cacheprovider --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
exit: [tests.ok]
refine:
  - else: {retry: "{{ tests.feedback }}"}
limits: {max_iterations: 2}
"""
TEST_FILE = """\
def test_token():
    token = open("token.txt").read().strip()
    print("\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;owned\\x07\\x9b2J\\x1bc")
    assert token == "expected", "\\x1b]0;title from a test\\x07 got " + token
"""
# Control sequences a terminal acts on: ESC, BEL, C1 controls, carriage return.
RAW_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as srv:
        yield srv


def _run(
    tmp_path: Path, server: FakeProvider, replies: Sequence[Canned], *, odd_file: bool = False
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], Path]:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "src" / "app.py").write_text("x = 1\n")
    (work / "tests" / "test_token.py").write_text(TEST_FILE)
    (work / "token.txt").write_text(SECRET + "\n")
    git_repo(work)
    if odd_file:  # a file name that is not valid UTF-8, untracked
        with open(os.fsencode(work / "src") + b"/bad\xff\xfe.py", "w") as fh:
            fh.write("y = 2\n")
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    server.push(*replies)
    server.responder = lambda request: openai_reply("nothing more to do")
    proc = subprocess.run(
        [sys.executable, "-m", "looprun", str(tmp_path / "t.yaml"), "--intent", "fix it",
         "--workdir", str(work), "--model", "openai:gpt-4o-mini",
         "--base-url", server.openai_url, "--json"],
        capture_output=True, text=True, timeout=180,
        env=cli_env({"OPENAI_API_KEY": KEY, "PAYMENTS_TOKEN": SECRET}),
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads(proc.stdout), work


def _journal(work: Path) -> list[dict[str, Any]]:
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    return [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]


def test_lone_surrogates_are_recorded_escaped_and_the_run_ends(
    tmp_path: Path, server: FakeProvider
) -> None:
    replies = [
        openai_reply(
            "I will write \ud800 now",
            tool_calls=[
                ("write_file", {"path": "src/a\ud800.py", "content": "x = '\udfff'\n"}),
                ("write_file", {"path": "src/b.py", "content": "ok = '\ud83d'\n"}),
                ("list_files", {"path": "src"}),
                ("search", {"pattern": "y = 2"}),
                ("read\ud800_file", {"path": "src/app.py"}),
            ],
        ),
        openai_reply("done \udc00"),
    ]
    proc, summary, work = _run(tmp_path, server, replies, odd_file=True)
    assert summary["outcome"] == "exhausted", (summary, proc.stderr)
    events = _journal(work)
    assert events[-1]["event"] == "run_finished"
    calls = [e for e in events if e["event"] == "tool_call"]
    assert calls[0]["arguments"]["path"] == "src/a\\ud800.py"
    assert "invalid Unicode" in calls[0]["result"] and calls[0]["is_error"]
    assert "invalid Unicode" in calls[1]["result"]
    assert "bad\\udcff\\udcfe.py" in calls[2]["result"], calls[2]
    assert "bad\\udcff\\udcfe.py:1: y = 2" in calls[3]["result"], calls[3]
    assert not (work / "src" / "b.py").exists()
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    exchanges = (run_dir / "exchanges.jsonl").read_text("utf-8")  # valid UTF-8 throughout
    replies = [json.loads(line)["reply"] for line in exchanges.splitlines()]
    assert replies[0]["content"] == "I will write \\ud800 now", replies
    for request in server.requests:
        request.body.decode("utf-8")  # every request the provider got is valid UTF-8


def test_terminal_control_sequences_never_reach_stderr(
    tmp_path: Path, server: FakeProvider
) -> None:
    osc52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
    replies = [
        openai_reply(
            f"{osc52}\x1b]0;title\x07 working",
            tool_calls=[
                (f"write\x1b[2J\x1b]0;t\x07_file{osc52}", {"path": "src/x.py", "content": "1"}),
                ("write_file", {"path": "README\x1b]52;c;eA==\x07\x9b1A\r.md", "content": "x"}),
            ],
        ),
        openai_reply(f"tried\x1b]0;x\x07 {osc52}"),
        openai_reply(f"refused\x1b]0;x\x07 {osc52}", refusal=f"no{osc52}\x1bc"),
    ]
    proc, summary, _ = _run(tmp_path, server, replies)
    assert summary["outcome"] == "escalated", (summary, proc.stderr)
    assert "the act model refused" in proc.stderr
    assert "tests: FAILED" in proc.stderr, proc.stderr
    assert "write_file" in proc.stderr or "refused" in proc.stderr
    found = sorted({repr(c) for c in RAW_CONTROLS.findall(proc.stderr)})
    assert found == [], f"raw control characters on stderr: {found}"
    assert "52;c;" not in proc.stderr
    assert not RAW_CONTROLS.search(proc.stdout.replace("\n", ""))


def test_a_secret_printed_by_a_test_never_reaches_stderr_or_the_model(
    tmp_path: Path, server: FakeProvider
) -> None:
    replies = [
        openai_reply("looking", tool_calls=[("read_file", {"path": "src/app.py"})]),
        openai_reply("tried"),
        openai_reply("again", tool_calls=[("write_file", {"path": "src/app.py", "content": "2"})]),
        openai_reply("tried again"),
    ]
    proc, summary, work = _run(tmp_path, server, replies)
    assert summary["outcome"] == "exhausted", (summary, proc.stderr)
    assert "tests: FAILED" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout, proc.stderr
    later = [r.body.decode("utf-8") for r in server.requests[2:]]
    assert later and any("got " in body for body in later), "the failure was fed back"
    leaked = [i for i, r in enumerate(server.requests) if SECRET.encode() in r.body]
    assert leaked == [], f"requests {leaked} carried the secret to the model"
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    for name in ("journal.jsonl", "exchanges.jsonl", "summary.json", "state.json"):
        assert SECRET not in (run_dir / name).read_text(), name


def test_a_refused_huge_write_is_recorded_by_size_and_digest(
    tmp_path: Path, server: FakeProvider
) -> None:
    huge = "A" * 12_000_000
    replies = [
        openai_reply(
            "writing", tool_calls=[("write_file", {"path": "src/big.py", "content": huge})]
        )
    ]
    proc, summary, work = _run(tmp_path, server, replies)
    assert summary["outcome"] == "exhausted", (summary, proc.stderr)
    (run_dir,) = (work / ".looprun" / "runs").iterdir()
    for name in ("journal.jsonl", "exchanges.jsonl"):
        size = (run_dir / name).stat().st_size
        assert size < 200_000, f"{name} holds {size} bytes"
    call = next(e for e in _journal(work) if e["event"] == "tool_call")
    assert call["is_error"] and "12000000" in call["result"].replace(",", "")
    content = call["arguments"]["content"]
    assert "12000000" in content.replace(",", "") and "sha256:" in content, content
    assert not (work / "src" / "big.py").exists()
