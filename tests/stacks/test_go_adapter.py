"""The Go adapter through the real check tree and the real toolchain: what configures
`go test` is the base's, whatever the working tree says, and the checks run offline with
a build cache of the run's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.stacks.go_support import parse, require_go
from tests.support.files import write_tree
from tests.support.git_repos import git, git_repo

from looprun.checks import stacks
from looprun.checks.clean_tree import CheckTrees
from looprun.checks.stacks.detect import detect

GO_MOD = "module example.com/textkit\n\ngo 1.19\n"
MODULE = {
    "go.mod": GO_MOD,
    "strutil/s.go": "package strutil\n\nfunc Twice(s string) string { return s + s }\n",
    "strutil/s_test.go": (
        'package strutil\n\nimport "testing"\n\n'
        'func TestTwice(t *testing.T) {\n\tif Twice("a") != "aa" {\n\t\tt.Fatal("bad")\n\t}\n}\n'
    ),
}


def test_a_go_module_is_the_go_stack(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "m", MODULE)
    assert detect(root).name == "go"
    stack = stacks.get("go")
    assert stack.tools[0].program == "go" and "golang-go" in stack.tools[0].install
    assert dict(stack.caches) == {"GOCACHE": "go-build"}
    assert stack.env["GOPROXY"] == "off" and stack.env["GOTOOLCHAIN"] == "local"


@pytest.mark.e2e
def test_the_check_tree_holds_the_base_module_files_and_runs_offline(tmp_path: Path) -> None:
    go = require_go()
    repo = git_repo(write_tree(tmp_path / "repo", MODULE))
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    # what a model could write to change what `go test ./...` runs, none of it in the diff
    # that reaches the check: a nested go.mod takes strutil/ out of the module, a go.work
    # swaps the module set, an edited go.mod; and a compiled test binary
    write_tree(
        repo,
        {
            "strutil/go.mod": "module example.com/elsewhere\n\ngo 1.19\n",
            "go.work": "go 1.19\n\nuse ./strutil\n",
            "go.mod": GO_MOD + "\nrequire example.com/missing v1.0.0\n",
            "strutil/strutil.test": "not a binary",
            "strutil/s.go": MODULE["strutil/s.go"].replace("s + s", 's + s + ""'),
        },
    )
    trees = CheckTrees(tmp_path / "checks")
    root, env, tampered = trees.prepare("go", workdir=repo, git_dir=None, base=base)
    assert tampered == ""
    assert (root / "go.mod").read_text() == GO_MOD
    assert not (root / "strutil" / "go.mod").exists()
    assert not (root / "go.work").exists()
    assert not (root / "strutil" / "strutil.test").exists()
    assert '+ ""' in (root / "strutil" / "s.go").read_text()  # the change itself is there
    cache = Path(env["GOCACHE"])
    assert cache.is_dir() and root not in cache.parents and repo not in cache.parents
    # go test in that tree, with that environment: strutil's test runs and passes
    stream = tmp_path / "go-test.json"
    with stream.open("wb") as out:
        done = subprocess.run(
            [go, "test", "-count=1", "-json", "./..."],
            cwd=root,
            stdout=out,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            check=False,
            timeout=300,
        )
    obs = parse(root, stream, done.stderr.decode(), done.returncode)
    assert obs.ok and obs.facts["passing"] == ("strutil/TestTwice",), obs.feedback
    assert any(cache.iterdir())  # the build cache is the run's own


def test_without_go_the_run_stops_before_any_model_call_with_the_install_hint(
    tmp_path: Path,
) -> None:
    repo = git_repo(write_tree(tmp_path / "repo", MODULE))
    bin_dir = tmp_path / "bin"  # git (and bwrap, for the sandbox) but no go
    bin_dir.mkdir()
    for program in ("git", "bwrap"):
        found = shutil.which(program)
        if found:
            (bin_dir / program).symlink_to(found)
    script = tmp_path / "script.yaml"
    script.write_text("- text: never asked\n")
    done = subprocess.run(
        [sys.executable, "-m", "looprun", "bugfix", "--intent", "x", "--model", f"script:{script}"],
        cwd=repo,
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "stack: go (go.mod at the repository's root)" in done.stderr
    assert "go was not found on PATH: install Go (apt-get install golang-go)" in done.stderr
    assert not (repo / ".looprun" / "runs").exists() or not any(
        (run / "exchanges.jsonl").exists() for run in (repo / ".looprun" / "runs").iterdir()
    )
