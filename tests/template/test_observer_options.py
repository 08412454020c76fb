"""A misspelt or meaningless parser option is a validation error, not a silent no-op."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from looprun.cli.main import main
from looprun.errors import TemplateError
from looprun.observe import declared_facts, regex
from looprun.template.loader import load_template

TEMPLATE = """\
looprun: 1
name: opts
inputs: {{intent: {{type: string, required: true}}}}
act: {{prompt: "x", tools: [read_file]}}
observe:
  check: {{parser: {parser}, file: report.out, options: {options}}}
exit: [check.ok]
refine: [{{else: retry}}]
limits: {{max_iterations: 2}}
"""


def _load(tmp_path: Path, parser: str, options: str):
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(parser=parser, options=options), encoding="utf-8")
    return load_template(path)


@pytest.mark.parametrize(
    ("parser", "options", "expected"),
    [
        ("coverage", "{minimum: 80}", "6:57: observe.check.options.minimum: parser 'coverage' "),
        ("sarif", "{fail_on: warnings}", "observe.check.options.fail_on: option 'fail_on' must"),
        ("regex", "{preset: mypyy}", "option 'preset' must be one of mypy,"),
        ("junit", "{min: 1}", "parser 'junit' has no option 'min'"),
    ],
)
def test_bad_option_is_a_located_error(
    tmp_path: Path, parser: str, options: str, expected: str
) -> None:
    with pytest.raises(TemplateError) as info:
        _load(tmp_path, parser, options)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("parser", "options"),
    [
        ("coverage", "{min: 80, paths: [src/a.py], max_feedback: 2000}"),
        ("sarif", "{fail_on: warning}"),
        ("regex", "{preset: eslint-stylish, fail_on: note}"),
        ("json", "{facts: {score: a.b}, ok: a.ok}"),
        ("git_diff", "{allow: ['src/**'], deny: [], forbidden_patterns: [x], max_lines: 9}"),
    ],
)
def test_documented_options_load(tmp_path: Path, parser: str, options: str) -> None:
    spec = _load(tmp_path, parser, options).observe["check"]
    assert spec.parser == parser and spec.options


def test_declared_presets_are_the_parser_presets() -> None:
    assert set(declared_facts.REGEX_PRESETS) == set(regex.PRESETS)


def test_observe_command_refuses_an_unknown_option(tmp_path: Path) -> None:
    report = tmp_path / "r.sarif"
    report.write_text('{"version": "2.1.0", "runs": []}', encoding="utf-8")
    runner = CliRunner()
    bad = runner.invoke(main, ["observe", "sarif", str(report), "-o", "fail-on=warning"])
    assert bad.exit_code == 2, bad.output
    assert "has no option 'fail-on'" in bad.output
    good = runner.invoke(main, ["observe", "sarif", str(report), "-o", "fail_on=warning"])
    assert good.exit_code == 0, good.output


PINNED = """\
looprun: 1
name: pinned
inputs: {{intent: {{type: string, required: true}}}}
act: {{prompt: "x", tools: [read_file]}}
observe:
  tests:
    {run}pin_config: {pin}
    parser: junit
    file: report.xml
exit: [tests.ok]
refine: [{{else: retry}}]
limits: {{max_iterations: 2}}
"""


@pytest.mark.parametrize(
    ("run", "pin", "expected"),
    [
        ("", "pytest", "7:5: observe.tests.pin_config: pin_config: pytest pins the configuration"),
        ("run: python -m pytest\n    ", "tox", "observe.tests.pin_config"),
    ],
)
def test_a_misused_pin_config_is_a_located_error(
    tmp_path: Path, run: str, pin: str, expected: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(PINNED.format(run=run, pin=pin), encoding="utf-8")
    with pytest.raises(TemplateError) as info:
        load_template(path)
    assert expected in str(info.value)


@pytest.mark.parametrize("name", ["bugfix", "feature", "refactor", "test_backfill"])
def test_the_builtin_templates_pin_the_suite_config(name: str) -> None:
    from looprun.system.resources import templates_dir

    template = load_template(templates_dir() / f"{name}.yaml")
    assert template.observe["tests"].pin_config == "pytest"


INPUT_TEMPLATE = """\
looprun: 1
name: opts
inputs:
  intent: {{type: string, required: true}}
  target: {{type: list, default: [src/a.py]}}
act: {{prompt: "x", tools: [read_file]}}
observe:
  cov: {{parser: coverage, file: report.out, options: {{paths: {value}}}}}
exit: [cov.ok]
refine: [{{else: retry}}]
limits: {{max_iterations: 2}}
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"{{ inputs.targets }}"', "8:62: observe.cov.options.paths: option 'paths' names an"),
        ('"src/{{ inputs.target }}"', "may be `{{ inputs.NAME }}` as its whole value"),
        ('"{{ inputs.target | first }}"', "may be `{{ inputs.NAME }}` as its whole value"),
        ('"{{ run.artifacts }}"', "may be `{{ inputs.NAME }}` as its whole value"),
    ],
)
def test_an_option_that_reads_an_input_is_checked(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(INPUT_TEMPLATE.format(value=value), encoding="utf-8")
    with pytest.raises(TemplateError) as info:
        load_template(path)
    assert expected in str(info.value)


def test_an_input_option_is_the_inputs_value_as_data(tmp_path: Path) -> None:
    """The reference is replaced by the value when the observer runs, never rendered: a
    value holding braces stays what it is."""
    from looprun.template.model import bound_options

    path = tmp_path / "t.yaml"
    path.write_text(INPUT_TEMPLATE.format(value='"{{ inputs.target }}"'), encoding="utf-8")
    spec = load_template(path).observe["cov"]
    given = ["src/{{ 7 * 7 }}.py", "lib/b.py"]
    assert bound_options(spec.options, {"target": given}) == {"paths": given}
