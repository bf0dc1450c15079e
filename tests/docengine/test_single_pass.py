"""Work a page's reading needs done once, not twice (issue 34, house): the frames a page's rules close and a form's
field boxes among them come from one grouping of the rules (tables.frames_and_fields). Counted on the helper that
does the work, and the results checked against the separate calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelhost.docengine import tables

from .conftest import drawn_page
from .test_form_boxes import _form

pytest.importorskip("reportlab")


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Wraps `module.name` so that each call adds to the list returned."""
    calls: list[int] = []
    original = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_pages_frames_and_a_forms_fields_come_from_one_grouping_of_its_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = drawn_page(tmp_path / "form.pdf", _form)
    frames, fields = (
        tables.rule_frames(content.rulings),
        tables.form_fields(tables._closed_groups(content.rulings), content.words),
    )
    assert frames and fields  # the form's grid is a frame, and its labelled boxes are fields
    grouped = _counted(monkeypatch, tables, "_groups")
    assert tables.frames_and_fields(content.rulings, content.words) == (frames, fields)
    assert len(grouped) == 1
