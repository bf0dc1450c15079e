"""Assembling pages' DocTags into one DoclingDocument: escapes where docling needs them, and only there."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_a_page_is_sized_and_laid_out_as_docling_lays_it_out_from_its_image() -> None:
    # build() gives docling no image for a page without pictures (docling would encode it as a PNG, 100-190 MB and
    # up to 0.6 s for a 6250x6250 page) and sizes the page itself: every box, furniture and table cells included,
    # must be where docling puts it given the image.
    from docling_core.types.doc.document import DoclingDocument, DocTagsDocument  # type: ignore[attr-defined]

    tags = (
        "<doctag><page_header><loc_20><loc_5><loc_200><loc_15>Header</page_header>"
        "<section_header_level_1><loc_20><loc_30><loc_300><loc_45>Title</section_header_level_1>"
        "<text><loc_20><loc_60><loc_480><loc_90>Body text.</text>"
        "<otsl><loc_20><loc_100><loc_480><loc_200><ched>A<ched>B<nl><fcel>1<fcel>2<nl></otsl>"
        "<picture><loc_100><loc_300><loc_400><loc_450><caption><loc_100><loc_455><loc_400><loc_470>Figure 1"
        "</caption></picture>"
        "<page_footer><loc_240><loc_490><loc_260><loc_498>7</page_footer></doctag>"
    )
    image = Image.new("RGB", (1000, 800), "white")
    image.paste((200, 30, 30), (250, 500, 700, 700))  # inside the picture's box: its crop is not blank
    # the engine hands over a PDF page as an array, an image file's page as a PIL image: both give docling's result
    ours = assemble.build("p", [tags], [np.asarray(image)]).export_to_dict()
    assert assemble.build("p", [tags], [image]).export_to_dict() == ours
    pairs = DocTagsDocument.from_doctags_and_image_pairs([tags], [image])
    theirs = DoclingDocument.load_from_doctags(pairs, document_name="p")
    for page in theirs.pages.values():
        page.image = None
    expected = theirs.export_to_dict()
    assert ours["pages"] == expected["pages"] == {"1": {"size": {"width": 1000.0, "height": 800.0}, "page_no": 1}}
    [picture], [want_picture] = ours["pictures"], expected["pictures"]
    assert picture["image"] == want_picture["image"] and picture["image"]["size"] == {"width": 600.0, "height": 240.0}
    assert picture["captions"] == want_picture["captions"] and picture["captions"]
    for kind in ("texts", "tables", "pictures"):
        got = [[p["bbox"] for p in item["prov"]] for item in ours[kind]]
        want = [[p["bbox"] for p in item["prov"]] for item in expected[kind]]
        assert len(got) == len(want) and got, kind
        for a, b in zip(got, want, strict=True):
            for x, y in zip(a, b, strict=True):
                assert x.keys() == y.keys() and all(x[k] == pytest.approx(y[k]) for k in x if k != "coord_origin")
    assert {t["content_layer"] for t in ours["texts"]} == {"body", "furniture"}
