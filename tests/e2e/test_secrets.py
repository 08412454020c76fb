"""Secrets from the environment never reach any file under .looprun/."""

from __future__ import annotations

from pathlib import Path

import yaml
from e2e_helpers import looprun, sample_copy

SECRET = "sk-test-4f9c2a7be1d04c55a8e3"


def test_secret_values_never_reach_the_run_files(tmp_path: Path) -> None:
    workdir = sample_copy("invoice", tmp_path)
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {
                    "text": f"my key is {SECRET}",
                    "tool_calls": [
                        {
                            "name": "write_file",
                            "arguments": {"path": "tests/notes.txt", "content": SECRET},
                        },
                        {"name": "read_file", "arguments": {"path": "tests/notes.txt"}},
                        {
                            "name": "run",
                            "arguments": {"command": f"python -m pytest -q -k {SECRET}"},
                        },
                    ],
                },
                {"text": f"done with {SECRET}"},
            ]
        )
    )
    proc = looprun(
        "bugfix",
        "--intent",
        f"the token {SECRET} leaks",
        "--workdir",
        str(workdir),
        "--model",
        f"script:{script}",
        "--max-iterations",
        "2",
        env={"PAYMENTS_API_KEY": SECRET},
    )
    assert proc.returncode == 3, proc.stderr
    files = [p for p in (workdir / ".looprun").rglob("*") if p.is_file()]
    assert any(p.name == "exchanges.jsonl" for p in files)
    assert len(files) > 8
    leaked = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaked == []
    assert "[REDACTED]" in (next(p for p in files if p.name == "exchanges.jsonl")).read_text()
    assert SECRET not in proc.stderr
    assert (workdir / "tests" / "notes.txt").read_text() == SECRET  # the work itself is the user's
