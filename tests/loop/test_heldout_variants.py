"""Held-out variants of the reproducing test: asked of the holdout role once `reproduce` is
done, kept where the acting model cannot read them, triaged on the unfixed tree with real
pytest, and run by the `variants` observer; every way they can fail to run is a status
and a recorded warning, never a silent pass, and nothing of them reaches the journal."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from looprun.checks.clean_tree import CheckTrees
from looprun.checks.variants import VariantStore
from looprun.errors import ModelError, TemplateError
from looprun.loop.core import Loop, RunInfo
from looprun.loop.heldout import _test_files, ask_for_variants, extract_code
from looprun.loop.inputs import build_inputs
from looprun.loop.plan import PlannedTask
from looprun.loop.ports import KeepRecent, NullJournal, Ports
from looprun.models.scripted import EXHAUSTED_TEXT, ScriptedModel
from looprun.run.ports import RealObserver, RealVariants
from looprun.run.session import _variants_hidden
from looprun.template import slots
from looprun.template.loader import load_template
from looprun.workspace.tree import Workspace

TEST_ID = "tests/test_calc.py::test_triple_of_three"
BUGGY = "def triple(x):\n    return 3 * x if x < 3 else x + x\n"
FIXED = "def triple(x):\n    return 3 * x\n"
REPRODUCTION = (
    "from calc import triple\n\n\ndef test_triple_of_three():\n    assert triple(3) == 9\n"
)
# one variant fails on the unfixed code as the reproduction does (kept), one passes there
# (wrong about the bug: dropped), one fails for another reason (dropped)
ANSWER = (
    "Here they are.\n```python\nfrom calc import triple\n\n\n"
    "def test_variant_1():\n    assert triple(40) == 120\n\n\n"
    "def test_variant_2():\n    assert triple(1) == 3\n\n\n"
    "def test_variant_3():\n    assert triple(None) == 0\n```\n"
)


def _a_test(stack: str) -> re.Pattern[str]:
    """What the stack's pack says a test looks like in its language."""
    with slots.chosen(slots.StackChoice(stack, "test")):
        spec = load_template("bugfix").observe["variants"]
    assert spec.holdout is not None and spec.holdout.variants is not None
    return spec.holdout.variants.test_pattern


A_TEST = _a_test("python")


class Recording(NullJournal):
    """Keeps events and exchanges, to check what a run would record."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.exchanges: list[Mapping[str, Any]] = []

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"event": kind, **data})

    def exchange(self, record: Mapping[str, Any]) -> None:
        self.exchanges.append(record)

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]


class Failing:
    """A model whose call fails (a provider error): the status is `failed`."""

    ref = "broken"
    position = None

    def seek(self, position: int) -> None:
        pass

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise ModelError("the provider answered 500")


def _git(work: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=work,
        check=True,
        capture_output=True,
    )


def _setup(
    tmp_path: Path,
    model: Any,
    *,
    sets: Mapping[str, str] | None = None,
    hidden: str = "",
    store: bool = True,
) -> tuple[Loop, Recording, VariantStore, RealObserver]:
    """The bugfix template on a tiny real package whose `reproduce` just ended: its test
    written and failing, the loop about to ask for variants."""
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "calc.py").write_text(BUGGY)
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "calc")
    template = load_template("bugfix")
    inputs = build_inputs(
        template.inputs,
        "triple(x) is wrong for x >= 3",
        {"test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider", **(sets or {})},
    )
    ws = Workspace.open(work, state_dir=work / ".looprun")
    base = ws.base()
    (work / "tests" / "test_calc.py").write_text(REPRODUCTION)
    current = ws.checkpoint("t/1")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    variants_store = VariantStore(tmp_path / "private" / "run")
    observer = RealObserver(
        work,
        artifacts,
        ws.git.git_dir,
        None,
        pinned=tmp_path / "pinned",
        trees=CheckTrees(tmp_path / "checks"),
        variants=variants_store,
    )
    journal = Recording()
    ports = Ports(
        model=model,
        toolbox=lambda *a, **k: None,  # type: ignore[arg-type,return-value]
        workspace=ws,
        guard=None,  # type: ignore[arg-type]
        observer=observer,
        journal=journal,
        context=KeepRecent(),
        variants=RealVariants(variants_store, observer, hidden) if store else None,
    )
    run = RunInfo("run", str(tmp_path), str(artifacts), str(work))
    loop = Loop(template, ports, inputs=inputs, run=run)
    st = loop.state
    st.base = st.task_start = base
    st.current = current
    st.last_facts = {"tests": {"failure_types": {TEST_ID: "AssertionError"}}}
    return loop, journal, variants_store, observer


def _reproduced(loop: Loop) -> dict[str, Any]:
    """What `reproduce` was done on: its new test newly failing."""
    return {
        **loop.goal_context(),
        "run": loop.run_info.facts(),
        "baseline": {"tests": {"newly_failing": [TEST_ID]}},
    }


def _fixing(loop: Loop) -> dict[str, Any]:
    """What `fix` observes with: the reproduction done and passing."""
    done = {"reproduce": {"baseline": {"tests": {"newly_failing": [TEST_ID]}}}}
    return {**_reproduced(loop), "tasks": done, "tests": {"passing": [TEST_ID]}}


def _ask(loop: Loop) -> dict[str, Any]:
    ask_for_variants(loop, PlannedTask("reproduce", "write the test"), _reproduced(loop))
    return loop.context(PlannedTask("fix", ""), {}, {})["heldout"]


# -- the scripted model's holdout role ---------------------------------------------------


def test_a_holdout_turn_answers_only_the_holdout_role() -> None:
    model = ScriptedModel(
        [{"text": "act 1"}, {"role": "holdout", "text": "variants"}, {"text": "act 2"}]
    )
    assert model.complete([], [], role="act").message.content == "act 1"
    assert model.complete([], [], role="holdout").message.content == "variants"
    assert model.complete([], [], role="act").message.content == "act 2"


def test_a_script_without_holdout_turns_plays_as_it_did() -> None:
    model = ScriptedModel([{"text": "act 1"}, {"text": "act 2"}])
    assert model.complete([], [], role="act").message.content == "act 1"
    assert model.complete([], [], role="holdout").message.content == ""  # unanswered
    assert model.complete([], [], role="act").message.content == "act 2"
    assert model.complete([], [], role="holdout").message.content == ""
    assert model.complete([], [], role="act").message.content == EXHAUSTED_TEXT


def test_a_holdout_turn_never_asked_for_is_passed_over() -> None:
    model = ScriptedModel([{"text": "act 1"}, {"role": "holdout", "text": "v"}, {"text": "act 2"}])
    model.complete([], [], role="act")
    assert model.complete([], [], role="act").message.content == "act 2"


def test_the_answer_s_code_is_its_fenced_blocks() -> None:
    assert extract_code(ANSWER, A_TEST).startswith("from calc import triple\n")
    assert "Here they are" not in extract_code(ANSWER, A_TEST)
    assert extract_code("def test_a():\n    assert f(2) == 4\n", A_TEST) == (
        "def test_a():\n    assert f(2) == 4\n"
    )
    assert extract_code("I cannot write tests for this.", A_TEST) == ""
    assert extract_code("```python\nx = 1\n```", A_TEST) == ""  # code, but no test in it


# each pack says what a test looks like in its language (the loop names none): an answer
# holding one is an answer, prose or code without one is not
PACK_TESTS = {
    "python": ("async def test_x():\n    pass\n", "class TestX:\n    pass\n"),
    "go": ('package p\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n',),
    "node": ("test('x', () => {});\n", "  it('x', () => {});\n"),
}
NOT_TESTS = ("I cannot write tests for this.", "def helper():\n    return 1\n", "x = test\n")


@pytest.mark.parametrize("stack", list(PACK_TESTS))
def test_each_pack_says_what_a_test_looks_like(stack: str) -> None:
    a_test = _a_test(stack)
    for code in PACK_TESTS[stack]:
        assert extract_code(f"```\n{code}```", a_test) == code.strip() + "\n", (stack, code)
    for text in NOT_TESTS:
        assert extract_code(text, a_test) == "", (stack, text)
    # one language's test is no answer in another's pack
    others = [c for s, codes in PACK_TESTS.items() if s != stack for c in codes]
    assert not any(extract_code(c, a_test) for c in others)


# -- asking, keeping and triaging ------------------------------------------------------------


@pytest.mark.e2e  # three real pytest runs
def test_only_variants_that_fail_like_the_reproduction_are_kept_and_run(tmp_path: Path) -> None:
    model = ScriptedModel([{"role": "holdout", "text": ANSWER}])
    loop, journal, store, observer = _setup(tmp_path, model)

    heldout = _ask(loop)

    assert (heldout["status"], heldout["written"], heldout["kept"]) == ("kept", 3, 1), heldout
    assert heldout["asked"] == 3 and heldout["tokens"] > 0
    assert store.kept("variants") == ("holdout_variants/test_heldout_variants.py::test_variant_1",)
    assert not journal.kinds("warning")
    # the call is charged to the run, and journaled without its answer
    (exchange,) = journal.exchanges
    assert exchange["role"] == "holdout"
    assert "held-out variants" in exchange["reply"]["content"]
    assert "triple(40)" not in str(exchange) and "test_variant" not in str(journal.events)
    assert loop.state.completion_tokens > 0
    # the request showed the reproducing test and asked for three
    prompt = model.calls[0][1][-1].content
    assert "assert triple(3) == 9" in prompt and "Write 3 more pytest" in prompt

    spec = loop.template.observe["variants"]
    ctx = _fixing(loop)
    before = observer.observe(spec, ctx, deadline=None, base=loop.state.base)
    assert (before.ran, before.ok, before.facts["tests"], before.facts["failed"]) == (
        True,
        False,
        1,
        1,
    )
    # sealed: a count, never a name or a message
    assert before.feedback == "a held-out check failed" and not before.items
    assert "failing" not in before.facts
    (loop.run_info.workdir and Path(loop.run_info.workdir) / "calc.py").write_text(FIXED)
    after = observer.observe(spec, ctx, deadline=None, base=loop.state.base)
    assert (after.ran, after.ok, after.facts["tests"]) == (True, True, 1)
    # the copy is gone from the check tree once the check has run
    assert not list((tmp_path / "checks").rglob("holdout_variants"))


def test_the_private_store_is_the_user_s_alone(tmp_path: Path) -> None:
    store = VariantStore(tmp_path / "heldout" / "run")
    store.store("variants", "test_v.py", "def test_v():\n    assert f(40)\n")
    kept = store.source("variants") / "test_v.py"
    assert "f(40)" in kept.read_text()
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    assert store.kept("variants") == ()  # nothing kept before the triage
    store.keep("variants", ["holdout_variants/test_v.py::test_v"])
    assert store.kept("variants") == ("holdout_variants/test_v.py::test_v",)
    # a new answer replaces the old one and what was kept of it
    store.store("variants", "test_w.py", "def test_w():\n    pass\n")
    assert store.kept("variants") == () and not kept.exists()


def test_ids_that_name_no_file_show_the_added_test_files_first(tmp_path: Path) -> None:
    """A Java id names a class, not a file: of the files the task added, those holding a
    test come first, since the first is where a `beside` variants file goes."""
    loop, *_ = _setup(tmp_path, ScriptedModel([]))
    work = Path(loop.run_info.workdir)
    (work / "aaa_helper.py").write_text("def helper():\n    return 1\n")
    loop.state.current = loop.ports.workspace.checkpoint("t/2")

    shown = _test_files(loop, ["calc.TripleTest.tripleOfThree"], A_TEST)

    assert [t["path"] for t in shown] == ["tests/test_calc.py", "aaa_helper.py"]


def test_nothing_kept_means_the_check_is_skipped(tmp_path: Path) -> None:
    model = ScriptedModel([])
    loop, _journal, _store, observer = _setup(tmp_path, model)
    spec = loop.template.observe["variants"]
    obs = observer.observe(spec, _fixing(loop), deadline=None, base=loop.state.base)
    assert (obs.ran, obs.ok) == (False, True)


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("no holdout turn", "unanswered", "the answer held no tests"),
        ("a failed call", "failed", "the provider answered 500"),
        ("no sandbox", "unhidden", "only bubblewrap can"),
        ("no store", "unhidden", "no private store"),
        pytest.param(
            "all wrong",
            "none_kept",
            "none of the 1 failed on the tree before the fix",
            marks=pytest.mark.e2e,  # a real pytest run
        ),
    ],
)
def test_variants_that_will_not_run_are_a_status_and_a_warning(
    tmp_path: Path, case: str, status: str, reason: str
) -> None:
    model: Any = ScriptedModel([])
    hidden, store = "", True
    if case == "a failed call":
        model = Failing()
    elif case == "no sandbox":
        hidden = _variants_hidden(None)
    elif case == "no store":
        store = False
    elif case == "all wrong":
        wrong = "```python\nfrom calc import triple\n\n\ndef test_variant_1():\n"
        wrong += "    assert triple(1) == 3\n```"
        model = ScriptedModel([{"role": "holdout", "text": wrong}])
    loop, journal, _store, _observer = _setup(tmp_path, model, hidden=hidden, store=store)

    heldout = _ask(loop)

    assert heldout["status"] == status and reason in heldout["reason"], heldout
    (warning,) = journal.kinds("warning")
    assert f"will not run: {status}" in warning["message"]
    assert journal.kinds("heldout")[0]["status"] == status


def test_turned_off_nothing_is_asked_and_nothing_warned(tmp_path: Path) -> None:
    model = ScriptedModel([{"role": "holdout", "text": ANSWER}])
    loop, journal, _store, _observer = _setup(tmp_path, model, sets={"holdout_variants": "0"})

    assert _ask(loop)["status"] == "off"
    assert model.calls == [] and not journal.kinds("warning")


def test_only_bubblewrap_can_hide_them_from_the_code_under_test() -> None:
    assert _variants_hidden("bwrap") == ""
    assert "landlock sandbox" in _variants_hidden("landlock")
    assert "without an OS sandbox" in _variants_hidden(None)


# -- the template ------------------------------------------------------------------------------


def test_bugfix_asks_for_three_variants_and_fix_needs_them_to_pass() -> None:
    template = load_template("bugfix")
    spec = template.observe["variants"]
    assert spec.holdout is not None and spec.holdout.variants is not None
    assert template.inputs["holdout_variants"].default == 3
    (fix,) = [t for t in template.plan.tasks if t.id == "fix"]
    assert fix.done_when is not None and "variants.ok" in fix.done_when.source
    assert "heldout_variants" in [r.id for r in template.refine]


@pytest.mark.parametrize(
    ("holdout", "said"),
    [
        (
            "{to: x, variants: {of: r, count: 1, prompt: p, file: a/b.py, test_pattern: t}}",
            "one plain file name",
        ),
        (
            "{to: x, from: /x, variants: {of: r, count: 1, prompt: p, file: t.py,"
            " test_pattern: t}}",
            "holdout",
        ),
        # what a test looks like is the pack's to say: without it no answer can be judged
        ("{to: x, variants: {of: r, count: 1, prompt: p, file: t.py}}", "test_pattern"),
        (
            "{to: x, variants: {of: r, count: 1, prompt: p, file: t.py, test_pattern: '(x'}}",
            "invalid regular expression",
        ),
        (
            "{to: x, variants: {of: r, count: 1, prompt: p, file: t.py, test_pattern: 'x*'}}",
            "matches empty text",
        ),
        ("{to: x}", "holdout"),
    ],
)
def test_a_wrong_variants_declaration_is_a_template_error(
    tmp_path: Path, holdout: str, said: str
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "looprun: 1\nname: t\nact: {prompt: do}\nexit: [t.ok]\n"
        f"observe:\n  t:\n    parser: junit\n    run: pytest\n    file: r.xml\n"
        f"    holdout: {holdout}\n"
    )
    with pytest.raises(TemplateError) as caught:
        load_template(path)
    assert said in str(caught.value)


def test_the_holdout_role_uses_the_plan_role_s_model(tmp_path: Path) -> None:
    """`--plan-model` names the model that writes the variants, for a static plan too;
    without it, one scripted model plays every role from one script."""
    from looprun.run.models import ModelEvents, resolve_models

    act_script, plan_script = tmp_path / "act.yaml", tmp_path / "plan.yaml"
    act_script.write_text("[]\n")
    plan_script.write_text("[]\n")
    template = load_template("bugfix")
    events = ModelEvents(config=None)
    act, plan, refs = resolve_models(
        template, f"script:{act_script}", f"script:{plan_script}", None, events
    )
    assert plan is not act and refs["plan"].endswith("plan.yaml")
    act, plan, _refs = resolve_models(template, f"script:{act_script}", None, None, events)
    assert plan is act
