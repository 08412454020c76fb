"""Loading, composition and building of real templates (built-ins and ones written here)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml

from looprun.errors import TemplateError
from looprun.loop.plan import rendered_globs
from looprun.system.resources import builtin_names, builtin_template, schema_path
from looprun.template.build.reader import parse_duration
from looprun.template.expressions import ShellCode
from looprun.template.loader import load_template

REPO = Path(__file__).resolve().parents[2]
TEAM = REPO / "samples" / "team" / "payments-bugfix.yaml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


MINIMAL = """\
looprun: 1
name: base
inputs:
  test_command: {type: command, default: "python -m pytest -q"}
act:
  prompt: "Do {{ intent }}"
  tools: [read_file, edit_file, run]
observe:
  tests:
    run: "{{ inputs.test_command }} --junitxml={{ run.artifacts }}/junit.xml"
    parser: junit
    file: "{{ run.artifacts }}/junit.xml"
    timeout: 1h30m
  lint: {parser: sarif, file: lint.sarif}
exit: [tests.ok]
refine:
  - if: tests.failed > 0
    then: {retry: "{{ tests.feedback }}"}
limits: {max_iterations: 5, timeout: 90s}
"""


def test_every_builtin_template_loads_and_is_complete() -> None:
    names = builtin_names()
    assert {"bugfix", "feature", "refactor", "test_backfill"} <= set(names)
    for name in names:
        template = load_template(name)
        assert template.name == name
        assert template.exit, name
        assert template.limits.max_repeats is not None, name
        sources = [r.condition.source for r in template.refine if r.condition is not None]
        assert any(re.search(r"progress\.repeats\s*==\s*2", s) for s in sources), name
        assert any(re.search(r"progress\.repeats\s*>=\s*3", s) for s in sources), name


@pytest.mark.parametrize(
    "path",
    [*sorted(p for p in (REPO / "templates").rglob("*.yaml") if "tests" not in p.parts), TEAM],
    ids=lambda p: p.name,
)
def test_templates_point_editors_at_the_schema(path: Path) -> None:
    first = path.read_text("utf-8").splitlines()[0]
    match = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert match, first
    assert (path.parent / match.group(1)).resolve() == schema_path().resolve()


def test_schema_describes_every_property() -> None:
    schema = json.loads(schema_path().read_text("utf-8"))
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)
    missing = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                if "description" not in sub:
                    missing.append(f"{where}.{name}")
            for key, sub in node.items():
                walk(sub, f"{where}.{key}")
        elif isinstance(node, list):
            for i, sub in enumerate(node):
                walk(sub, f"{where}[{i}]")

    walk(schema, "$")
    assert missing == []


def test_bugfix_is_reproduce_then_fix() -> None:
    t = load_template("bugfix")
    reproduce, fix = t.plan.tasks
    assert (reproduce.id, fix.id, fix.depends_on) == ("reproduce", "fix", ("reproduce",))
    new = "tests/test_invoice.py::test_zero"
    facts = {
        "tests": {
            "failed": 1,
            "errors": 0,
            "ok": False,
            "failure_types": {new: "AssertionError"},
            "exercised": {new: ["src/invoice.py"]},
            "self_raised": {},
        },
        "baseline": {"tests": {"errors": 0, "newly_failing": [new], "vanished": []}},
        "diff": {"files": ["tests/test_invoice.py"]},
        "inputs": {"tests_glob": "tests/**", "reproduce_exceptions": ["AssertionError"]},
        "fresh": {"ran": True, "ok": False, "passing": [], "failing": [new], "self_raised": {}},
    }
    assert reproduce.done_when.evaluate(facts) is True
    # the fresh run (no looprun module in the test's process) must find it the code's too
    facts["fresh"] = {
        "ran": True,
        "ok": False,
        "passing": [],
        "failing": [new],
        "self_raised": {new: "a `raise`"},
    }
    assert reproduce.done_when.evaluate(facts) is False
    # and the test must fail there as well
    facts["fresh"] = {"ran": True, "ok": True, "passing": [new], "failing": [], "self_raised": {}}
    assert reproduce.done_when.evaluate(facts) is False
    # or a run that broke without naming a failure
    facts["fresh"] = {"ran": True, "ok": False, "passing": [], "failing": [], "self_raised": {}}
    assert reproduce.done_when.evaluate(facts) is False
    facts["fresh"] = {"ran": True, "ok": False, "passing": [], "failing": [new], "self_raised": {}}
    # a test that fails because it is broken (ImportError) is not a reproduction
    facts["tests"] = {**facts["tests"], "failure_types": {new: "ImportError"}}
    assert reproduce.done_when.evaluate(facts) is False
    facts["tests"] = {**facts["tests"], "failure_types": {new: "AssertionError"}}
    # a test whose body ran none of the code (`assert False`) is not a reproduction
    facts["tests"] = {**facts["tests"], "exercised": {new: []}}
    assert reproduce.done_when.evaluate(facts) is False
    facts["tests"] = {**facts["tests"], "exercised": {new: ["src/invoice.py"]}}
    # nor one that called the code and then raised on its own
    facts["tests"] = {**facts["tests"], "self_raised": {new: "a `raise` statement"}}
    assert reproduce.done_when.evaluate(facts) is False
    facts["tests"] = {**facts["tests"], "self_raised": {}}
    facts["diff"] = {"files": ["src/invoice.py"]}
    assert reproduce.done_when.evaluate(facts) is False
    # a failure that was already there at the baseline is not a reproduction
    facts["diff"] = {"files": ["tests/test_invoice.py"]}
    facts["baseline"] = {"tests": {"errors": 0, "newly_failing": [], "vanished": []}}
    assert reproduce.done_when.evaluate(facts) is False
    assert "pytest.skip(" in t.act.constraints.forbidden_patterns
    # reproduce may only add new files under tests_glob, never a conftest.py
    assert [g.source for g in reproduce.protect.paths] == ["**"]
    defaults = {name: spec.default for name, spec in t.inputs.items()}
    allow_new = rendered_globs(reproduce.protect.allow_new, {"inputs": defaults})
    assert "!**/conftest.py" in allow_new  # the pack's check_config, each negated
    assert "tests/**" in allow_new
    # while fixing, the tests (the new one included) and the doctests are read-only
    assert "{{ inputs.tests_glob }}" in [g.source for g in fix.protect.paths]
    assert fix.protect.doctests
    assert "tests.passing" in fix.done_when.source


def test_refactor_forbids_tests_and_limits_the_diff() -> None:
    t = load_template("refactor")
    protected = [g.source for g in t.act.constraints.protect.paths]
    assert "tests/**" in protected and "tests/**" not in t.act.constraints.paths.deny
    assert t.act.constraints.protect.doctests
    assert t.act.constraints.max_diff_lines
    assert any("diff.lines" in c.source for c in t.exit)


def test_test_backfill_may_only_write_tests_and_needs_coverage() -> None:
    t = load_template("test_backfill")
    assert all("test" in glob for glob in t.act.constraints.paths.allow)
    assert t.inputs["target"].required
    assert t.observe["cov"].parser == "coverage"
    assert any("cov.target_percent" in c.source for c in t.exit)


def test_feature_is_an_outer_loop_over_bugfix() -> None:
    t = load_template("feature")
    assert t.act is None and t.plan.mode == "model"
    assert t.each_task.template.name == "bugfix"
    assert (t.each_task.isolation, t.each_task.parallel) == ("worktree", 2)
    assert (
        t.each_task.with_["intent"].render({"task": {"goal": "G"}, "intent": "I"})
        == "G (part of: I)"
    )
    assert any("subloops.all_done" in c.source for c in t.exit)


def test_team_template_extends_and_overrides() -> None:
    team, base = load_template(TEAM), load_template("bugfix")
    assert team.name == "payments-bugfix"
    assert team.limits.max_iterations == 6 and team.limits.max_cost_usd == 1.0
    assert team.limits.max_tokens == base.limits.max_tokens  # inherited
    assert team.act.constraints.paths.allow == ("services/payments/**",)
    assert team.act.constraints.forbidden_patterns == base.act.constraints.forbidden_patterns
    assert "cov" not in team.observe and "cov" in base.observe  # null removes
    assert team.inputs["tests_glob"].default == "services/payments/tests/**"
    assert team.inputs["tests_glob"].required is False and team.inputs["intent"].required
    assert len(team.refine) == len(base.refine)


def test_merge_rules_maps_merge_lists_replace_null_removes(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", MINIMAL)
    child = write(
        tmp_path / "child.yaml",
        """\
looprun: 1
name: child
extends: base.yaml
act:
  tools: [read_file]
observe:
  lint: null
  tests: {timeout: 2m}
limits: {max_iterations: 2}
""",
    )
    t = load_template(child)
    assert t.act.tools == ("read_file",)
    assert t.act.prompt.source == "Do {{ intent }}"
    assert list(t.observe) == ["tests"]
    assert t.observe["tests"].timeout_s == 120 and t.observe["tests"].parser == "junit"
    assert (t.limits.max_iterations, t.limits.timeout_s) == (2, 90)
    assert len(t.refine) == 1


def test_include_order_and_fragment_positions(tmp_path: Path) -> None:
    write(
        tmp_path / "frag" / "checks.yaml",
        "observe:\n  diff: {parser: git_diff}\n  bad: {parser: nope, file: x.txt}\n",
    )
    main = write(
        tmp_path / "main.yaml",
        MINIMAL.replace("name: base", "name: main\ninclude: [frag/checks.yaml]"),
    )
    with pytest.raises(TemplateError) as info:
        load_template(main)
    (problem,) = info.value.problems
    assert problem.location.file.endswith("frag/checks.yaml")
    assert (problem.location.line, problem.location.col) == (3, 17)
    assert "unknown parser 'nope'" in problem.message


def test_errors_in_parent_are_located_in_the_parent(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", MINIMAL.replace("max_iterations: 5", "max_iterations: -5"))
    child = write(tmp_path / "child.yaml", "looprun: 1\nname: c\nextends: base.yaml\n")
    with pytest.raises(TemplateError) as info:
        load_template(child)
    (problem,) = info.value.problems
    assert Path(problem.location.file).name == "base.yaml"
    assert (
        problem.location.line
        == MINIMAL.splitlines().index("limits: {max_iterations: 5, timeout: 90s}") + 1
    )


def test_yaml_anchors_and_merge_keys_work(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "  lint: {parser: sarif, file: lint.sarif}",
        "  lint: &lint {parser: sarif, file: lint.sarif}\n"
        "  lint2:\n    <<: *lint\n    file: other.sarif",
    )
    t = load_template(write(tmp_path / "anchors.yaml", text))
    assert t.observe["lint2"].parser == "sarif"
    assert t.observe["lint2"].file.source == "other.sarif"


def test_template_objects_are_immutable() -> None:
    t = load_template("bugfix")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.resolved["name"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        t.observe["x"] = t.observe["tests"]  # type: ignore[index]


def test_observer_commands_quote_values_but_not_commands() -> None:
    t = load_template("bugfix")
    run = t.observe["tests"].run
    rendered = run.render(
        {
            "inputs": {"test_command": ShellCode("python -m pytest -q")},
            "run": {"artifacts": "arts dir; rm -rf ~"},
        }
    )
    assert rendered == (
        "COVERAGE_FILE='arts dir; rm -rf ~'/coverage.data PYTHONDONTWRITEBYTECODE=1"
        " python -m pytest -q -p looprun_outcome --junitxml='arts dir; rm -rf ~'/junit.xml"
    )


def test_durations() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("20m") == 1200
    assert parse_duration("1h30m") == 5400
    assert parse_duration(45) == 45.0
    assert parse_duration("20 minutes") is None
    assert parse_duration(0) is None


def test_uses_resolves_relative_to_the_declaring_file(tmp_path: Path) -> None:
    write(tmp_path / "inner" / "worker.yaml", MINIMAL.replace("name: base", "name: worker"))
    outer = write(
        tmp_path / "outer.yaml",
        """\
looprun: 1
name: outer
plan:
  mode: static
  tasks:
    - {id: a, goal: "first part of {{ intent }}"}
    - {id: b, goal: second, depends_on: [a]}
each_task: {uses: inner/worker.yaml, with: {intent: "{{ task.goal }}"}, isolation: none}
exit: [subloops.all_done]
""",
    )
    t = load_template(outer)
    assert t.each_task.template.name == "worker"
    assert t.each_task.parallel == 1 and t.each_task.isolation == "none"
    assert [task.id for task in t.plan.tasks] == ["a", "b"]


def test_unknown_builtin_name_suggests_the_closest() -> None:
    with pytest.raises(TemplateError) as info:
        load_template("bugfx")
    assert "did you mean 'bugfix'" in str(info.value)


def test_pre_commit_hook_matches_template_files() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    hook = hooks["looprun-validate"]
    assert hook["entry"].startswith("looprun validate") and "--skip-other" in hook["entry"]
    pattern = re.compile(hook["files"])  # every YAML file; the marker decides what is checked
    assert pattern.search("templates/bugfix.yaml")
    assert pattern.search("ci/loops/payments.looprun.yml")
    assert re.search(hooks["looprun-test"]["files"], "loops/payments.cases.yaml")
    assert builtin_template("observers/python") is not None
