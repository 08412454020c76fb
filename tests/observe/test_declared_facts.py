"""Every fact `looprun observe` shows for a built-in parser is one a condition may name."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looprun.checks.runner import observe_command
from looprun.observe.base import COMMON_FACTS
from looprun.observe.declared_facts import preset_facts
from looprun.observe.registry import (
    BUILTIN,
    declared_empty_facts,
    empty_facts,
    get_parser,
    parser_facts,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny project with one failing test, its JUnit and Cobertura reports and SARIF."""
    root = tmp_path_factory.mktemp("facts")
    (root / "calc.py").write_text("def div(a, b):\n    return a / b\n", encoding="utf-8")
    (root / "test_calc.py").write_text(
        "import os\nfrom calc import div\n\n"
        "def test_one():\n    assert div(2, 1) == 2\n\n"
        "def test_zero():\n    assert div(1, 0) == 0\n",
        encoding="utf-8",
    )
    run = [sys.executable, "-m", "coverage"]
    subprocess.run(
        [*run, "run", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"],
        cwd=root,
        capture_output=True,
    )
    subprocess.run([*run, "xml", "-q", "-o", "coverage.xml"], cwd=root, check=True)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    subprocess.run(
        [ruff, "check", "--output-format=sarif", "--output-file=ruff.sarif", "."],
        cwd=root,
        capture_output=True,
    )
    return root


@pytest.mark.parametrize(
    ("parser", "file", "command", "options"),
    [
        ("junit", "junit.xml", None, {}),
        ("coverage", "coverage.xml", None, {"min": 90, "paths": ["calc.py"]}),
        ("sarif", "ruff.sarif", None, {}),
        ("exit_code", None, "exit 3", {}),
        ("regex", None, "printf 'calc.py:2: error: bad [x]\\n'", {"preset": "mypy"}),
    ],
)
def test_observed_facts_are_declared(
    project: Path, parser: str, file: str | None, command: str | None, options: dict
) -> None:
    obs = observe_command(
        parser,
        workdir=project,
        command=command,
        file=Path(file) if file else None,
        options=options,
    )
    assert obs.error is None, obs.error
    declared = parser_facts(parser)
    assert declared is not None
    shown = set(obs.to_facts())
    assert shown - COMMON_FACTS - declared == set()


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_a_built_in_parsers_declared_empty_facts_are_its_own(name: str) -> None:
    # validation reads the declared ones so as not to import the parser's module
    assert dict(declared_empty_facts(name) or {}) == empty_facts(get_parser(name))
    assert declared_empty_facts(name) is not None


def test_a_template_of_built_in_parsers_loads_without_parser_modules_or_plugins() -> None:
    probe = (
        "import sys\n"
        "from looprun.system.resources import builtin_template\n"
        "from looprun.template.loader import load_template\n"
        "load_template(builtin_template('bugfix'))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('looprun.observe.junit', "
        "'junitparser', 'importlib.metadata', 'pathspec', 'jsonschema'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_the_json_parsers_facts_are_the_ones_its_options_name() -> None:
    named = preset_facts("json", {"facts": {"score": "score", "total": "a.b"}})
    assert named == {"score": None, "total": None}
    assert preset_facts("json", {}) is None
    assert preset_facts("junit", {"facts": {"x": "x"}}) is None
