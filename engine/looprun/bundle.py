"""Portable runs: ``looprun bundle RUN_ID`` packs a run so that another clone can
``looprun resume --bundle FILE`` it (a run paused for approval in one CI job, approved
and continued in another).

A bundle is a gzip'd tar holding ``manifest.json``, the run directory (``run/``, without
sub-loop worktrees) and ``refs.bundle``: a ``git bundle`` of the run's refs (checkpoints,
sub-loop starts and kept trees, the base anchor). The objects of the commit the run
started from are left out (a prerequisite), so the bundle stays small and the other
clone must hold that commit, as a checkout of the same revision does.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from looprun.atomic import write_atomic
from looprun.errors import LooprunError, UsageError
from looprun.gitutil import Git
from looprun.journal import RUNS_DIR, find_run

FORMAT = "looprun-bundle"
PREFIX = "refs/looprun/"
SKIP = ("worktrees",)  # git worktrees of sub-loops: their state is on their refs
# run.artifacts: what commands wrote there, unredacted, unbounded, maybe a FIFO; a
# bundle carries the engine's redacted, bounded copies in kept/ instead
COMMANDS_DIR = "artifacts"


def _repo(workdir: Path) -> Git:
    git = Git(workdir)
    top = git.run("rev-parse", "--show-toplevel", check=False).strip()
    if not top or Path(os.path.realpath(top)) != Path(os.path.realpath(workdir)):
        raise UsageError(f"{workdir}: not the top of a git repository; bundles need one")
    return git


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def create_bundle(workdir: Path, run_id: str, output: Path | None = None) -> Path:
    """Write the bundle of ``run_id``; returns its path (default ``<run_id>.looprun``)."""
    git = _repo(workdir)
    run_dir = find_run(workdir, run_id)
    rid = run_dir.name
    state = _load(run_dir / "state.json")
    if not state:
        raise UsageError(f"run {rid} has no saved state yet; there is nothing to resume")
    listing = git.run("for-each-ref", "--format=%(refname)", PREFIX).split()
    refs = [
        r for r in listing if r.startswith((f"{PREFIX}{rid}/", f"{PREFIX}{rid}."))
    ]  # the run's own and its sub-runs'
    base = str(state.get("base") or "")
    if base and f"{PREFIX}base/{base}" in listing:
        refs.append(f"{PREFIX}base/{base}")
    if not refs:
        raise UsageError(f"run {rid} has no checkpoint refs in {workdir} (pruned by gc?)")
    start = git.run("rev-parse", "--verify", "-q", f"{PREFIX}base/{base}^", check=False).strip()
    output = output or Path(f"{rid}.looprun")
    with tempfile.TemporaryDirectory(prefix="looprun-bundle-") as tmp:
        refs_file = Path(tmp) / "refs.bundle"
        spec = [*refs, *([f"^{start}"] if start else [])]
        git.run("bundle", "create", "-q", str(refs_file), "--stdin", input="\n".join(spec).encode())
        manifest = {
            "format": FORMAT,
            "version": 1,
            "run_id": rid,
            "refs": refs,
            "requires": start or None,
            "workdir": str(workdir.resolve()),
        }
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=2).encode())
            tar.add(refs_file, arcname="refs.bundle")
            tar.add(run_dir, arcname="run", filter=_skip_worktrees)
        write_atomic(output, buf.getvalue())
    return output


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _skip_worktrees(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = Path(info.name).parts
    if len(parts) > 1 and parts[1] in SKIP:
        return None
    if COMMANDS_DIR in parts[1:]:  # the run's and its sub-runs'
        return None
    if info.issym() or info.islnk():
        return None  # a run directory holds no links; never carry one
    return info


def import_bundle(workdir: Path, bundle: Path) -> str:
    """Unpack a bundle into this clone: fetch its refs, place its run directory (paths
    inside the old clone mapped to this one). Returns the run id."""
    git = _repo(workdir)
    if not bundle.is_file():
        raise UsageError(f"--bundle {bundle}: no such file")
    with tempfile.TemporaryDirectory(prefix="looprun-unbundle-") as tmp:
        root = Path(tmp)
        try:
            with tarfile.open(bundle, mode="r:gz") as tar:
                tar.extractall(root, filter="data")  # no absolute paths, no .., no devices
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UsageError(f"--bundle {bundle}: not a looprun bundle ({exc})") from None
        manifest = _load(root / "manifest.json")
        rid = str(manifest.get("run_id") or "")
        if manifest.get("format") != FORMAT or not rid or not (root / "run").is_dir():
            raise UsageError(f"--bundle {bundle}: not a looprun bundle (no manifest)")
        target = workdir / RUNS_DIR / rid
        if target.exists():
            raise UsageError(
                f"run {rid} is already in {workdir}: continue it with `looprun resume {rid}`"
            )
        requires = manifest.get("requires")
        if requires:
            code, _, _ = git.run_status("cat-file", "-e", f"{requires}^{{commit}}")
            if code != 0:
                raise LooprunError(
                    f"--bundle {bundle}: this clone lacks commit {requires[:12]}, where run "
                    f"{rid} started; fetch or check it out first"
                )
        refs = [str(r) for r in manifest.get("refs") or () if str(r).startswith(PREFIX)]
        git.run("fetch", "-q", str(root / "refs.bundle"), *(f"+{r}:{r}" for r in refs))
        _remap_paths(root / "run", str(manifest.get("workdir") or ""), workdir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(root / "run"), str(target))
    return rid


def _remap_paths(run_dir: Path, old: str, new: Path) -> None:
    """``run.json`` names the old clone's workdir and, often, a template or a scripted
    model inside it: point them at the same files in this clone."""
    path = run_dir / "run.json"
    invocation = _load(path)
    if not invocation or not old:
        return

    def moved(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        prefix, sep, rest = value.partition(":") if value.startswith("script:") else ("", "", value)
        if rest == old or rest.startswith(old.rstrip("/") + "/"):
            rest = str(new.resolve()) + rest[len(old.rstrip("/")) :]
        return f"{prefix}{sep}{rest}"

    invocation["workdir"] = str(new.resolve())
    invocation["template"] = moved(invocation.get("template"))
    for key in ("models", "cli_models"):
        if isinstance(invocation.get(key), dict):
            invocation[key] = {k: moved(v) for k, v in invocation[key].items()}
    write_atomic(path, json.dumps(invocation, indent=2, ensure_ascii=False))
