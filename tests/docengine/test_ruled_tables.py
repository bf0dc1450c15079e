"""Ruled tables on PDFs made here, the classes `tables_dev/` shows: a grid whose cells are set in a monospaced font is
a table (a framed code listing, a box around monospaced lines with no rule inside, stays code); rules that part only
column groups and the header from the body (a statistical table's) leave the rows and columns to the words; a table
ruled above and below its header only, with cells of several lines (Word's), reads its rows; a full grid of wrapped
cells keeps its rows."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import drawn_layout, table_blocks, table_rows

PAGE_TOP = 842.0  # A4 height in points: the tests measure `top` down from the page's top


def _text(c: object, x: float, top: float, text: str, font: str = "Helvetica", size: float = 9) -> None:
    c.setFont(font, size)  # type: ignore[attr-defined]
    c.drawString(x, PAGE_TOP - top, text)  # type: ignore[attr-defined]


def _line(c: object, x0: float, top0: float, x1: float, top1: float) -> None:
    c.line(x0, PAGE_TOP - top0, x1, PAGE_TOP - top1)  # type: ignore[attr-defined]


def _grid(c: object, xs: Sequence[float], ys: Sequence[float]) -> None:
    """Horizontal rules at `ys` across `xs`' extent, and vertical rules at `xs` from the first of `ys` to the last."""
    for y in ys:
        _line(c, xs[0], y, xs[-1], y)
    for x in xs:
        _line(c, x, ys[0], x, ys[-1])


#: A table of style attributes and their synonyms, ReportLab's user guide's kind: a bold header in Helvetica, every
#: body cell in Courier, a full grid.
SYNONYMS = (
    ("bulletAnchor", "anchor, bulletAnchor, bulletanchor"),
    ("bulletColor", "bulletColor, bulletcolor, color, fg"),
    ("bulletFontName", "bulletFontName, bulletfontname, face, font"),
    ("bulletIndent", "bulletIndent, bulletindent, indent"),
)


def _monospaced_grid(c: object) -> None:
    xs, top, row = (100.0, 200.0, 420.0), 100.0, 16.0
    _text(c, xs[0] + 4, top + 12, "Attribute", "Helvetica-Bold", 10)
    _text(c, xs[1] + 4, top + 12, "Synonyms", "Helvetica-Bold", 10)
    for r, (name, synonyms) in enumerate(SYNONYMS, start=1):
        _text(c, xs[0] + 4, top + r * row + 12, name, "Courier", 8)
        _text(c, xs[1] + 4, top + r * row + 12, synonyms, "Courier", 8)
    bottom = top + row * (len(SYNONYMS) + 1)
    for r in range(len(SYNONYMS) + 2):
        _line(c, xs[0], top + r * row, xs[-1], top + r * row)
    for x in xs:
        _line(c, x, top, x, bottom)


def _framed_listing(c: object) -> None:
    lines = ("def total(rows):", "    out = 0", "    for row in rows:", "        out += row.amount", "    return out")
    for k, text in enumerate(lines):
        _text(c, 110, 412 + 12 * k, text, "Courier", 9)
    c.rect(100, PAGE_TOP - 470, 300, 70, stroke=1, fill=0)  # type: ignore[attr-defined]


def test_a_grid_of_monospaced_cells_is_a_table_and_a_framed_listing_is_code(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        _monospaced_grid(c)
        _framed_listing(c)

    layout = drawn_layout(tmp_path / "mono.pdf", draw)
    tables = table_blocks(layout)
    assert len(tables) == 1, [b.kind for b in layout.blocks]
    assert table_rows(tables[0]) == [["Attribute", "Synonyms"], *[list(r) for r in SYNONYMS]]
    code = [b for b in layout.blocks if b.kind is Kind.CODE]
    assert len(code) == 1 and "out += row.amount" in code[0].text


#: A statistical table: a rule above and under a two-level header and at the foot, vertical rules between the label
#: column and two groups of three columns of figures only, labels run on in dot leaders, two of them wrapped.
LABELS = (
    ("Total offenses",),
    ("Murder and nonnegligent", "manslaughter"),
    ("Robbery",),
    ("All other offenses (except", "traffic)"),
    ("Arson",),
)
FIGURES = (
    ("399.6", "782.5", "683.0", "41.2", "40.8", "39.9"),
    ("4.9", "278.1", "598.0", "0.2", "0.1", "0.4"),
    ("88.2", "91.4", "95.0", "3.1", "3.3", "3.2"),
    ("306.1", "352.8", "410.7", "12.5", "13.0", "13.9"),
    ("12.0", "11.4", "10.9", "0.9", "0.8", "0.7"),
)
GROUP_XS = (250.0, 300.0, 350.0, 420.0, 470.0, 520.0)  # each figure column's right edge


def _statistical(c: object, groups: bool = True) -> None:
    top = 200.0
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    _line(c, 72, top, 540, top)
    for label, centre in (("Number", 300.0), ("Rate", 470.0)):
        c.setFont("Helvetica-Bold", 8)  # type: ignore[attr-defined]
        c.drawCentredString(centre, PAGE_TOP - top - 10, label)  # type: ignore[attr-defined]
    for k, year in enumerate(("2000", "2005", "2010") * 2):
        c.drawRightString(GROUP_XS[k] + 15, PAGE_TOP - top - 22, year)  # type: ignore[attr-defined]
    _line(c, 72, top + 26, 540, top + 26)
    y = top + 26
    for label, figures in zip(LABELS, FIGURES, strict=True):
        for n, part in enumerate(label):
            y += 10
            last = n == len(label) - 1
            c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
            width = c.stringWidth(part, "Helvetica", 8)  # type: ignore[attr-defined]
            # leaders to within 5 points of the widest first figure (399.6, from x 245): closer than a column gap
            room = 240 - 72 - 6 * n - width
            dots = " " + "." * int(room / c.stringWidth(".", "Helvetica", 8)) if last else ""  # type: ignore[attr-defined]
            _text(c, 72 + 6 * n, y, part + dots, size=8)
            if last:
                for x, figure in zip(GROUP_XS, figures, strict=True):
                    c.drawRightString(x + 15, PAGE_TOP - y, figure)  # type: ignore[attr-defined]
    _line(c, 72, y + 4, 540, y + 4)
    for x in (238.0, 392.0) if groups else ():
        _line(c, x, top, x, y + 4)


def test_rules_between_column_groups_only_leave_rows_and_columns_to_the_words(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "groups.pdf", _statistical))
    rows = table_rows(table)
    assert rows[-len(LABELS) - 1][1:] == ["2000", "2005", "2010"] * 2
    body = rows[-len(LABELS) :]
    assert [row[0].rstrip(" .") for row in body] == [" ".join(label) for label in LABELS]
    assert [row[1:] for row in body] == [list(f) for f in FIGURES]


#: A treatments table as Word draws it: five columns, a header ruled above and below, body rows of two to four
#: lines with no rule between them.
TREATMENTS = (
    ("Agent", "Hours", "Dilution", "Method", "Notes"),
    ("Tebuconazole 25.9% emulsion", "24", "2,000", "Soak the seed for a day then germinate", ""),
    ("Benomyl 50% wettable powder", "4-12", "1,000", "Soak at sprouting stirring now and then", "No rinse needed"),
    ("Prochloraz 25% emulsion", "24", "1,000", "Soak the seed for a day then germinate", "Use twice at most"),
)
WIDTHS = (110.0, 50.0, 60.0, 120.0, 90.0)


def _wrapped(text: str, width: float) -> list[str]:
    """`text` cut into lines of about `width` points of 9-point Helvetica (half an em a letter)."""
    per_line = int(width / 4.6)
    out: list[str] = []
    for word in text.split():
        if out and len(out[-1]) + 1 + len(word) <= per_line:
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def _treatments(c: object, every_row_ruled: bool, borders: str = "whole", watermark: bool = False) -> None:
    """The treatments table: verticals drawn whole, one piece per row (`"cells"`, as Word draws each cell's edges),
    or as dashes of 4 points a point apart, each its own path (`"dashes"`); a large grey word drawn diagonally across
    it (`watermark`, a trial driver's stamp), which no reading from the words' rows and columns gets past."""
    x0, top, lead = 60.0, 150.0, 11.0
    xs = [x0]
    for w in WIDTHS:
        xs.append(xs[-1] + w)
    y = top
    bounds = [y]
    for r, row in enumerate(TREATMENTS):
        cells = [_wrapped(text, w - 6) for text, w in zip(row, WIDTHS, strict=True)]
        for k, lines in enumerate(cells):
            for n, text in enumerate(lines):
                _text(c, xs[k] + 3, y + 11 + lead * n, text, "Helvetica-Bold" if r == 0 else "Helvetica")
        y += lead * max(len(lines) for lines in cells) + 6
        bounds.append(y)
    for x in xs:
        if borders == "cells":
            for a, b in itertools.pairwise(bounds):
                _line(c, x, a, x, b)
        elif borders == "dashes":
            d = bounds[0]
            while d < bounds[-1]:
                _line(c, x, d, x, min(d + 4, bounds[-1]))
                d += 5
        else:
            _line(c, x, bounds[0], x, bounds[-1])
    for yy in bounds if every_row_ruled else (bounds[0], bounds[1], bounds[-1]):
        _line(c, xs[0], yy, xs[-1], yy)
    if watermark:
        c.saveState()  # type: ignore[attr-defined]
        c.setFont("Helvetica", 60)  # type: ignore[attr-defined]
        c.setFillGray(0.85)  # type: ignore[attr-defined]
        c.translate(150, 600)  # type: ignore[attr-defined]
        c.rotate(35)  # type: ignore[attr-defined]
        c.drawString(0, 0, "SAMPLE")  # type: ignore[attr-defined]
        c.restoreState()  # type: ignore[attr-defined]


@pytest.mark.parametrize("every_row_ruled", [False, True], ids=["header ruled only", "full grid"])
def test_a_table_of_wrapped_cells_reads_its_rows(tmp_path: Path, every_row_ruled: bool) -> None:
    layout = drawn_layout(tmp_path / "treatments.pdf", lambda c: _treatments(c, every_row_ruled))
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in TREATMENTS]


def test_booktabs_rules_with_leaders_keep_the_first_figure_column_apart(tmp_path: Path) -> None:
    # the same table without its vertical rules: the columns come from gaps in the words' x coverage, which the
    # labels' dot leaders, reaching to within a few points of the first figures, must not close; the rows come from
    # the text lines, a label wrapped onto the line of its figures one row
    (table,) = table_blocks(drawn_layout(tmp_path / "booktabs.pdf", lambda c: _statistical(c, groups=False)))
    rows = table_rows(table)
    assert rows[-len(LABELS) - 1][1:] == ["2000", "2005", "2010"] * 2
    body = rows[-len(LABELS) :]
    assert [row[0].rstrip(" .") for row in body] == [" ".join(label) for label in LABELS]
    assert [row[1:] for row in body] == [list(f) for f in FIGURES]


def _grid_below_first_row(c: object) -> None:
    # ReportLab's split tables: a grid drawn under the first row only (the row above it has no rule), then a
    # paragraph whose last line runs just above a second grid, across its columns
    xs = (200.0, 240.0, 280.0, 320.0, 360.0, 400.0)
    top, row = 100.0, 16.0
    for r in range(4):
        for k in range(5):
            _text(c, xs[k] + 6, top + r * row + 12, f"{r}{k}", size=10)
    for r in range(1, 5):
        _line(c, xs[0], top + r * row, xs[-1], top + r * row)
    for x in xs:
        _line(c, x, top + row, x, top + 4 * row)
    _text(c, 72, 230, "As mentioned above, the cells may hold paragraphs, images and other flowables, or lists of them")
    # the paragraph's last line, set so that its word spaces fall on the second grid's column lines (x 200, 330)
    space = c.stringWidth(" ", "Helvetica", 10)  # type: ignore[attr-defined]
    for text, end in (("alike: the code below makes", 200.0), ("one, each with its style and", 330.0)):
        _text(c, end - space / 2 - c.stringWidth(text, "Helvetica", 10), 242, text, size=10)  # type: ignore[attr-defined]
    _text(c, 330 + space / 2, 242, "keeps them apart.", size=10)
    wide = (72.0, 200.0, 330.0, 460.0)
    for r in range(3):
        for k, text in enumerate(("Name", "Kind", "Size") if r == 0 else (f"item {r}", "flowable", f"{r}0 pt")):
            _text(c, wide[k] + 4, 246 + r * row + 12, text, size=10)
    for r in range(4):
        _line(c, wide[0], 246 + r * row, wide[-1], 246 + r * row)
    for x in wide:
        _line(c, x, 246, x, 246 + 3 * row)


def test_a_row_just_outside_the_rules_in_the_tables_columns_is_its_row(tmp_path: Path) -> None:
    first, second = table_blocks(drawn_layout(tmp_path / "parts.pdf", _grid_below_first_row))
    assert table_rows(first) == [[f"{r}{k}" for k in range(5)] for r in range(4)]
    # the paragraph's last line, just above the second grid, changes column at word spaces: it stays text
    assert table_rows(second)[0] == ["Name", "Kind", "Size"]


def test_rows_ruled_only_by_breaks_in_the_cells_borders_are_rows(tmp_path: Path) -> None:
    # Word's table with a trial driver's watermark: rules above and below the header only, every cell's vertical
    # edges drawn apart, so the borders break where the rows part; the watermark defeats the reading from the words
    layout = drawn_layout(tmp_path / "word.pdf", lambda c: _treatments(c, False, "cells", watermark=True))
    (table,) = table_blocks(layout)
    assert table_rows(table)[1:] == [list(row) for row in TREATMENTS[1:]]


def test_dashed_borders_make_no_rows(tmp_path: Path) -> None:
    # the same table with its verticals drawn as dashes, each its own path: they break every 5 points in every
    # column alike, and no dash is as tall as a line of text, so the body stays one band (nothing says where it parts)
    layout = drawn_layout(tmp_path / "dashed.pdf", lambda c: _treatments(c, False, "dashes", watermark=True))
    (table,) = table_blocks(layout)
    assert len(table_rows(table)) == 2


#: A boxed table of models' estimates, pscl's countreg vignette's kind (tables_dev/pscl_countreg_p17): vertical rules
#: part the label column and two groups of model columns only; each group's header is centred over its columns, each
#: estimate's standard error stands on the line under it.
MODEL_GROUPS = (("GLM", 3), ("zero-augmented", 2))
MODELS = ("pois", "qpois", "nbin", "hurdle", "zinb")
ESTIMATES = (
    (
        "(Intercept)",
        ("1.029", "1.029", "0.929", "1.198", "1.194"),
        ("(0.024)", "(0.062)", "(0.055)", "(0.059)", "(0.057)"),
    ),
    ("hosp", ("0.165", "0.165", "0.218", "0.212", "0.201"), ("(0.006)", "(0.016)", "(0.020)", "(0.021)", "(0.020)")),
    (
        "numchron",
        ("0.147", "0.147", "0.175", "0.126", "0.129"),
        ("(0.005)", "(0.012)", "(0.012)", "(0.012)", "(0.012)"),
    ),
)
MODEL_RIGHTS = (245.0, 300.0, 355.0, 430.0, 485.0)  # each model column's right edge: figures set flush right
GROUP_RULES = (80.0, 190.0, 375.0, 500.0)  # the box's sides and the two verticals between the groups


def _grouped_models(c: object) -> None:
    top, pitch = 150.0, 13.0
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
    k = 0
    for g, (name, count) in enumerate(MODEL_GROUPS):
        centre = (GROUP_RULES[g + 1] + GROUP_RULES[g + 2]) / 2
        c.drawCentredString(centre, PAGE_TOP - top - 10, name)  # type: ignore[attr-defined]
        for _ in range(count):
            c.drawRightString(MODEL_RIGHTS[k], PAGE_TOP - top - 10 - pitch, MODELS[k])  # type: ignore[attr-defined]
            k += 1
    _text(c, 85, top + 10, "Model")
    _text(c, 85, top + 10 + pitch, "Object")
    y = top + 10 + 2 * pitch + 6
    body_top = y - 9
    for label, figures, errors in ESTIMATES:
        for line, cells in ((label, figures), ("", errors)):
            y += pitch
            _text(c, 85, y, line)
            for x, figure in zip(MODEL_RIGHTS, cells, strict=True):
                c.drawRightString(x, PAGE_TOP - y, figure)  # type: ignore[attr-defined]
    _grid(c, GROUP_RULES, (top, body_top, y + 5))


def test_verticals_between_column_groups_leave_each_groups_columns_to_the_words(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "models.pdf", _grouped_models))
    rows = table_rows(table)
    # each group's header spans its columns (the verticals bound it), each model its own column
    assert rows[0] == ["Model", "GLM", "GLM", "GLM", "zero-augmented", "zero-augmented"]
    assert rows[1] == ["Object", *MODELS]
    body = [[label, *figures] for label, figures, _ in ESTIMATES]
    assert [row for row in rows[2:] if row[0]] == body
    assert [row[1:] for row in rows[2:] if not row[0]] == [list(errors) for _, _, errors in ESTIMATES]


#: Two tables of counts stacked under one stack of booktabs rules, each under its own centred title, coin's MAXtest
#: vignette's kind (tables_dev/coin_maxtest_p8): a group label (`Male`, `Female`) alone in its column on a header row
#: repeated inside each table, a rule under every header row, no rule under the first table.
COUNT_HEADER = ("Control", "Early Onset", "Late Onset", "Total")
COUNT_RIGHTS = (262.0, 312.0, 382.0, 440.0)  # each count column's left edge: counts set flush left
LOCI = (
    ("Locus A", (("CC", "75", "54", "29", "158"), ("CT", "93", "44", "13", "150"), ("TT", "14", "7", "4", "25"))),
    ("Locus B", (("GG", "170", "71", "40", "281"), ("GA", "12", "33", "6", "51"), ("AA", "0", "1", "0", "1"))),
)


def _stacked_counts(c: object) -> None:
    y, pitch = 150.0, 13.5
    c.setLineWidth(0.4)  # type: ignore[attr-defined]
    for title, body in LOCI:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawCentredString(309, PAGE_TOP - y, title)  # type: ignore[attr-defined]
        y += 2 * pitch
        for group in ("Male", "Female"):
            _text(c, 150, y, group, size=10)
            for x, name in zip(COUNT_RIGHTS, COUNT_HEADER, strict=True):
                _text(c, x, y, name, size=10)
            _line(c, 148, y + 4, 470, y + 4)
            for row in body:
                y += pitch
                _text(c, 205, y, row[0], size=10)
                for x, figure in zip(COUNT_RIGHTS, row[1:], strict=True):
                    _text(c, x, y, figure, size=10)
            y += pitch
        y += pitch
    _line(c, 148, y - 2 * pitch + 4, 470, y - 2 * pitch + 4)


def test_two_tables_stacked_under_one_stack_of_rules_part_at_the_title_between_them(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "stacked.pdf", _stacked_counts)
    tables = table_blocks(layout)
    assert len(tables) == 2
    for table, (title, body) in zip(tables, LOCI, strict=True):
        rows = table_rows(table)
        # a title's line runs across the gap between two columns and closes none of them
        assert rows[0] == ["Male", "", *COUNT_HEADER]
        assert rows[1 : len(body) + 1] == [["", *row] for row in body]
        assert all(title not in cell for row in rows for cell in row)
    texts = [b.text for b in layout.blocks if b.kind is not Kind.TABLE]
    assert "Locus B" in texts


#: A long two-column list between booktabs rules, lme4's vignette's kind (tables_dev/lme4_lmer_p30): a method's name and
#: what it returns, the bottom rule far below the head (more than `tables.STACK_GAP`), two descriptions wrapped onto a
#: second line whose first column is blank.
METHODS = (
    ("anova", ("Decomposition of fixed-effects contributions", "or model comparison.")),
    ("coef", ("Sum of the random and fixed effects for each level.",)),
    ("confint", ("Confidence intervals on linear mixed-model parameters.",)),
    ("deviance", ("Minus twice maximum log-likelihood.",)),
    ("fitted", ("Fitted values given conditional modes.",)),
    ("logLik", ("Maximum log-likelihood.",)),
    ("nobs", ("Number of observations.",)),
    ("plot", ("Diagnostic plots for mixed-model fits.",)),
    ("predict", ("Various types of predicted values.",)),
    ("ranef", ("Conditional modes of the random effects.",)),
    ("refit", ("A model refitted to a new set of observations", "of the response variable.")),
    ("sigma", ("Residual standard deviation.",)),
)


def _method_list(c: object) -> None:
    top, pitch = 120.0, 13.5
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    _line(c, 80, top, 540, top)
    _text(c, 85, top + 11, "Generic", size=10)
    _text(c, 190, top + 11, "Brief description of return value", size=10)
    _line(c, 80, top + 15, 540, top + 15)
    y = top + 15
    for name, description in METHODS:
        for k, line in enumerate(description):
            y += pitch
            if k == 0:
                _text(c, 85, y, name, "Courier", 10)
            _text(c, 190, y, line, size=10)
    _line(c, 80, y + 5, 540, y + 5)


def _ruled_columns_of_prose(c: object) -> None:
    # a rule over a title, one under it, two columns of running text and a rule at the foot: no table
    words = [
        "the",
        "model",
        "is",
        "fitted",
        "by",
        "maximum",
        "likelihood",
        "and",
        "its",
        "random",
        "effects",
        "are",
        "predicted",
        "by",
    ]
    _line(c, 80, 100, 540, 100)
    _text(c, 250, 114, "Linear mixed models", size=12)
    _line(c, 80, 122, 540, 122)
    for r in range(24):
        for x in (80.0, 320.0):
            line = " ".join(words[(r + k) % len(words)] for k in range(7))
            _text(c, x, 140 + 13 * r, line, size=10)
    _line(c, 80, 140 + 13 * 24, 540, 140 + 13 * 24)


def test_a_booktabs_head_and_a_far_bottom_rule_bracket_a_long_list(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "methods.pdf", _method_list))
    assert table_rows(table) == [
        ["Generic", "Brief description of return value"],
        *[[name, " ".join(description)] for name, description in METHODS],
    ]
    # two columns of prose between the same rules: a gutter open on every line, but running text in the first column
    assert not table_blocks(drawn_layout(tmp_path / "prose.pdf", _ruled_columns_of_prose))


#: A grid of a catalogue's columns, IBM Redbooks' kind (born-digital redp5110_sampled): the description cells are
#: paragraphs, two of which hold a list of values set in two at a tab stop ("- ALLOWED:" then what it means).
CATALOGUE = (
    ("FUNCTION_ID", "VARCHAR(30)", ("ID of the function.",)),
    ("USER_NAME", "VARCHAR(10)", ("Name of the user profile that has a usage", "setting for this function.")),
    (
        "USAGE",
        "VARCHAR(7)",
        ("Usage setting:", ("- ALLOWED:", "The profile may use it."), ("- DENIED:", "It may not.")),
    ),
    (
        "USER_TYPE",
        "VARCHAR(5)",
        ("Type of user profile:", ("- USER:", "The profile is a user."), ("- GROUP:", "A group.")),
    ),
)


def _catalogue(c: object) -> None:
    xs, top = (80.0, 180.0, 260.0, 520.0), 120.0
    y = top
    rules = [y]
    for name, kind, description in CATALOGUE:
        _text(c, xs[0] + 4, y + 11, name)
        _text(c, xs[1] + 4, y + 11, kind)
        for k, line in enumerate(description):
            if isinstance(line, tuple):
                _text(c, xs[2] + 4, y + 11 + 11 * k, line[0])
                _text(c, xs[2] + 70, y + 11 + 11 * k, line[1])
            else:
                _text(c, xs[2] + 4, y + 11 + 11 * k, line)
        y += 11 * len(description) + 6
        rules.append(y)
    _grid(c, xs, rules)


def test_a_description_holding_a_list_set_at_a_tab_stop_stays_one_column(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "catalogue.pdf", _catalogue))
    rows = table_rows(table)
    assert [len(row) for row in rows] == [3] * len(CATALOGUE)
    flat = [" ".join(part if isinstance(part, str) else " ".join(part) for part in d) for _, _, d in CATALOGUE]
    assert [row[2] for row in rows] == flat


#: booktabs' own example (tables_dev/booktabs_p2): a header `Item` over two columns with a `\cmidrule` under it, a
#: right-aligned price column; set twice, a short paragraph between, the two closer than `tables.STACK_GAP`.
PRICES = (("Gnat", "per gram", "13.65"), ("", "each", "0.01"), ("Gnu", "stuffed", "92.50"), ("Emu", "stuffed", "33.33"))


def _booktabs_twice(c: object) -> None:
    top = 120.0
    for _ in range(2):
        c.setLineWidth(0.8)  # type: ignore[attr-defined]
        _line(c, 250, top, 410, top)
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawCentredString(305, PAGE_TOP - top - 12, "Item")  # type: ignore[attr-defined]
        c.setLineWidth(0.4)  # type: ignore[attr-defined]
        _line(c, 252, top + 16, 358, top + 16)
        for x, name in ((255.0, "Animal"), (310.0, "Description")):
            _text(c, x, top + 28, name, size=10)
        c.drawRightString(408, PAGE_TOP - top - 28, "Price ($)")  # type: ignore[attr-defined]
        _line(c, 250, top + 33, 410, top + 33)
        y = top + 33
        for animal, description, price in PRICES:
            y += 12
            _text(c, 255, y, animal, size=10)
            _text(c, 310, y, description, size=10)
            c.drawRightString(408, PAGE_TOP - y, price)  # type: ignore[attr-defined]
        c.setLineWidth(0.8)  # type: ignore[attr-defined]
        _line(c, 250, y + 5, 410, y + 5)
        for k in range(3):  # a paragraph wider than the table between the two
            _text(
                c,
                150,
                y + 30 + 12 * k,
                "It takes much less work to lay this out as a formal table, and we can be sure.",
            )
        top = y + 70


def test_a_cmidrule_spreads_its_header_and_a_paragraph_parts_two_stacks_of_rules(tmp_path: Path) -> None:
    tables = table_blocks(drawn_layout(tmp_path / "booktabs.pdf", _booktabs_twice))
    assert len(tables) == 2
    for table in tables:
        assert table_rows(table) == [["Item", "Item", ""], ["Animal", "Description", "Price ($)"], *map(list, PRICES)]
