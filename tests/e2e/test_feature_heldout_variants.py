"""A sub-loop of `feature` that special-cases its test's input never ends `done`.

Each task of `feature` runs the `bugfix` template as a sub-loop, so each gets held-out
variants of its own reproducing test, written by the holdout role once `reproduce` is
done. On the feature_shapes sample, a `square` task whose "code" returns 9 for the test's
side and raises otherwise passes its visible test; the variants (other sides) fail, the
sub-loop's `fix` is sent back (`heldout_variants`), and neither it nor the outer loop ends
`done`. The outer loop has no variants of its own: what it checks on the merged tree is
the suite and a held-out check the team gives (`--set holdout=PATH`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import git_init, journal_events, looprun, summary_of

pytestmark = pytest.mark.e2e

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "feature_shapes"
_STUB = "def square_area(side: float) -> float:\n    raise NotImplementedError\n"
_TEST = (
    "from shapes.square import square_area\n\n\n"
    "def test_square_area():\n    assert square_area(3) == 9\n"
)
_SPECIAL_CASE = (
    "def square_area(side: float) -> float:\n"
    "    if side == 3:\n        return 9\n    raise NotImplementedError\n"
)
_VARIANTS = (
    "```python\nfrom shapes.square import square_area\n\n\n"
    "def test_variant_1():\n    assert square_area(4) == 16\n\n\n"
    "def test_variant_2():\n    assert square_area(0.5) == 0.25\n```\n"
)


def _write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def test_a_special_casing_sub_loop_of_feature_never_ends_done(tmp_path: Path) -> None:
    work = tmp_path / "shapes"
    shutil.copytree(SAMPLE, work, ignore=shutil.ignore_patterns(".looprun", "__pycache__"))
    (work / "script.yaml").unlink()
    git_init(work)
    plan = {"tasks": [{"id": "square", "goal": "Add square_area(side) in shapes/square.py"}]}
    script = {
        "turns": [{"text": json.dumps(plan)}],
        "tasks": {
            "square": [
                {
                    "tool_calls": [
                        _write("shapes/square.py", _STUB),
                        _write("tests/test_square.py", _TEST),
                    ]
                },
                {"text": "The test fails."},
                {"role": "holdout", "text": _VARIANTS},
                {"tool_calls": [_write("shapes/square.py", _SPECIAL_CASE)]},
                {"text": "Done."},
            ]
        },
    }
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    proc = looprun(
        "feature",
        "--intent",
        "Add square_area(side), the area of a square.",
        "--workdir",
        str(work),
        "--model",
        f"script:{tmp_path / 'script.yaml'}",
        "--max-iterations",
        "1",
        "--json",
        timeout=300,
    )
    summary = summary_of(proc)

    assert summary["outcome"] != "done", proc.stderr
    (sub,) = (Path(summary["run_dir"]) / "subloops").iterdir()
    (heldout,) = journal_events(sub, "heldout")
    assert (heldout["status"], heldout["kept"]) == ("kept", 2), heldout
    decisions = [e["decision"] for e in journal_events(sub, "iteration")]
    assert [d["rule"] for d in decisions[:2]] == ["exit", "heldout_variants"], decisions
    assert "2 of\n2 held-out variants" in decisions[1]["message"], decisions[1]
    records = json.loads((Path(summary["run_dir"]) / "subloops.json").read_text())["records"]
    assert records["square"]["outcome"] != "done", records
