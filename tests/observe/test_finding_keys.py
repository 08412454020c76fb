"""Finding keys from real ruff reports: stable under line shifts, new when a line is new."""

from __future__ import annotations

import os
from pathlib import Path

from observe_helpers import write
from test_sarif import parse, ruff_sarif

from looprun.observe.base import Item
from looprun.observe.finding_keys import finding_key, new_flags


def _keys(root: Path) -> list[str]:
    return list(parse(root, ruff_sarif(root)).facts["finding_keys"])


def test_a_shifted_finding_keeps_its_key_and_a_new_one_is_new(tmp_path: Path) -> None:
    write(tmp_path, {"m.py": "import os\n\n\ndef f():\n    return 1\n"})
    before = _keys(tmp_path)
    assert len(before) == 1  # F401 os
    write(tmp_path, {"m.py": "import sys\nimport os\n\n\ndef f():\n    return 1\n"})
    after = _keys(tmp_path)
    assert len(after) == 2
    flags = new_flags(after, before)
    obs = parse(tmp_path, tmp_path / "ruff.sarif")
    new = [i.message for i, f in zip(obs.items, flags, strict=True) if f]
    assert new == ["`sys` imported but unused"]


def test_a_copy_of_an_old_line_is_new_once() -> None:
    assert new_flags(["a", "a", "b"], ["a", "b"]) == [False, True, False]
    assert new_flags(["a"], []) == [True]


def test_a_link_or_a_fifo_is_keyed_by_the_message_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("import os  # the same text\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.py").write_text("import os  # the same text\n")
    (work / "link.py").symlink_to(secret)
    os.mkfifo(work / "pipe.py")
    item = {"id": "F401", "rule": "F401", "message": "`os` imported but unused", "line": 1}
    real = finding_key(Item(file="m.py", **item), work)
    for name in ("link.py", "pipe.py", "../outside.txt", "gone.py"):
        assert finding_key(Item(file=name, **item), work) == finding_key(
            Item(file=name, **{**item, "line": None}), work
        ), name
    assert real != finding_key(Item(file="m.py", **{**item, "line": None}), work)
