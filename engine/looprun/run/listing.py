"""``looprun runs``: the runs of a repository, a line each."""

from __future__ import annotations

import json
from pathlib import Path

import click

from looprun.errors import one_line
from looprun.journal.runs import list_runs, runs_root
from looprun.report.text import duration
from looprun.run.workdir import workdir_of


def runs_from_cli(*, workdir: str | None, as_json: bool) -> int:
    """``looprun runs``: every run in the workdir with its outcome."""
    wd = workdir_of(workdir or ".")
    rows = list_runs(wd)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        click.echo(f"no runs under {runs_root(wd)}")
        return 0

    click.echo(f"runs under {runs_root(wd)}:", err=True)  # stdout: the table alone

    table = [
        ("RUN", "STARTED", "DURATION", "ITER", "TOKENS", "COST", "OUTCOME", "TEMPLATE", "RESUME")
    ]
    for r in rows:
        table.append(
            (
                r.run_id,
                r.started.replace("T", " ") or "?",
                duration(r.duration_s),
                str(r.iterations),
                f"{r.tokens:,}",
                f"${r.cost_usd:.4f}",
                r.outcome,
                Path(r.template).name,
                f"resume: {r.resume}" if r.resume else "nothing to resume",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = {2, 3, 4, 5}  # numbers line up on the right
    for n, row in enumerate(table):
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        reason = "" if n == 0 else one_line(rows[n - 1].reason)
        click.echo(("  ".join(cells) + ("  " + reason if reason else "")).rstrip())
    return 0
