"""Each iteration's artifacts are kept by the engine, through the real CLI, with a test
the observer runs that shapes ``run.artifacts`` against it: links named like the kept
copies (``0 -> <a directory outside>``, ``1 -> ..``, the run directory), a FIFO, a 40 MB
file, a fake ``run.json``, and looprun's own environment (an API key) printed into the JUnit report.
The engine must not follow, block or carry the secret: the outside directory stays
empty, ``run.json`` stays the engine's, and no kept file holds the key. Under bubblewrap
the test also tries to write the run directory and the kept copies directly, and cannot.
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from tests.support.cli import looprun
from tests.support.git_repos import git_repo

from looprun.journal.writer import MAX_KEPT_BYTES
from looprun.sandbox.bwrap import Bubblewrap

BWRAP_PROBLEM = Bubblewrap().problem()

PLANT = """\
import os, sys
from pathlib import Path

ARTS = Path(next(a for a in sys.argv if a.startswith("--junitxml=")).split("=", 1)[1]).parent
BIG = 40 * 1024 * 1024
OUTSIDE = Path(__file__).with_name("outside.txt").read_text().strip()


def _environs():
    # looprun's environment, as an unconfined test can read it: every ancestor's
    pid, seen = os.getpid(), []
    while pid > 1:
        try:
            seen.append(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return seen


def _plant():
    for name, target in (("0", OUTSIDE), ("1", "..")):
        if not os.path.lexists(ARTS / name):
            os.symlink(target, ARTS / name)
    if not (ARTS / "pipe").exists():
        os.mkfifo(ARTS / "pipe")
    (ARTS / "run.json").write_text('{"planted": true}')
    (ARTS / "authorized_keys").write_text("ssh-ed25519 planted\\n")
    with open(ARTS / "big.bin", "wb") as f:
        f.truncate(BIG)  # sparse: cheap to plant, not to copy whole


def _write_directly():
    # what the sandbox must refuse: the run directory and the kept copies themselves
    wrote = []
    for path in (ARTS.parent / "run.json", ARTS.parent / "kept" / "planted"):
        try:
            path.parent.mkdir(exist_ok=True)
            path.write_text('{"planted": true}')
            wrote.append(str(path))
        except OSError:
            pass
    return wrote


def test_plants():
    _plant()
    wrote = _write_directly() if Path("direct.txt").exists() else []
    print("ENVIRON", "\\n".join(_environs()))
    print("WROTE", wrote)
    assert not wrote
    assert False, "fails on purpose, so that the run iterates"
"""


def _template(sandbox: str) -> str:
    return f"""\
looprun: 1
name: kept
sandbox: {sandbox}
inputs:
  intent: {{type: string, required: true}}
act:
  prompt: "{{{{ task.goal }}}}"
observe:
  tests:
    run: >-
      python3 -m pytest -q -p no:cacheprovider -o junit_logging=all
      --junitxml={{{{ run.artifacts }}}}/junit.xml test_plant.py
    parser: junit
    file: "{{{{ run.artifacts }}}}/junit.xml"
exit: [tests.ok]
limits: {{max_iterations: 1}}
"""


@dataclass
class Kept:
    run_dir: Path
    outside: Path
    secret: str

    @property
    def junit(self) -> str:
        return (self.run_dir / "kept" / "1" / "junit.xml").read_text()


def _run(root: Path, sandbox: str, *, direct: bool) -> Kept:
    work, outside = root / "work", root / "outside"
    work.mkdir(parents=True)
    outside.mkdir()
    (work / "test_plant.py").write_text(PLANT)
    (work / "outside.txt").write_text(str(outside))
    if direct:
        (work / "direct.txt").write_text("try\n")
    git_repo(work)
    (root / "t.yaml").write_text(_template(sandbox))
    (root / "script.yaml").write_text(yaml.safe_dump([{"text": "done"}, {"text": "done"}]))
    secret = f"sk-proj-{uuid.uuid4().hex}"
    proc = looprun(
        "run", str(root / "t.yaml"), "--intent", "keep", "--workdir", str(work),
        "--model", f"script:{root / 'script.yaml'}", "--sandbox", sandbox, "--json",
        cwd=root, env={"OPENAI_API_KEY": secret},
    )  # fmt: skip
    assert proc.stdout.strip(), proc.stderr
    return Kept(Path(json.loads(proc.stdout)["run_dir"]), outside, secret)


def _assert_contained(kept: Kept) -> None:
    assert list(kept.outside.iterdir()) == []  # nothing followed the absolute link
    invocation = json.loads((kept.run_dir / "run.json").read_text())
    assert "planted" not in invocation and "template" in invocation  # the engine's own
    assert not (kept.run_dir / "authorized_keys").exists()  # nor the relative one
    for n in ("0", "1"):
        copies = kept.run_dir / "kept" / n
        assert stat.S_ISDIR(os.lstat(copies).st_mode)
        assert {p.name for p in copies.iterdir()} >= {"junit.xml", "run.json"}
        assert "pipe" not in {p.name for p in copies.iterdir()}  # a FIFO is no report
    big = (kept.run_dir / "kept" / "1" / "big.bin").read_bytes()
    assert len(big) < MAX_KEPT_BYTES + 200 and big.endswith(b"only the first 16777216 kept]\n")
    for path in (kept.run_dir / "kept").rglob("*"):
        if path.is_file():
            assert kept.secret not in path.read_text(errors="replace"), path


@pytest.fixture(scope="module")
def unconfined(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    return _run(tmp_path_factory.mktemp("kept-off"), "off", direct=False)


@pytest.fixture(scope="module")
def confined(tmp_path_factory: pytest.TempPathFactory) -> Kept:
    if BWRAP_PROBLEM is not None:
        pytest.skip(f"no working bubblewrap here: {BWRAP_PROBLEM}")
    return _run(tmp_path_factory.mktemp("kept-bwrap"), "required", direct=True)


def test_planted_links_and_fifo_do_not_steer_the_kept_copies_unconfined(unconfined: Kept) -> None:
    _assert_contained(unconfined)


def test_a_printed_api_key_is_redacted_in_the_kept_report(unconfined: Kept) -> None:
    assert "ENVIRON" in unconfined.junit  # the report did carry the test's output
    assert "[REDACTED]" in unconfined.junit  # where the key was: it was printed
    assert unconfined.secret not in unconfined.junit


def test_planted_links_do_not_steer_the_kept_copies_under_bubblewrap(confined: Kept) -> None:
    _assert_contained(confined)


def test_sandboxed_commands_cannot_write_the_run_dir_or_the_kept_copies(confined: Kept) -> None:
    assert "WROTE []" in confined.junit
    assert not (confined.run_dir / "kept" / "planted").exists()


SWAP = """\
import os, shutil, sys
from pathlib import Path

ARTS = Path(next(a for a in sys.argv if a.startswith("--junitxml=")).split("=", 1)[1]).parent


def test_swaps_the_artifacts_directory_for_a_link():
    if not ARTS.is_symlink():
        shutil.rmtree(ARTS)
        os.symlink(Path(__file__).with_name("outside.txt").read_text().strip(), ARTS)
"""


def test_artifacts_swapped_for_a_link_is_refused_not_followed(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "test_swap.py").write_text(SWAP)
    (work / "outside.txt").write_text(str(outside))
    git_repo(work)
    (tmp_path / "t.yaml").write_text(_template("off").replace("test_plant.py", "test_swap.py"))
    (tmp_path / "script.yaml").write_text(yaml.safe_dump([{"text": "done"}]))
    proc = looprun(
        "run", str(tmp_path / "t.yaml"), "--intent", "keep", "--workdir", str(work),
        "--model", f"script:{tmp_path / 'script.yaml'}", "--sandbox", "off",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "artifacts: is a symbolic link" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    # pytest's own report went through the link (the command may write there unconfined);
    # nothing the engine writes did: no output log, no kept copies
    assert sorted(p.name for p in outside.iterdir()) == ["junit.xml"]


def test_a_bundle_carries_the_kept_copies_not_what_commands_wrote(
    unconfined: Kept, tmp_path: Path
) -> None:
    work = unconfined.run_dir.parents[2]
    out = tmp_path / "run.looprun"
    proc = looprun("bundle", unconfined.run_dir.name, "-o", str(out), cwd=work)
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        members = {m.name: m for m in tar.getmembers()}
        kept = "run/kept/1/junit.xml"
        assert kept in members
        assert not [n for n in members if n.startswith("run/artifacts")]
        for member in members.values():
            if member.isfile():
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                assert unconfined.secret.encode() not in data, member.name
