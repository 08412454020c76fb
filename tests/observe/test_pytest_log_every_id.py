"""A 10 MB ``pytest -v`` log from a real run, 60 tests failing each at its own line: the
regex pytest preset's feedback names every failing id within 4 KB, as the JUnit path does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

FAILING = 60


def _suite(root: Path) -> None:
    """60 failing tests with distinct causes and enough captured output for ~10 MB."""
    (root / "tests").mkdir()
    (root / "calc.py").write_text("def double(n):\n    return n * 2 + 1\n", encoding="utf-8")
    body = [
        "from calc import double\n\n",
        "NOISE = 'captured debug output of a long test, with some values 0123456789\\n' * 2500\n",
    ]
    for n in range(FAILING):
        body.append(
            f"\n\ndef test_value_{n}_is_doubled():\n    print(NOISE)\n"
            f"    assert double({n}) == {n * 2}, 'value {n}'\n"
        )
    for n in range(200):
        body.append(f"\n\ndef test_passes_{n}():\n    assert double({n}) % 2 == 1\n")
    (root / "tests" / "test_values.py").write_text("".join(body), encoding="utf-8")
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")


def test_every_failing_id_of_a_10mb_log_fits_in_4kb(tmp_path: Path) -> None:
    _suite(tmp_path)
    log = tmp_path / "pytest.log"
    with log.open("w", encoding="utf-8") as out:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
    assert run.returncode == 1
    assert log.stat().st_size > 9_000_000
    text = log.read_text(encoding="utf-8")
    ids = re.findall(r"^FAILED (tests/test_values\.py::\S+)", text, flags=re.M)
    assert len(ids) == FAILING
    observed = subprocess.run(
        [
            *(sys.executable, "-m", "looprun", "observe", "regex", "pytest.log"),
            *("-o", "preset=pytest", "--workdir", "."),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert observed.returncode == 1, observed.stderr
    obs = json.loads(observed.stdout)
    feedback = obs["feedback"]
    assert obs["failed"] == FAILING and sorted(obs["failing"]) == sorted(ids)
    assert len(feedback.encode("utf-8")) <= 4096
    for tid in ids:
        name = tid.split("::", 1)[1]
        assert re.search(rf"\b{name}\b", feedback), tid
    # the first failures keep their own line and message
    assert "tests/test_values.py::test_value_0_is_doubled (tests/test_values.py:" in feedback
    assert "AssertionError: value 0" in feedback
    assert re.search(r"\.\.\. and \d+ more failing: tests/test_values\.py::\{", feedback)
