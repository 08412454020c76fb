"""The run's invocation as the engine wrote it, kept in git, beside the checkpoints.

``run.json`` lies in the run directory, inside the workdir, where a command the run ran
may have rewritten it (without the OS sandbox, or under Landlock, which cannot take the
right to write back from the state directory). Each time the engine writes it, the same
text goes into a blob named by ``refs/looprun-sealed/<run id>``, in the repository's git
directory, which bubblewrap mounts read-only for every command. A resume takes the
invocation from there and refuses a ``run.json`` that says otherwise.

Without the sandbox a command runs as the user and could rewrite both; what is sealed
here is then only as safe as the repository's git directory (docs/security.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the loop core reads the ref's name without loading git
    from looprun.workspace.git import Git
    from looprun.workspace.snapshots import QuickSnapshots

PREFIX = "refs/looprun-sealed/"  # as workspace.snapshots.SEALED_REFS


def ref(run_id: str) -> str:
    return PREFIX + run_id


def seal(git: Git, run_id: str, text: str, quick: QuickSnapshots | None = None) -> None:
    """Record ``text`` (run.json as written) as the run's sealed invocation; ``quick``
    writes it in-process when the repository lets it (no git process)."""
    if quick is not None and quick.set_blob_ref(ref(run_id), text.encode("utf-8")):
        return
    blob = git.run("hash-object", "-w", "--stdin", input=text.encode("utf-8")).strip()
    git.run("update-ref", "-m", "looprun: invocation", ref(run_id), blob)


def unseal(git: Git, run_id: str) -> dict[str, Any] | None:
    """The sealed invocation of ``run_id``; ``None`` when there is none (or it is not
    a JSON object, which the engine never writes)."""
    code, out, _ = git.run_status("cat-file", "blob", ref(run_id))
    if code != 0:
        return None
    try:
        data = json.loads(out)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
