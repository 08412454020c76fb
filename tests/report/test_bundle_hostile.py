"""A bundle is an artifact another job uploaded: whatever it says, resuming it in a
second real clone writes only its own run directory and refs, and runs only what this
clone and its command line choose."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.report.test_bundle import _git, _origin
from tests.support.cli import looprun
from tests.support.fake_provider import FakeProvider, openai_reply

KEY = "sk-user-secret-4242"
Members = dict[str, tuple[tarfile.TarInfo, bytes | None]]


class Genuine:
    """A run paused for approval in one clone, bundled: the material of every crafted
    bundle below, made once."""

    def __init__(self, root: Path) -> None:
        self.origin = _origin(root)
        self.first = root / "job1"
        _git(root, "clone", "-q", str(self.origin), str(self.first))
        paused = looprun(
            "loops/mini.yaml", "--intent", "add() subtracts",
            "--model", "script:loops/script.yaml", "--json", cwd=self.first,
        )  # fmt: skip
        assert paused.returncode == 5, paused.stderr
        self.run_id: str = json.loads(paused.stdout)["run_id"]
        self.bundle = root / "genuine.looprun"
        made = looprun("bundle", self.run_id, "-o", str(self.bundle), cwd=self.first)
        assert made.returncode == 0, made.stderr
        self.root = root
        self.clones = 0

    def clone(self) -> Path:
        """A fresh second clone, at the revision the run started from."""
        self.clones += 1
        second = self.root / f"job2-{self.clones}"
        _git(self.root, "clone", "-q", str(self.origin), str(second))
        return second

    def members(self) -> Members:
        out: Members = {}
        with tarfile.open(self.bundle) as tar:
            for info in tar:
                data = tar.extractfile(info).read() if info.isreg() else None  # type: ignore[union-attr]
                out[info.name] = (info, data)
        return out

    def craft(
        self,
        name: str,
        manifest: Callable[[dict[str, Any]], None] | None = None,
        run_json: Callable[[dict[str, Any]], None] | None = None,
        extra: Callable[[tarfile.TarFile], None] | None = None,
        members: Members | None = None,
    ) -> Path:
        """The genuine bundle with its manifest or run.json edited, or members added."""
        members = members or self.members()
        for key, edit in (("manifest.json", manifest), ("run/run.json", run_json)):
            if edit is not None:
                info, data = members[key]
                doc = json.loads(data or b"{}")
                edit(doc)
                members[key] = (info, json.dumps(doc).encode())
        path = self.root / name
        with tarfile.open(path, "w:gz") as tar:
            for info, data in members.values():
                if data is not None:
                    info.size = len(data)
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
            if extra is not None:
                extra(tar)
        return path


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Genuine:
    return Genuine(tmp_path_factory.mktemp("bundles"))


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def _nothing_unpacked(second: Path) -> None:
    assert not (second / ".looprun" / "runs").exists() or not any(
        (second / ".looprun" / "runs").iterdir()
    )
    assert not _git(second, "for-each-ref", "refs/looprun/")


def test_a_run_id_that_is_a_path_is_refused(genuine: Genuine) -> None:
    outside = genuine.root / "landed-outside"
    for rid, landing in (("../../x", "x"), (str(outside), None)):
        second = genuine.clone()
        bundle = genuine.craft("id.looprun", manifest=lambda m, r=rid: m.update(run_id=r))
        proc = looprun("resume", "--bundle", str(bundle), "--approve", cwd=second)
        _refused(proc, "is not a run id", "nothing was unpacked")
        assert not outside.exists()
        if landing:
            assert not (second / landing).exists()
        _nothing_unpacked(second)


def test_a_link_member_is_refused(genuine: Genuine) -> None:
    def link(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("run/artifacts/notes")
        # a link that stays inside the bundle: the tar module's own "data" filter allows it
        info.type, info.linkname = tarfile.SYMTYPE, "../state.json"
        tar.addfile(info)

    second = genuine.clone()
    proc = looprun("resume", "--bundle", str(genuine.craft("l.looprun", extra=link)), cwd=second)
    _refused(proc, "run/artifacts/notes", "is a link")
    _nothing_unpacked(second)


def test_a_member_that_unpacks_past_the_bound_is_refused_unwritten(genuine: Genuine) -> None:
    class Zeros:
        """``size`` zero bytes, read without holding them: they compress to almost nothing."""

        def __init__(self, size: int) -> None:
            self.left = size

        def read(self, n: int = -1) -> bytes:
            n = self.left if n < 0 else min(n, self.left)
            self.left -= n
            return bytes(n)

    size = 300 * 2**20

    def bomb(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo("run/artifacts/0/big.log")
        info.size = size
        tar.addfile(info, Zeros(size))  # type: ignore[arg-type]

    bundle = genuine.craft("bomb.looprun", extra=bomb)
    assert bundle.stat().st_size < 2 * 2**20  # a small file ...
    second = genuine.clone()
    proc = looprun("resume", "--bundle", str(bundle), cwd=second)
    _refused(proc, "unpacks to more than 256 MiB")  # ... refused before 300 MiB are written
    _nothing_unpacked(second)


def test_refs_of_another_run_are_refused_and_left_where_they_are(genuine: Genuine) -> None:
    other = "20250101-000000-abcdef"
    second = genuine.clone()
    head = _git(second, "rev-parse", "HEAD").strip()
    _git(second, "update-ref", f"refs/looprun/{other}/0", head)  # another run's checkpoint
    # the first clone's bundle carries that ref too, pointing at one of its checkpoints
    ours = _git(genuine.first, "for-each-ref", "--format=%(refname)", "refs/looprun/").split()
    checkpoint = _git(genuine.first, "rev-parse", f"refs/looprun/{genuine.run_id}/1").strip()
    _git(genuine.first, "update-ref", f"refs/looprun/{other}/0", checkpoint)
    try:
        refs_file = genuine.root / "refs.bundle"
        spec = "\n".join([*ours, f"refs/looprun/{other}/0", f"^{head}"])
        subprocess.run(
            ["git", "bundle", "create", "-q", str(refs_file), "--stdin"],
            cwd=genuine.first, input=spec, text=True, check=True,
        )  # fmt: skip
    finally:
        _git(genuine.first, "update-ref", "-d", f"refs/looprun/{other}/0")
    members = genuine.members()
    info, _ = members["refs.bundle"]
    members["refs.bundle"] = (info, refs_file.read_bytes())
    bundle = genuine.craft(
        "refs.looprun",
        members=members,
        manifest=lambda m: m["refs"].append(f"refs/looprun/{other}/0"),
    )
    proc = looprun("resume", "--bundle", str(bundle), "--approve", cwd=second)
    _refused(proc, f"ref 'refs/looprun/{other}/0' is not one of run {genuine.run_id}")
    assert _git(second, "rev-parse", f"refs/looprun/{other}/0").strip() == head
    assert not (second / ".looprun" / "runs").exists()


def test_a_bundled_sandbox_off_is_not_honoured(genuine: Genuine) -> None:
    second = genuine.clone()
    bundle = genuine.craft("off.looprun", run_json=lambda inv: inv.update(sandbox="off"))
    proc = looprun("resume", "--bundle", str(bundle), "--approve", cwd=second)
    _refused(proc, "asks sandbox 'off', weaker than the template's 'auto'", "--sandbox off")
    assert (second / "src" / "calc.py").read_text().endswith("return a - b\n")  # nothing ran
    # the user's own choice on the command line is what decides
    resumed = looprun(
        "resume", genuine.run_id, "--approve", "--sandbox", "auto", "--json", cwd=second
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"
    events = [
        json.loads(line)
        for line in (second / ".looprun" / "runs" / genuine.run_id / "journal.jsonl").open()
    ]
    assert [e["sandbox"]["mode"] for e in events if e["event"] == "resumed"] == ["auto"]


def test_a_template_the_bundle_ships_or_points_outside_is_refused(genuine: Genuine) -> None:
    evil = (genuine.root / "evil.yaml").resolve()
    evil.write_text((genuine.first / "loops" / "mini.yaml").read_text())
    shipped = f"{genuine.first.resolve()}/.looprun/runs/{genuine.run_id}/evil.yaml"
    for template in (str(evil), shipped):
        second = genuine.clone()
        bundle = genuine.craft("t.looprun", run_json=lambda inv, t=template: inv.update(template=t))
        proc = looprun("resume", "--bundle", str(bundle), "--approve", cwd=second)
        _refused(proc, "the bundle's template", "is outside this clone")
        _nothing_unpacked(second)
    # the template this clone holds, named on the command line, goes on with the run
    resumed = looprun(
        "resume", "--bundle", str(bundle), "--approve", "--json",
        "--template", "loops/mini.yaml", cwd=second,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["outcome"] == "done"


@pytest.fixture
def servers() -> Iterator[tuple[FakeProvider, FakeProvider]]:
    """The attacker's server (named by the bundle) and the user's own."""
    with FakeProvider() as attacker, FakeProvider() as own:
        yield attacker, own


def _openai(url: str) -> Callable[[dict[str, Any]], None]:
    def edit(inv: dict[str, Any]) -> None:
        inv.update(base_url=url, models={"act": "openai:gpt-4o-mini"})
        inv["cli_models"] = {"act": "openai:gpt-4o-mini", "plan": None}

    return edit


def test_the_key_never_reaches_a_server_the_bundle_names(
    genuine: Genuine, servers: tuple[FakeProvider, FakeProvider]
) -> None:
    attacker, own = servers
    second = genuine.clone()
    bundle = genuine.craft("url.looprun", run_json=_openai(attacker.openai_url))
    env = {"OPENAI_API_KEY": KEY}
    proc = looprun("resume", "--bundle", str(bundle), "--approve", cwd=second, env=env)
    _refused(proc, attacker.openai_url, f"--base-url {attacker.openai_url}")
    assert attacker.requests == []
    # the run continues against the server this command names, with the key
    own.push(
        openai_reply(
            tool_calls=[("edit_file", {"path": "src/calc.py", "old": "a * b", "new": "a + b"})]
        ),
        openai_reply("Fixed."),
    )
    resumed = looprun(
        "resume", genuine.run_id, "--approve", "--base-url", own.openai_url, "--json",
        cwd=second, env=env,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert attacker.requests == []
    assert own.requests and all(
        r.headers.get("authorization") == f"Bearer {KEY}" for r in own.requests
    )
    assert (second / "src" / "calc.py").read_text().endswith("return a + b\n")


def test_a_local_run_json_rewritten_by_a_command_does_not_decide(
    genuine: Genuine, servers: tuple[FakeProvider, FakeProvider]
) -> None:
    """The run directory is inside the workdir, writable by commands without bubblewrap:
    what a command wrote into run.json is held to the same rules."""
    attacker, _ = servers
    first = genuine.clone()
    paused = looprun(
        "loops/mini.yaml", "--intent", "add() subtracts",
        "--model", "script:loops/script.yaml", "--json", cwd=first,
    )  # fmt: skip
    run_id = json.loads(paused.stdout)["run_id"]
    path = first / ".looprun" / "runs" / run_id / "run.json"
    genuine_json = json.loads(path.read_text())
    path.write_text(json.dumps({**genuine_json, "sandbox": "off"}))
    sealed = "run.json differs from the invocation the run recorded in refs/looprun-sealed/"
    _refused(looprun("resume", run_id, "--approve", cwd=first), sealed, 'sandbox is "off"')
    tampered = {**genuine_json}
    _openai(attacker.openai_url)(tampered)
    path.write_text(json.dumps(tampered))
    proc = looprun("resume", run_id, "--approve", cwd=first, env={"OPENAI_API_KEY": KEY})
    _refused(proc, sealed, f'base_url is "{attacker.openai_url}"')
    assert attacker.requests == []
