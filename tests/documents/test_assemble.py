"""Assembling pages' DocTags into one DoclingDocument: escapes where docling needs them, and only there."""

from __future__ import annotations

from PIL import Image

from modelhost.documents import assemble


def test_angle_brackets_reach_the_document_literal_whether_or_not_the_model_escaped_them() -> None:
    page = Image.new("RGB", (300, 400), "white")
    literal = "<doctag><text><loc_1><loc_1><loc_100><loc_20>if a < b and <tag> then x > y</text></doctag>"
    escaped = "<doctag><text><loc_1><loc_1><loc_100><loc_20>if a &lt; b and &lt;tag&gt; then x &gt; y</text></doctag>"
    for doctags in (literal, escaped):
        document = assemble.build("x", [doctags], [page])
        assert [t.text for t in document.texts] == ["if a < b and <tag> then x > y"]
    # a generation cut mid-tag still loses only the cut tag
    cut = assemble.build("x", ["<doctag><text><loc_1><loc_1><loc_100><loc_20>kept</text><text><loc_1"], [page])
    assert [t.text for t in cut.texts if t.text] == ["kept"]
