"""What a resume may take from a run's recorded ``run.json``.

``run.json`` is not the engine's to trust: a bundle's comes from another job's upload,
and a local one sits inside the workdir, where a command the run ran may have rewritten
it (without the OS sandbox, or under Landlock). A local resume therefore takes the
invocation the engine sealed in git (:mod:`looprun.journal.sealed`) and refuses a
``run.json`` that differs from it, or a template file that changed since. Even then, the
choices that decide what runs and where a key goes are taken from the resuming command
line; a recorded choice is used only when it is no weaker (sandbox) or names the server
the resuming side already names (base URL). A bundle's template, model files, executor,
sync remote and commit flags must in addition be confirmed or stay inside this clone.
Every choice is shown before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import UsageError
from looprun.journal import sealed
from looprun.system.resources import templates_dir
from looprun.system.safefs import STATE_DIR_NAME
from looprun.template.deps import Deps
from looprun.template.sharing.refs import is_remote
from looprun.template.valid_cache import file_digest

STRENGTH = {"off": 0, "auto": 1, "required": 2}


@valueclass
class ResumeChoices:
    """What the resuming command line said; ``None``: it did not say."""

    template: str | None = None
    sandbox: str | None = None
    base_url: str | None = None
    executor: str | None = None
    sync_remote: str | None = None
    commit: bool = False
    no_verify: bool = False


def sandbox_mode(recorded: Any, template_mode: str, cli: str | None, run_id: str) -> str | None:
    """The sandbox mode to resume with (``None``: the template's). A recorded mode weaker
    than the template's is refused unless the command line names one."""
    if cli is not None:
        return cli
    if recorded is None:
        return None
    if recorded not in STRENGTH:
        raise UsageError(f"run {run_id}: run.json records an unknown sandbox mode {recorded!r}")
    if STRENGTH[recorded] < STRENGTH.get(template_mode, 1):
        raise UsageError(
            f"run {run_id}: run.json asks sandbox {recorded!r}, weaker than the template's "
            f"{template_mode!r}; a file in the workdir is not trusted to lower it. Resume with "
            f"--sandbox {recorded} to run so, or --sandbox {template_mode}"
        )
    return str(recorded)


def base_url(recorded: Any, cli: str | None, env: Mapping[str, str], run_id: str) -> str | None:
    """The model server to resume with. A recorded ``--base-url`` is used only when the
    resuming side names the same one (``--base-url`` or ``LOOPRUN_BASE_URL``): the user's
    API key goes to that server."""
    if cli is not None:
        return cli
    if not recorded:
        return None
    named = env.get("LOOPRUN_BASE_URL")
    if str(recorded).rstrip("/") == (named or "").rstrip("/"):
        return str(recorded)
    raise UsageError(
        f"run {run_id}: run.json names the model server {str(recorded)[:200]!r}, which this "
        f"command does not ({'LOOPRUN_BASE_URL is ' + repr(named) if named else 'no --base-url'}); "
        "your API key is sent only to a server you name: resume with --base-url "
        f"{str(recorded)[:200]} to use it, or --base-url URL for another"
    )


def _inside(value: str, workdir: Path) -> bool:
    """True for a path in the clone's own files, not in its state directory (where the
    bundle itself was just unpacked)."""
    path = Path(os.path.realpath(value))
    return path.is_relative_to(workdir) and not path.is_relative_to(workdir / STATE_DIR_NAME)


def _file_ref(ref: str) -> str | None:
    """The file a template or model reference names, if it names one."""
    if ref.startswith("script:"):
        return ref[len("script:") :]
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        return ref
    return None


def vet_bundled(
    invocation: Mapping[str, Any],
    workdir: Path,
    choices: ResumeChoices,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """A bundle's invocation with what it may not decide replaced by the command line's
    choices; shown on stderr. Files it names must be in this clone."""
    workdir = Path(os.path.realpath(workdir))
    out = dict(invocation)
    if choices.template is not None:  # its digest is taken when the resume loads it
        out["template"], out["template_sha256"] = choices.template, None
    if not isinstance(out.get("template"), str) or not out["template"]:
        raise UsageError("the bundle's run.json names no template; resume with --template")
    refs = [] if choices.template is not None else [("template", out.get("template"))]
    for key in ("models", "cli_models"):
        if isinstance(out.get(key), dict):
            refs += [(f"{key}.{role}", v) for role, v in out[key].items()]
    for where, ref in refs:
        if ref is None:
            continue
        path = _file_ref(str(ref))
        if path is not None and not _inside(path, workdir):
            raise UsageError(
                f"the bundle's {where} {str(ref)[:200]!r} is outside this clone ({workdir}); "
                "a bundle may only name files of the repository it is resumed in"
                + (": name the template with --template" if where == "template" else "")
            )
    say(
        f"bundle recorded: template {out.get('template')}, models {out.get('models') or {}}, "
        f"sandbox {out.get('sandbox') or 'the template’s'}, "
        f"executor {out.get('executor') or 'local'}, commit {bool(out.get('commit'))}"
    )
    for key, flag in (("commit", "--commit"), ("no_verify", "--no-verify")):
        if out.get(key) and not getattr(choices, key):
            say(f"the bundle asked {flag}; not honoured: pass {flag} to resume with it")
    out["commit"] = choices.commit
    out["no_verify"] = choices.no_verify
    if (out.get("executor") or "local") != "local" and choices.executor is None:
        say(f"the bundle asked --executor {out['executor']}; sub-loops run here (pass --executor)")
    out["executor"] = choices.executor or "local"
    out["sync_remote"] = choices.sync_remote
    return out


def against_seal(
    on_disk: Mapping[str, Any], kept: Mapping[str, Any] | None, where: Path, run_id: str
) -> dict[str, Any]:
    """The invocation the engine sealed for ``run_id``, after checking that ``run.json``
    (``on_disk``, at ``where``) still says the same."""
    name = sealed.ref(run_id)
    if kept is None:
        raise UsageError(
            f"{where}: run {run_id} has no sealed invocation ({name}) to check run.json "
            "against (started by an older looprun, or the ref was deleted); a file in the "
            "workdir is not trusted alone: start the run again"
        )
    changed = sorted(k for k in {*on_disk, *kept} if on_disk.get(k) != kept.get(k))
    if changed:
        said = "; ".join(
            f"{k} is {_brief(on_disk.get(k))}, the run recorded {_brief(kept.get(k))}"
            for k in changed[:5]
        )
        raise UsageError(
            f"{where}: run.json differs from the invocation the run recorded in {name} "
            f"(rewritten by a command?): {said}. Nothing was resumed; restore it with "
            f"`git cat-file blob {name} > {where}`, or start a new run"
        )
    return dict(kept)


def template_unchanged(
    invocation: Mapping[str, Any], source: str, named: bool, run_id: str
) -> dict[str, Any]:
    """The invocation with the digest of the template file it goes on with. A file that
    changed since the run recorded it is refused unless the command line named it."""
    digest = file_digest(source)
    recorded = invocation.get("template_sha256")
    if not named and recorded and digest != recorded:
        raise UsageError(
            f"{source}: the template changed since run {run_id} started (sha256 "
            f"{str(recorded)[:12]}, now {(digest or 'unreadable')[:12]}); resume with "
            f"--template {invocation.get('template')} to go on with it as it is now"
        )
    return {**invocation, "template_sha256": digest}


BUILTIN = "looprun:"  # a built-in template file, named apart from where it is installed


def built_from(built: Deps, workdir: Path) -> dict[str, str]:
    """Every file a template was composed from (its own, ``extends`` parents, ``include``
    fragments, sub-loops, ``looprun.lock``, remote files at their commits) with its
    sha256. A path in the workdir is kept relative to it, and a built-in one relative to
    the built-in templates, so a bundle resumed in another clone, or by a looprun
    installed elsewhere, checks that copy; a remote file's value also names its commit."""
    out = dict(built.remote)
    out.update((_name(name, workdir), digest) for name, digest in built.files.items())
    return dict(sorted(out.items()))


def _name(file: str, workdir: Path) -> str:
    """How the run records a local file: relative to the workdir, or to the built-in
    templates, else its absolute path."""
    path = Path(os.path.realpath(file))
    for root, prefix in ((workdir, ""), (templates_dir(), BUILTIN)):
        real = Path(os.path.realpath(root))
        if path.is_relative_to(real):
            return prefix + path.relative_to(real).as_posix()
    return file


def _where(name: str, root: Path) -> Path | None:
    """The file a recorded name stands for (``None``: a remote file, checked as it is
    read again through the lock)."""
    if is_remote(name):
        return None
    if name.startswith(BUILTIN):
        return templates_dir() / name.removeprefix(BUILTIN)
    return root / name


def _regular_digest(path: Path) -> str | None:
    """The sha256 of a regular file (``None``: gone, unreadable, or a FIFO or device put
    in its place, which is never read: it could block the resume or never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return hashlib.sha256(fh.read()).hexdigest()


def _order(name: str) -> tuple[int, str]:
    """Files of the workdir first, remote files last: the refusal names the file to
    restore (``looprun.lock`` rather than the remote file it moved)."""
    return (2 if is_remote(name) else 1 if name.startswith((BUILTIN, "/")) else 0, name)


def _changed(recorded: Mapping[str, Any], now: Mapping[str, str | None]) -> list[str]:
    return sorted((n for n in {*recorded, *now} if recorded.get(n) != now.get(n)), key=_order)


def built_unchanged(invocation: Mapping[str, Any], workdir: Path, named: bool, run_id: str) -> None:
    """Refuse, before the template is loaded again, a file it was composed from that
    changed since the run started: a command the run ran may have rewritten a fragment or
    moved the lock to another commit. ``named`` (``--template`` given) accepts them."""
    recorded = invocation.get("template_files")
    if named or not isinstance(recorded, dict):
        return
    now: dict[str, str | None] = {}
    for name, digest in recorded.items():
        where = _where(str(name), Path(workdir))
        now[name] = digest if where is None else _regular_digest(where)
    _refuse_changed(recorded, now, invocation, run_id, workdir)


def built_same(
    invocation: Mapping[str, Any],
    files: Mapping[str, str],
    named: bool,
    run_id: str,
    workdir: Path,
) -> None:
    """Refuse a template that, loaded again, was composed from other files than the run
    recorded (a file it now reads that it did not then: ``extends: base`` finding a
    ``base.yaml`` created next to it, a remote file at another commit)."""
    recorded = invocation.get("template_files")
    if named or not isinstance(recorded, dict):
        return
    _refuse_changed(recorded, files, invocation, run_id, workdir)


def held_to(recorded: Any, files: Mapping[str, str], what: str) -> None:
    """Refuse a sub-loop's template read again from disk (each sub-loop loads its own)
    when one of its files is not as the run recorded it: a command run since the run
    started or resumed (by an earlier sub-loop, say) may have rewritten it. ``recorded``
    holds every file of the outer template, so only the files read now are compared."""
    if not isinstance(recorded, dict):
        return  # a run recorded by an older looprun: nothing to hold it to
    changed = sorted((n for n in files if recorded.get(n) != files[n]), key=_order)
    if changed:
        raise UsageError(
            f"{changed[0]}: {what} was built from this file, which "
            f"{_what(recorded.get(changed[0]), files[changed[0]])} since the run started"
            f"{_more(changed)}; the sub-loop was not started (a run goes on with the files it "
            "started with, or was last resumed with)"
        )


def _short(digest: Any) -> str:
    """A recorded digest, shortened (a remote one: its commit and content digest)."""
    text = str(digest)
    content, at, commit = text.partition("@")
    content = content.removeprefix("sha256:")
    return f"commit {commit[:12]}, sha256 {content[:12]}" if at else f"sha256 {content[:12]}"


def _what(was: Any, is_: Any) -> str:
    if was is None:
        return "is new"
    if is_ is None:
        return "is gone (or is no longer a regular file)"
    return f"changed ({_short(was)}, now {_short(is_)})"


def _more(changed: list[str]) -> str:
    return f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""


def _refuse_changed(
    recorded: Mapping[str, Any],
    now: Mapping[str, str | None],
    invocation: Mapping[str, Any],
    run_id: str,
    workdir: Path,
) -> None:
    changed = _changed(recorded, now)
    if not changed:
        return
    name, template = changed[0], str(invocation.get("template"))
    what = _what(recorded.get(name), now.get(name))
    said = (
        f"the template changed since run {run_id} started ({what.removeprefix('changed ')})"
        if name == _name(template, workdir)  # its own file
        else f"the template of run {run_id} was built from this file, which {what} since "
        "the run started"
    )
    raise UsageError(
        f"{name}: {said}{_more(changed)}; nothing was resumed. Restore it, or resume with "
        f"--template {template} to go on with the files as they are now"
    )


def shown(invocation: Mapping[str, Any]) -> str:
    """Every choice a resume goes on with, on one line, before anything runs."""
    models = {k: v for k, v in (invocation.get("models") or {}).items() if v}
    digest = str(invocation.get("template_sha256") or "")[:12] or "unknown"
    return (
        f"resuming with: template {invocation.get('template')} (sha256 {digest}), "
        f"models {_brief(models)}, sandbox {invocation.get('sandbox') or 'the template’s'}, "
        f"base URL {invocation.get('base_url') or 'none'}, "
        f"executor {invocation.get('executor') or 'local'}, "
        f"sync remote {invocation.get('sync_remote') or 'none'}, "
        f"commit {'yes' if invocation.get('commit') else 'no'}"
        f"{' (--no-verify)' if invocation.get('no_verify') else ''}, "
        f"intent {_brief(invocation.get('intent') or '')}, "
        f"sets {_brief(invocation.get('sets') or {})}"
    )


def _brief(value: Any) -> str:
    if value is None:
        return "unset"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
