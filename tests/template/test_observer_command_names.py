"""What an observer's `run` may name: the done tasks' facts and the observers declared
before it (data, each one shell-quoted word), never an observer declared after it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from looprun.errors import TemplateError
from looprun.template.loader import load_template

TEMPLATE = """\
looprun: 1
name: names
inputs: {{intent: {{type: string, required: true}}}}
act: {{prompt: "x", tools: [read_file]}}
observe:
  first: {{parser: exit_code, run: "true"}}
  second: {{parser: exit_code, run: {run}}}
  third: {{parser: exit_code, run: "true"}}
exit: [second.ok]
refine: [{{else: retry}}]
limits: {{max_iterations: 2}}
"""


def _load(tmp_path: Path, run: str):
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(run=run), encoding="utf-8")
    return load_template(path)


def test_a_command_may_name_tasks_and_earlier_observers(tmp_path: Path) -> None:
    template = _load(tmp_path, '"echo {{ first.exit_code }} {{ tasks | tojson }}"')
    spec = template.observe["second"]
    assert spec.run is not None
    # a value made of the run's data stays one word, whatever it holds
    said = spec.run.render(
        {
            "first": {"exit_code": 0},
            "tasks": {"a": {"ids": ["x; rm -rf /", "$(id)"]}},
            "inputs": {},
            "run": {},
            "intent": "",
            "task": {},
            "iteration": 1,
        }
    )
    words = shlex.split(said)
    assert words[:2] == ["echo", "0"] and len(words) == 3, said
    assert "$(id)" in words[2] and "rm -rf" in words[2]


@pytest.mark.parametrize(
    ("run", "said"),
    [
        ('"echo {{ third.ok }}"', "'third' is not available in an observer command"),
        ('"echo {{ second.ok }}"', "'second' is not available in an observer command"),
        ('"echo {{ progress }}"', "'progress' is not available in an observer command"),
    ],
)
def test_a_later_observer_or_another_engine_name_is_refused(
    tmp_path: Path, run: str, said: str
) -> None:
    with pytest.raises(TemplateError) as info:
        _load(tmp_path, run)
    assert said in str(info.value)
