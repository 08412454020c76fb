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
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError, UsageError
from looprun.journal import sealed
from looprun.journal.read import load_state
from looprun.journal.runs import find_run, is_run_id, runs_root
from looprun.system.atomic import write_atomic
from looprun.system.safefs import checked_dir, state_dir
from looprun.workspace.git import Git

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
    state = load_state(run_dir)
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


# A bundle is input from elsewhere (an artifact another job uploaded): what it unpacks to
# is bounded, and each member must be a plain file or directory of the run.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 50_000
_CHUNK = 1 << 20
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _refuse(bundle: Path, problem: str) -> UsageError:
    return UsageError(f"--bundle {bundle}: {problem}; nothing was unpacked")


def _member_parts(bundle: Path, info: tarfile.TarInfo) -> tuple[str, ...]:
    """The path of a member as parts, refused unless it is ``manifest.json``,
    ``refs.bundle`` or inside ``run/``, with no absolute path, ``..`` or empty part."""
    name = info.name
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if name.startswith("/") or "\\" in name or ".." in parts or not parts:
        raise _refuse(bundle, f"member {name!r} is outside the bundled run")
    if parts[0] not in ("manifest.json", "refs.bundle", "run") or (
        len(parts) > 1 and parts[0] != "run"
    ):
        raise _refuse(bundle, f"member {name!r} is outside the bundled run")
    if not (info.isreg() or info.isdir()):
        kind = "a link" if info.issym() or info.islnk() else "a device or special file"
        raise _refuse(bundle, f"member {name!r} is {kind}; a bundle holds only files")
    top_file = parts in (("manifest.json",), ("refs.bundle",))
    if (top_file and not info.isreg()) or (parts == ("run",) and not info.isdir()):
        raise _refuse(bundle, f"member {name!r} has the wrong type")
    return parts


def _unpack(bundle: Path, root: Path) -> None:
    """Extract ``bundle`` into the empty directory ``root``, checking each member before
    a byte of it is written and bounding the count and the total size."""
    total = 0
    try:
        with tarfile.open(bundle, mode="r:gz") as tar:
            for count, info in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise _refuse(bundle, f"more than {MAX_MEMBERS} members")
                parts = _member_parts(bundle, info)
                total += info.size
                if total > MAX_UNPACKED_BYTES:
                    raise _refuse(bundle, f"unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MiB")
                dest = root.joinpath(*parts)
                if info.isdir():
                    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                source = tar.extractfile(info)
                if source is None:
                    raise _refuse(bundle, f"member {info.name!r} cannot be read")
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                with os.fdopen(os.open(dest, flags, 0o600), "wb") as out:
                    while chunk := source.read(_CHUNK):
                        out.write(chunk)
    except FileExistsError as exc:
        raise _refuse(bundle, f"member {exc.filename} appears twice") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UsageError(f"--bundle {bundle}: not a looprun bundle ({exc})") from None


def _own_refs(bundle: Path, manifest: dict[str, Any], rid: str) -> list[str]:
    """The refs the bundle may bring: the run's own and its sub-runs' checkpoint refs, and
    base anchors (named by a tree id). Anything else is another run's, refused."""
    refs = manifest.get("refs") or []
    if not isinstance(refs, list):
        raise _refuse(bundle, "its manifest's refs are not a list")
    own: list[str] = []
    for ref in refs:
        ref = str(ref)
        name = ref[len(PREFIX) :] if ref.startswith(PREFIX) else ""
        head, _, rest = name.partition("/")
        base = head == "base" and _OBJECT_ID.fullmatch(rest) is not None
        run = rest and (head == rid or head.startswith(f"{rid}."))
        if not (base or run) or ".." in ref or any(c in ref for c in " ~^:?*[\\\x7f"):
            raise _refuse(bundle, f"ref {ref!r} is not one of run {rid}'s checkpoint refs")
        own.append(ref)
    return own


Vet = Callable[[dict[str, Any]], dict[str, Any]]


def import_bundle(workdir: Path, bundle: Path, vet: Vet | None = None) -> str:
    """Unpack a bundle into this clone: fetch its refs, place its run directory (paths
    inside the old clone mapped to this one). Returns the run id. ``vet`` rewrites (or
    refuses, raising) the bundle's ``run.json`` before anything lands in the clone.

    Everything is checked in a private temporary directory first; the run directory
    appears under ``.looprun/runs`` in one rename, or not at all."""
    git = _repo(workdir)
    if not bundle.is_file():
        raise UsageError(f"--bundle {bundle}: no such file")
    with tempfile.TemporaryDirectory(prefix="looprun-unbundle-") as tmp:
        root = Path(tmp)
        _unpack(bundle, root)
        manifest = _load(root / "manifest.json")
        if manifest.get("format") != FORMAT or not (root / "run").is_dir():
            raise UsageError(f"--bundle {bundle}: not a looprun bundle (no manifest)")
        rid = manifest.get("run_id")
        if not is_run_id(rid):
            raise _refuse(bundle, f"its run id {str(rid)[:80]!r} is not a run id")
        assert isinstance(rid, str)
        runs = runs_root(workdir)
        target = runs / rid
        if target.exists() or target.is_symlink():
            raise UsageError(
                f"run {rid} is already in {workdir}: continue it with `looprun resume {rid}`"
            )
        refs = _own_refs(bundle, manifest, rid)
        requires = manifest.get("requires")
        if requires:
            if not isinstance(requires, str) or not _OBJECT_ID.fullmatch(requires):
                raise _refuse(bundle, f"its start commit {str(requires)[:80]!r} is no commit id")
            code, _, _ = git.run_status("cat-file", "-e", f"{requires}^{{commit}}")
            if code != 0:
                raise LooprunError(
                    f"--bundle {bundle}: this clone lacks commit {requires[:12]}, where run "
                    f"{rid} started; fetch or check it out first"
                )
        text = _remap_paths(root / "run", str(manifest.get("workdir") or ""), workdir, vet)
        staging = Path(tempfile.mkdtemp(prefix="unbundle-", dir=state_dir(workdir)))
        try:
            shutil.copytree(root / "run", staging / rid, symlinks=True)
            _fetch(git, root / "refs.bundle", refs, rid)
            sealed.seal(git, rid, text)  # what this clone vetted, not what the bundle said
            checked_dir(runs)
            os.rename(staging / rid, target)  # fails on a non-empty target: nothing replaced
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return rid


def _fetch(git: Git, refs_file: Path, refs: list[str], rid: str) -> None:
    """Fetch the run's refs. Its own (which no other run may hold) are replaced; a base
    anchor that this clone already has is left as it is, whatever the bundle says."""
    have = set(git.run("for-each-ref", "--format=%(refname)", PREFIX).split())
    spec = [f"+{r}:{r}" for r in refs if not r.startswith(f"{PREFIX}base/")]
    spec += [f"{r}:{r}" for r in refs if r.startswith(f"{PREFIX}base/") and r not in have]
    if spec:
        git.run("fetch", "-q", "--no-write-fetch-head", str(refs_file), *spec)


def _remap_paths(run_dir: Path, old: str, new: Path, vet: Vet | None) -> str:
    """``run.json`` names the old clone's workdir and, often, a template or a scripted
    model inside it: point them at the same files in this clone. Returns the text
    written."""
    path = run_dir / "run.json"
    invocation = _load(path)
    if not invocation:
        raise UsageError(f"{path.name}: the bundled run has no readable run.json")

    def moved(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        prefix, sep, rest = value.partition(":") if value.startswith("script:") else ("", "", value)
        if rest == old or rest.startswith(old.rstrip("/") + "/"):
            rest = str(new.resolve()) + rest[len(old.rstrip("/")) :]
        return f"{prefix}{sep}{rest}"

    invocation["workdir"] = str(new.resolve())
    if old:
        invocation["template"] = moved(invocation.get("template"))
        for key in ("models", "cli_models"):
            if isinstance(invocation.get(key), dict):
                invocation[key] = {k: moved(v) for k, v in invocation[key].items()}
    if vet is not None:
        invocation = vet(invocation)
    text = json.dumps(invocation, indent=2, ensure_ascii=False)
    write_atomic(path, text)
    return text
