"""The README's template example and commands must stay true."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from looprun.cli.main import COMMANDS, main
from looprun.template.loader import load_template

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_template_example_validates(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(# yaml-language-server.*?)```", text, re.S)
    assert blocks, "README lost its template example"
    path = tmp_path / "example.yaml"
    path.write_text(blocks[0], encoding="utf-8")
    template = load_template(path)
    assert [t.id for t in template.plan.tasks] == ["reproduce", "fix"]
    assert template.limits.max_repeats == 4


def test_readme_lists_every_command() -> None:
    text = README.read_text(encoding="utf-8")
    for name in COMMANDS:
        if name == "run":
            continue
        assert f"looprun {name}" in text, f"README does not mention `looprun {name}`"


def test_quick_start_validate_command_passes() -> None:
    templates = sorted((README.parent / "templates").glob("*.yaml"))
    result = CliRunner().invoke(main, ["validate", *map(str, templates)])
    assert result.exit_code == 0, result.output
