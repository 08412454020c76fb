"""``looprun diff`` composes a revision only from that revision's git objects: an
``extends``/``include`` that names an absolute path, a path out of the repository or a
symbolic link is a located problem (exit 2), and the host file it names is never read."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

SECRET = "host-secret-5b2e9c"


def _secret_fragment(tmp_path: Path) -> Path:
    """A fragment outside the repository that would validate, so only where it is may stop it."""
    outside = tmp_path / "outside" / "pack.yaml"
    outside.parent.mkdir()
    outside.write_text(
        f"looprun: 1\ndescription: {SECRET}\nobserve:\n  {SECRET.replace('-', '_')}:\n"
        f"    run: echo {SECRET}\n    parser: exit_code\n"
    )
    return outside


def _commit(repo: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e.org"}  # fmt: skip
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "next"], cwd=repo, check=True, env=env)


def _repo(tmp_path: Path, key: str, ref: str, *, link_to: Path | None = None) -> Path:
    repo = tmp_path / "repo"
    (repo / "loops").mkdir(parents=True)
    if link_to is not None:
        (repo / "loops" / "linked.yaml").symlink_to(link_to)
    value = f"[{ref}]" if key == "include" else ref
    (repo / "loops" / "team.yaml").write_text(
        f"looprun: 1\nname: team\nextends: bugfix\n{key}: {value}\n"
        if key == "include"
        else f"looprun: 1\nname: team\n{key}: {value}\n"
    )
    git_repo(repo)
    # the working tree moves on: the old side is only in git
    (repo / "loops" / "team.yaml").write_text("looprun: 1\nname: team\nextends: bugfix\n")
    return repo


@pytest.mark.parametrize("key", ["extends", "include"])
@pytest.mark.parametrize("form", ["absolute", "outside", "link"])
@pytest.mark.parametrize("sides", ["rev-and-file", "two-revs"])
def test_a_revision_never_reads_the_host(tmp_path: Path, key: str, form: str, sides: str) -> None:
    secret = _secret_fragment(tmp_path)
    if form == "absolute":
        repo = _repo(tmp_path, key, str(secret))
    elif form == "outside":
        repo = _repo(tmp_path, key, "../../outside/pack.yaml")
    else:
        repo = _repo(tmp_path, key, "linked.yaml", link_to=secret)
    if sides == "two-revs":
        _commit(repo)
        args = ["HEAD~1", "HEAD", "--", "loops/team.yaml"]
    else:
        args = ["HEAD", "--", "loops/team.yaml"]
    proc = looprun("diff", *args, cwd=repo)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert SECRET not in proc.stdout + proc.stderr
    assert SECRET.replace("-", "_") not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = 4 if key == "include" else 3
    problem = {"absolute": "absolute path", "outside": "outside the repository",
               "link": "symbolic link"}[form]  # fmt: skip
    at = "HEAD~1" if sides == "two-revs" else "HEAD"
    assert re.search(
        rf"{re.escape(at)}:loops/team\.yaml:{line}:\d+: {key}: .*{problem}", proc.stderr
    ), proc.stderr


def test_a_path_inside_the_revision_still_composes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "loops" / "packs").mkdir(parents=True)
    (repo / "loops" / "packs" / "obs.yaml").write_text(
        "looprun: 1\nobserve:\n  extra_check:\n    run: 'true'\n    parser: exit_code\n"
    )
    (repo / "loops" / "team.yaml").write_text(
        "looprun: 1\nname: team\nextends: bugfix\ninclude: [packs/obs.yaml]\n"
    )
    git_repo(repo)
    proc = looprun("diff", "HEAD", "--", "loops/team.yaml", cwd=repo)
    assert proc.returncode == 0, proc.stderr
