"""The malformed-template corpus: every case reports exactly its expected located problems."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from looprun.cli.main import main
from looprun.cli.validation.check import check_file
from looprun.errors import Problem

CORPUS = Path(__file__).parent / "malformed"
SIDECAR = CORPUS / "expected.yaml"


def _expectations() -> dict[str, list[str]]:
    cases: dict[str, list[str]] = {}
    for path in sorted(CORPUS.glob("*.yaml")):
        if path == SIDECAR:
            continue
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        cases[path.name] = [
            line.removeprefix("# expect:").strip()
            for line in text.splitlines()
            if line.startswith("# expect:")
        ]
    cases.update(yaml.safe_load(SIDECAR.read_text("utf-8")))
    return cases


CASES = _expectations()


def _parse(expect: str, case: str) -> tuple[str, int, int, str]:
    head, _, message = expect.partition(": ")
    parts = head.split(":")
    file = parts[0] if len(parts) == 3 else case
    line, col = int(parts[-2]), int(parts[-1])
    return file, line, col, message


def _matches(problem: Problem, file: str, line: int, col: int, message: str) -> bool:
    shown = Path(problem.location.file).as_posix()
    return (
        (shown == file or shown.endswith("/" + file))
        and (problem.location.line, problem.location.col) == (line, col)
        and message in problem.message
    )


def test_corpus_is_large_enough_and_every_case_states_expectations() -> None:
    assert len(CASES) >= 40
    assert all(CASES.values()), [name for name, exp in CASES.items() if not exp]


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_template_reports_expected_problems(case: str) -> None:
    problems = check_file(str(CORPUS / case))
    expected = [_parse(e, case) for e in CASES[case]]
    assert len(problems) == len(expected), "\n".join(map(str, problems))
    for file, line, col, message in expected:
        assert any(_matches(p, file, line, col, message) for p in problems), (
            f"expected {file}:{line}:{col}: {message}\ngot:\n" + "\n".join(map(str, problems))
        )


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_exits_invalid_without_traceback(case: str) -> None:
    result = CliRunner().invoke(main, ["validate", str(CORPUS / case)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if (CORPUS / case).is_dir():  # the CLI validates the looprun files in a directory
        return
    first = _parse(CASES[case][0], case)
    assert f":{first[1]}:{first[2]}: " in result.output
