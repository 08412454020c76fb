"""The agent samples validate, explain themselves, and their decisions are unit-tested."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from looprun.cli.main import main
from looprun.template.loader import load_template

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "agents"


@pytest.mark.parametrize(
    "name",
    [
        "bugfix-claude-code.yaml",
        "bugfix-codex.yaml",
        "bugfix-aider.yaml",
        "bugfix-opencode.yaml",
        "bugfix-gemini.yaml",
    ],
)
def test_the_agent_samples_validate(name: str) -> None:
    template = load_template(str(SAMPLES / name))
    assert template.act is not None and template.act.agent is not None
    assert template.act.tools == () and dict(template.limits.per_tool) == {}


def test_explain_shows_the_agent() -> None:
    out = CliRunner().invoke(main, ["explain", str(SAMPLES / "bugfix-claude-code.yaml")])
    assert out.exit_code == 0, out.output
    assert "act: agent CLI claude-code (model default, session fresh, timeout 900 s" in out.output


def test_refine_rules_on_agent_facts_are_unit_tested() -> None:
    out = CliRunner().invoke(
        main,
        [
            "test",
            str(SAMPLES / "bugfix-claude-code.yaml"),
            str(SAMPLES / "bugfix-claude-code.cases.yaml"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "4 passed, 0 failed" in out.output
