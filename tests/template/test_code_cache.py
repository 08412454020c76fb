"""What Jinja made of a template's expressions is kept across runs (``code_cache``), and
reused only from a file that is the user's own, from this engine, whole and well-formed."""

from __future__ import annotations

import marshal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from jinja2 import TemplateSyntaxError

from looprun.errors import Location, TemplateError
from looprun.template import code_cache, expressions
from looprun.template.code_cache import CodeCache
from looprun.template.compile_cache import compiled_condition, compiled_text, keep_codes
from looprun.template.loader import load_template
from looprun.template.valid_cache import engine_stamp

HERE = Location("t.yaml", 3)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.fixture(autouse=True)
def _no_cache_after() -> Iterator[None]:
    yield
    keep_codes(None)


def _use_everything(root: Path) -> CodeCache:
    """A process's work: compile, use (so code is generated), save."""
    codes = CodeCache(root)
    keep_codes(codes)
    assert compiled_text("Hi {{ who }}!", False, HERE).render({"who": "you"}) == "Hi you!"
    assert compiled_text("echo {{ arg }}", True, HERE).render({"arg": "a b"}) == "echo 'a b'"
    assert compiled_condition("tests.failed > 1", HERE).evaluate({"tests": {"failed": 2}})
    codes.save()
    return codes


def test_a_second_process_reuses_the_code_without_jinja(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_everything(tmp_path)
    keep_codes(None)

    codes = CodeCache(tmp_path)
    assert {kind for kind, _ in codes._entries} == {"text", "shell", "condition"}
    assert all(entry[3] is not None for entry in codes._entries.values())
    keep_codes(codes)

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("Jinja was asked to parse or compile a cached expression")

    for env in (expressions.ENV, expressions.SHELL_ENV):
        monkeypatch.setattr(env, "compile", refuse)
        monkeypatch.setattr(env, "parse", refuse)
    text = compiled_text("Hi {{ who }}!", False, HERE)
    assert text.render({"who": "me"}) == "Hi me!"
    assert text.use.names == frozenset({"who"}) and text.location == HERE
    assert compiled_text("echo {{ arg }}", True, HERE).render({"arg": "$(x)"}) == "echo '$(x)'"
    condition = compiled_condition("tests.failed > 1", HERE)
    assert not condition.evaluate({"tests": {"failed": 1}})
    assert condition.use.attributes == frozenset({("tests", "failed")})
    with pytest.raises(Exception, match="tests"):  # an undefined name is still an error
        condition.evaluate({})


@pytest.mark.parametrize("name", sorted(p.name for p in TEMPLATES.glob("*.yaml")))
def test_every_built_in_template_loads_the_same_from_the_cache(tmp_path: Path, name: str) -> None:
    keep_codes(CodeCache(tmp_path))
    fresh = load_template(str(TEMPLATES / name))
    keep_codes(None)
    keep_codes(codes := CodeCache(tmp_path))  # nothing saved yet: a miss
    assert not codes._entries
    first = load_template(str(TEMPLATES / name))
    codes.save()
    keep_codes(again := CodeCache(tmp_path))
    assert again._entries  # read back
    cached = load_template(str(TEMPLATES / name))
    assert cached == first == fresh  # every text and condition: source, place, names read


def test_a_source_that_does_not_compile_is_never_kept(tmp_path: Path) -> None:
    codes = CodeCache(tmp_path)
    keep_codes(codes)
    for _ in range(2):
        with pytest.raises(TemplateError, match=r"t\.yaml:3"):
            compiled_condition("tests.failed >", HERE)
        with pytest.raises(TemplateError, match="shell quotes"):
            compiled_text("echo '{{ arg }}'", True, HERE)
    codes.save()
    assert not CodeCache(tmp_path)._entries


def _planted(root: Path) -> Path:
    """A well-formed file whose one entry makes ``tests.ok`` always true."""
    code: list[object] = []
    expressions._expression_maker(expressions.ENV, "true", code.append)()
    data = {
        "format": 1,
        "stamp": engine_stamp(),
        "entries": {("condition", "tests.ok"): (("tests",), (("tests", "ok"),), None, code[0])},
    }
    root.mkdir(mode=0o700, exist_ok=True)
    path = CodeCache(root).path
    path.write_bytes(marshal.dumps(data))
    path.chmod(0o600)
    return path


def _reads_planted(root: Path) -> bool:
    keep_codes(CodeCache(root))
    return compiled_condition("tests.ok", HERE).evaluate({"tests": {"ok": False}})


def test_a_private_file_is_read(tmp_path: Path) -> None:
    _planted(tmp_path / "c")
    assert _reads_planted(tmp_path / "c")  # the control: what the cases below refuse


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.chmod(0o666), id="file writable by others"),
        pytest.param(lambda p: p.parent.chmod(0o777), id="directory writable by others"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-40]), id="truncated"),
        pytest.param(lambda p: p.write_bytes(b"not marshal"), id="not marshal"),
        pytest.param(
            lambda p: p.write_bytes(
                marshal.dumps({**marshal.loads(p.read_bytes()), "stamp": "another engine"})
            ),
            id="another engine",
        ),
        pytest.param(
            lambda p: p.write_bytes(
                marshal.dumps(
                    {
                        **marshal.loads(p.read_bytes()),
                        "entries": {("condition", "tests.ok"): ((), (), None, "code")},
                    }
                )
            ),
            id="malformed entry",
        ),
    ],
)
def test_a_file_anyone_else_could_write_or_that_is_not_whole_is_not_read(
    tmp_path: Path, spoil: object
) -> None:
    path = _planted(tmp_path / "c")
    spoil(path)  # type: ignore[operator]
    assert not _reads_planted(tmp_path / "c")


def test_a_link_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    elsewhere = _planted(tmp_path / "elsewhere")
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    os.symlink(elsewhere, CodeCache(root).path)
    assert not _reads_planted(root)


def test_saving_replaces_the_file_whole_and_only_the_user_may_read_it(tmp_path: Path) -> None:
    codes = _use_everything(tmp_path / "c")
    mode = codes.path.stat().st_mode & 0o777
    assert mode == 0o600
    stale = tmp_path / "c" / "0123.marshal"  # another engine's file: never read again
    stale.write_bytes(b"")
    keep_codes(codes := CodeCache(tmp_path / "c"))
    compiled_text("new {{ one }}", False, HERE).render({"one": 1})
    codes.save()
    assert not stale.exists()
    assert ("text", "new {{ one }}") in CodeCache(tmp_path / "c")._entries


def test_jinja_still_judges_what_it_alone_can(tmp_path: Path) -> None:
    keep_codes(CodeCache(tmp_path))
    with pytest.raises(TemplateError):
        compiled_condition("x | no_such_filter", HERE)
    with pytest.raises(TemplateSyntaxError):
        expressions.ENV.compile("{{ x | no_such_filter }}")


def test_a_full_cache_keeps_what_its_last_run_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(code_cache, "MAX_ENTRIES", 3)
    codes = CodeCache(tmp_path)
    keep_codes(codes)
    for n in range(4):  # a template edited four times: four texts, one used now
        compiled_text(f"draft {n}: {{{{ x }}}}", False, HERE)
    codes.save()
    assert len(CodeCache(tmp_path)._entries) == 4  # this run used them all

    keep_codes(codes := CodeCache(tmp_path))
    compiled_text("draft 3: {{ x }}", False, HERE).render({"x": 1})  # code: a change to save
    codes.save()
    assert list(CodeCache(tmp_path)._entries) == [("text", "draft 3: {{ x }}")]
