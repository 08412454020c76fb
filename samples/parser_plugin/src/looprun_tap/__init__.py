"""A third-party looprun parser: TAP (Test Anything Protocol) output, as printed by
``prove``, ``node --test --test-reporter=tap`` and many others.

It follows the parser protocol: ``name``, ``facts``, and ``parse(ParseInput)``
returning an ``Observation`` without ever raising on bad input.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render
from looprun.observe.normalise import failure_signature

_RESULT = re.compile(r"^(not )?ok\b\s*(\d+)?\s*(?:-\s*)?([^#]*)(?:#\s*(\w+)(.*))?$")


class TapParser:
    name = "tap"
    facts = frozenset({"tests", "passed", "failed", "skipped", "failing"})
    empty_facts: ClassVar[dict[str, Any]] = {
        "tests": 0,
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        "failing": [],
    }

    def parse(self, data: ParseInput) -> Observation:
        text = data.output or ""
        if data.file is not None:
            path = data.file if data.file.is_absolute() else data.workdir / data.file
            try:
                text = path.read_text("utf-8", "replace")
            except OSError as exc:
                message = f"{path}: cannot read TAP output: {exc.strerror or exc}"
                return Observation(
                    parser=self.name,
                    ok=False,
                    error=message,
                    feedback=message,
                    facts=self.empty_facts,
                )
        counts = {"tests": 0, "passed": 0, "failed": 0, "skipped": 0}
        items: list[Item] = []
        for line in text.splitlines():
            m = _RESULT.match(line.strip())
            if not m:
                continue
            failed, number, desc, directive = m.group(1), m.group(2), m.group(3), m.group(4)
            counts["tests"] += 1
            if directive and directive.upper() in ("SKIP", "TODO"):
                counts["skipped"] += 1
            elif failed:
                counts["failed"] += 1
                items.append(
                    Item(id=desc.strip() or f"test {number}", message="not ok", severity="failure")
                )
            else:
                counts["passed"] += 1
        ok = counts["failed"] == 0 and counts["tests"] > counts["skipped"]
        ok = ok and data.exit_code in (None, 0)
        return Observation(
            parser=self.name,
            ok=ok,
            exit_code=data.exit_code,
            counts=counts,
            items=tuple(items),
            signature=failure_signature((i.id, i.message) for i in items),
            feedback=render(f"tap: {counts['failed']} failed of {counts['tests']}", items),
            facts={**counts, "failing": [i.id for i in items]},
        )
