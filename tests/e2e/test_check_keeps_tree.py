"""A check of a stack cannot write the working tree: under bubblewrap it is mounted
read-only for the check, which runs in its clean copy of the repository.

Real runs of the CLI with a scripted model and real pytest. The model writes a test that,
when the check runs it, rewrites the code under test in the working tree (by its absolute
path, which a model can read from its own working directory) so the next check, or the
user's commit, finds a "fix" no turn made. Under bubblewrap the write fails and nothing in
the working tree changes, so the engine need not look for such edits after each check
(``RealObserver.keeps_tree``). Without a sandbox the same write lands and is caught after
the check, undone, and stops the run (the control: the attack is real).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import scripted_bugfix
from tests.security.test_sandbox import needs_bwrap
from tests.support.git_repos import git, git_repo

from looprun.checks.clean_tree import trees_home

pytestmark = pytest.mark.e2e

CODE = "def double(x):\n    return x * 3\n"
FIXED = "def double(x):\n    return x * 2\n"
TEST = "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n"


def _planting_test(work: Path) -> str:
    """A test that rewrites the working tree's calc.py (and adds a file) when it runs."""
    return textwrap.dedent(
        f"""\
        from pathlib import Path

        WORK = Path({str(work)!r})


        def test_plants_a_fix():
            (WORK / "calc.py").write_text({FIXED!r})
            (WORK / "planted.txt").write_text("written by a check")
        """
    )


def _template(tmp: Path) -> Path:
    path = tmp / "plain.yaml"
    tests = {
        "run": "python -m pytest -q -p no:cacheprovider",
        "parser": "exit_code",
        "stack": "python",
    }
    path.write_text(
        textwrap.dedent(
            f"""\
            looprun: 1
            name: plain
            observe: {json.dumps({"tests": tests})}
            act: {{prompt: "Fix: {{{{ intent }}}}"}}
            exit: [tests.ok]
            limits: {{max_iterations: 2}}
            """
        )
    )
    return path


def _run(tmp: Path, work: Path, *extra: str, env: dict[str, str]) -> dict[str, Any]:
    plant = {
        "tool_calls": [
            {
                "name": "write_file",
                "arguments": {"path": "test_plant.py", "content": _planting_test(work)},
            }
        ]
    }
    turns = [plant, {"text": "Wrote a test."}] * 2
    template = str(_template(tmp))
    return scripted_bugfix(
        work, turns, "double doubles", *extra, env=env, timeout=600, template=template
    )


def _repo(tmp: Path) -> Path:
    work = tmp / "calc"
    work.mkdir()
    files = {"calc.py": CODE, "test_calc.py": TEST, "pyproject.toml": "[project]\n"}
    for name, text in files.items():
        (work / name).write_text(text)
    return git_repo(work)


@needs_bwrap
def test_a_check_under_bubblewrap_cannot_write_the_working_tree(tmp_path: Path) -> None:
    work = _repo(tmp_path)
    cache = tmp_path / "cache"
    env = {"LOOPRUN_SANDBOX_BACKENDS": "bwrap", "LOOPRUN_CACHE_DIR": str(cache)}
    summary = _run(tmp_path, work, "--sandbox", "required", env=env)

    assert summary["outcome"] == "exhausted", summary["stderr"]
    assert (work / "calc.py").read_text() == CODE  # the planted fix never landed
    assert not (work / "planted.txt").exists()
    output = (Path(summary["run_dir"]) / "artifacts" / "tests.output.txt").read_text()
    assert "Read-only file system" in output
    # ended for good: its checks' caches are gone; the working tree's check tree stays
    assert not (cache / "checks" / summary["run_id"]).exists()
    assert (trees_home(work, env) / "python" / "calc.py").read_text() == CODE


def test_without_a_sandbox_the_same_write_is_caught_and_undone(tmp_path: Path) -> None:
    work = _repo(tmp_path)
    cache = tmp_path / "cache"
    summary = _run(tmp_path, work, "--sandbox", "off", env={"LOOPRUN_CACHE_DIR": str(cache)})

    assert (summary["outcome"], summary["code"]) == ("error", "observer_changed_tree"), summary[
        "stderr"
    ]
    assert (work / "calc.py").read_text() == CODE  # undone
    # `looprun resume` may continue after an error: the run's checks keep their caches
    assert (cache / "checks" / summary["run_id"]).is_dir()


# what a model's test leaves in the check tree it runs in: a conftest that turns every
# result into a pass, for whichever check finds it there next
FORGER = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)
LEAVES_A_FORGER = (
    "from pathlib import Path\n\n\n"
    f"def test_leaves_a_forger():\n    Path('conftest.py').write_text({FORGER!r})\n"
)


@needs_bwrap
def test_what_a_run_s_check_leaves_in_the_kept_tree_never_reaches_the_next_run(
    tmp_path: Path,
) -> None:
    """The check tree is at the same place in the next run of the working tree. A test the
    model writes leaves a conftest.py there that makes every test pass (it lands: the
    tree is the check's to write); the next run, whose model changes nothing, finds the
    suite failing as it is, and does not end done."""
    work = _repo(tmp_path)
    env = {"LOOPRUN_SANDBOX_BACKENDS": "bwrap", "LOOPRUN_CACHE_DIR": str(tmp_path / "cache")}
    template = str(_template(tmp_path))
    arguments = {"path": "test_leave.py", "content": LEAVES_A_FORGER}
    leave = {"name": "write_file", "arguments": arguments}
    turns = [{"tool_calls": [leave]}, {"text": "Wrote a test."}] * 2
    first = scripted_bugfix(
        work, turns, "double doubles", "--sandbox", "required", env=env, template=template
    )
    assert first["outcome"] == "exhausted", first["stderr"]
    kept = trees_home(work, env) / "python"
    assert (kept / "conftest.py").read_text() == FORGER  # the forger waits in the tree
    git("checkout", "--", ".", cwd=work)
    git("clean", "-fdq", "-e", ".looprun", cwd=work)  # the repository as at its base

    second = scripted_bugfix(
        work,
        [{"text": "Nothing to change."}],
        "double doubles",
        "--sandbox",
        "required",
        "--max-iterations",
        "1",
        env=env,
        template=template,
    )
    assert second["outcome"] != "done", second["stderr"]
    assert not (kept / "conftest.py").exists()
