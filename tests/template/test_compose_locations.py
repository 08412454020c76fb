"""Composition locates every value as it did when each merge scanned the whole tables.

A merge finds what it takes from a document through an index of the document's paths,
and forgets the locations under a key only when the data held that key. The reference
here is the plain algorithm (scan every table for every key merged), run as a layer of
its own over the same files: the composed data, and the value, key and block tables
(their order included), must be equal for every YAML file in the repository that
composes, and the problems equal for every one that does not.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from tests.support.repo_files import repo_files

from looprun.errors import TemplateError
from looprun.template import compose as composition
from looprun.template.yamlpos import Document, JsonPath

ROOT = Path(__file__).resolve().parents[2]
FILES = [p for p in repo_files("*.yaml") if not p.name.endswith(".cases.yaml")]


class _ScanningLayer(composition._Layer):
    """Every merge scans the whole tables, forgetting and taking by prefix."""

    def merge(self, doc: Document, skip: tuple[str, ...] = ()) -> None:
        body = {k: v for k, v in doc.data.items() if k not in skip}
        if () in doc.values:
            self.values[()] = doc.values[()]
        self._scan_merge(self.data, body, (), doc)

    def _scan_merge(
        self, dst: dict[str, Any], src: dict[str, Any], path: JsonPath, doc: Document
    ) -> None:
        for key, value in src.items():
            child = (*path, key)
            if value is None:
                dst.pop(key, None)
                self._forget(child)
                continue
            if child == ("refine",) and isinstance(value, dict) and not self.keep_edits:
                self._edit_refine(value, doc)
                continue
            if isinstance(value, dict):
                if not isinstance(dst.get(key), dict):
                    dst[key] = {}
                    self._forget(child)
                self._take(child, doc)
                self._scan_merge(dst[key], value, child, doc)
                continue
            dst[key] = copy.deepcopy(value)
            self._forget(child)
            n = len(child)
            for mine, theirs in zip(self._tables(), composition._tables(doc), strict=True):
                mine.update({p: loc for p, loc in theirs.items() if p[:n] == child})


def _composed(path: Path) -> Any:
    try:
        doc = composition.compose(path)
    except TemplateError as exc:
        return "problems", [(str(p.location), p.message) for p in exc.problems]
    tables = [list(t.items()) for t in (doc.values, doc.keys, doc.blocks)]
    return "document", doc.data, tables


def test_the_files_include_compositions() -> None:
    extending = [p for p in FILES if "extends:" in p.read_text("utf-8", errors="replace")]
    assert len(FILES) > 50 and len(extending) > 10


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_a_file_composes_as_the_scanning_merge_composes_it(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed = _composed(path)
    monkeypatch.setattr(composition, "_Layer", _ScanningLayer)
    assert _composed(path) == indexed
