"""``narrow`` on an observer: each misuse is an error at its file:line:col, and
``explain`` says the observer is staged."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from looprun.cli.main import main
from looprun.errors import TemplateError
from looprun.template.loader import load_template

STAGED = """\
looprun: 1
name: staged
inputs: {{intent: {{type: string, required: true}}}}
act: {{prompt: "x", tools: [read_file]}}
observe:
  tests:
    {run}parser: {parser}
    file: report.xml
    narrow: {narrow}
exit: [tests.ok]
refine: [{{else: retry}}]
limits: {{max_iterations: 2}}
"""
RUN = "run: python -m pytest -q --junitxml=report.xml\n    "


def _write(tmp_path: Path, run: str = RUN, parser: str = "junit", narrow: str = "") -> Path:
    path = tmp_path / "t.yaml"
    text = STAGED.format(run=run, parser=parser, narrow=narrow or "[last_failing]")
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("run", "parser", "narrow", "expected"),
    [
        (
            RUN,
            "junit",
            "[last_failng]",
            "10:14: observe.tests.narrow[0]: unknown narrow selection 'last_failng'",
        ),
        (RUN, "junit", "[]", "observe.tests.narrow"),
        ("", "junit", "[changed_tests]", "9:5: observe.tests.narrow: narrow appends test node ids"),
        (RUN, "sarif", "[changed_tests]", "needs `run` (a pytest command) and `parser: junit`"),
    ],
)
def test_a_misused_narrow_is_a_located_error(
    tmp_path: Path, run: str, parser: str, narrow: str, expected: str
) -> None:
    with pytest.raises(TemplateError) as info:
        load_template(_write(tmp_path, run, parser, narrow))
    assert expected in str(info.value)


def test_a_staged_observer_loads_and_explain_shows_it(tmp_path: Path) -> None:
    path = _write(tmp_path, narrow="[last_failing, task_failing, changed_tests, last_failing]")
    spec = load_template(path).observe["tests"]
    assert spec.narrow == ("last_failing", "task_failing", "changed_tests")
    assert spec.select == ()
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    assert "staged: first last_failing + task_failing + changed_tests" in out.output
    assert "the tiers run unless the last took at least 0.5 of the last whole" in out.output


def test_related_tests_is_a_tier_of_its_own_in_explain(tmp_path: Path) -> None:
    path = _write(tmp_path, narrow="[related_tests, last_failing]")
    assert load_template(path).observe["tests"].narrow == ("related_tests", "last_failing")
    out = CliRunner().invoke(main, ["explain", str(path)])
    assert out.exit_code == 0, out.output
    assert "staged: first last_failing, then related_tests, the whole command" in out.output


def test_the_bugfix_template_is_staged() -> None:
    from looprun.system.resources import templates_dir

    spec = load_template(templates_dir() / "bugfix.yaml").observe["tests"]
    assert spec.narrow == ("last_failing", "task_failing", "changed_tests", "related_tests")
    assert spec.narrow_share == 0.5  # skipped while a tier run costs half a whole run


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        ("false", None),
        ("0.25", 0.25),
        ("1", 1.0),
        ("0", "11:19: observe.tests.narrow_share"),
        ("1.5", "11:19: observe.tests.narrow_share"),
        ("yes please", "11:19: observe.tests.narrow_share"),
    ],
)
def test_narrow_share_sets_or_turns_off_skipping_the_tiers(
    tmp_path: Path, share: str, expected: float | str | None
) -> None:
    path = _write(tmp_path, narrow=f"[last_failing]\n    narrow_share: {share}")
    if not isinstance(expected, str):
        assert load_template(path).observe["tests"].narrow_share == expected
        return
    with pytest.raises(TemplateError) as info:
        load_template(path)
    assert expected in str(info.value)


def test_narrow_share_needs_a_staged_observer(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    text = STAGED.format(run=RUN, parser="junit", narrow="x").replace(
        "narrow: x", "narrow_share: 0.5"
    )
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TemplateError) as info:
        load_template(path)
    assert "10:5: observe.tests.narrow_share: narrow_share needs `narrow`" in str(info.value)
