"""Dense statistical tables on PDFs made here, as a statistical abstract sets them: small type, many figure columns a
figure's width apart in groups parted by vertical rules, a group's label centred over its columns, a stub of labels
with dot leaders (some wrapped onto a second, indented line), a headnote above and footnotes below."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind, PageLayout

from .conftest import drawn_page, table_rows

#: The stub's labels (a wrapped one in two parts) and their nine figures: three groups of three years.
ROWS = tuple(
    (label, tuple(figures.split()))
    for label, figures in (
        (("Total, all offenses",), "9,123.4 8,765.2 8,432.1 3,245.6 3,012.3 2,876.5 -3.9 -3.8 -4.5"),
        (("Violent crime",), "1,425.5 1,390.7 1,246.2 506.5 469.0 403.6 -2.4 -10.4 -13.9"),
        (("Murder and nonnegligent", "manslaughter"), "15.6 16.7 14.7 5.5 5.6 4.8 7.1 -12.0 -14.3"),
        (("Forcible rape",), "90.2 94.3 88.1 32.0 31.8 28.6 4.5 -6.6 -10.1"),
        (("Robbery",), "408.0 417.4 367.8 145.0 140.7 119.3 2.3 -11.9 -15.2"),
        (("Property crime",), "10,182.6 10,174.8 9,320.9 3,618.3 3,431.5 3,036.1 -0.1 -8.4 -11.5"),
        (("Burglary",), "2,050.9 2,155.0 2,199.1 728.8 726.7 716.3 5.1 2.0 -1.7"),
        (("All other offenses (except", "traffic)"), "3,064.2 3,012.9 2,876.4 1,089.1 1,016.2 936.9 -1.7 -4.5 -6.1"),
        (("Motor vehicle theft",), "1,160.0 1,235.9 794.6 412.2 416.8 258.8 6.5 -35.7 -31.5"),
        (("Arson",), "77.3 68.8 58.9 27.5 23.2 19.2 -11.0 -14.4 -23.8"),
    )
)
GROUPS = ("Number (1,000)", "Rate per 100,000 population", "Percent change")
YEARS = ("2000", "2005", "2009")
#: The first group's column labels, wrapped over two lines and set on the header's last line (bottom-aligned).
LABELS = (("Total",), ("Under", "18"), ("18 and", "over"))
HEADNOTE = (
    "Offenses reported to the police. Rates are based on the Census Bureau's estimated resident population as of "
    "July 1; data for all years are revised. For definitions of the offenses, see text of this section. Excludes "
    "the offenses that the reporting agencies did not report for the whole year."
)
#: The figures' type size (points), and the pitch of the figure columns' right edges: "10,182.6" at 7 pt is 27 pt
#: wide, so the widest figure of a column ends 3 pt short of the next column's widest (no gap a column gap wide).
SIZE = 7.0
PITCH = 30.0


def _statistical_table(c: object, wrapped: bool = False, rules: bool = True) -> None:
    """The table under its caption and headnote, its footnotes under it; `wrapped`: the first group's column labels
    over two lines; `rules`: the rules over and under the header and under the body, and between the groups."""

    def put(x: float, y: float, text: str, how: str = "left", font: str = "Helvetica") -> None:
        c.setFont(font, SIZE)  # type: ignore[attr-defined]
        {"left": c.drawString, "right": c.drawRightString, "centre": c.drawCentredString}[how](x, y, text)  # type: ignore[attr-defined]

    c.setFont("Helvetica-Bold", 9)  # type: ignore[attr-defined]
    c.drawString(40, 780, "Table 324. Crimes and Crime Rates by Type of Offense: 2000 to 2009")  # type: ignore[attr-defined]
    y, line = 768.0, []
    for word in HEADNOTE.split():
        if c.stringWidth(" ".join([*line, word]), "Helvetica", SIZE) > 480:  # type: ignore[attr-defined]
            put(40, y, " ".join(line))
            y, line = y - 8.5, []
        line.append(word)
    put(40, y, " ".join(line))
    # three groups of three figure columns (right edges), a wider gap and a vertical rule between groups
    xs = [240 + PITCH * k + 12 * (k // 3) for k in range(9)]
    top = y - 3
    line = c.line if rules else lambda *_: None  # type: ignore[attr-defined]
    line(40, top, 520, top)
    y = top - 8
    for g, label in enumerate(GROUPS):
        put((xs[3 * g] - 22 + xs[3 * g + 2]) / 2, y, label, "centre")
    put(40, y - 4, "Offense")
    if wrapped:  # the first group's labels take two lines, the others' one, all ending on the header's last line
        for k, label in enumerate(LABELS):
            for n, part in enumerate(reversed(label)):
                put(xs[k], y - 9 - 8 * (1 - n), part, "right")
        y -= 8
    y -= 9
    for k, x in enumerate(xs):
        if not (wrapped and k < 3):
            put(x, y, YEARS[k % 3], "right")
    line(40, y - 3, 520, y - 3)
    y -= 11
    dot = c.stringWidth(".", "Helvetica", SIZE)  # type: ignore[attr-defined]
    for label, figures in ROWS:
        for n, part in enumerate(label):
            if n == len(label) - 1:  # the label's last line runs its leaders to the figures
                room = xs[0] - 34 - 40 - 6 * n - c.stringWidth(part + " ", "Helvetica", SIZE)  # type: ignore[attr-defined]
                part += " " + "." * int(room / dot)
                for x, figure in zip(xs, figures, strict=True):
                    put(x, y, figure, "right")
            put(40 + 6 * n, y, part)
            y -= 8.5
    bottom = y + 5
    line(40, bottom, 520, bottom)
    for g in (1, 2):
        line(xs[3 * g] - PITCH, top, xs[3 * g] - PITCH, bottom)
    put(40, y - 6, "1 Includes offenses not shown separately. 2 Data for 2009 are preliminary and subject to revision.")
    put(
        40, y - 14.5, "Source: U.S. Department of Justice, Federal Bureau of Investigation, Crime in the United States."
    )


def _layout(path: Path, wrapped: bool = False, rules: bool = True) -> PageLayout:
    content = drawn_page(path, lambda c: _statistical_table(c, wrapped, rules))
    return analyse(content, document_style([content]))


def test_figure_columns_a_figure_apart_between_group_rules_are_a_column_each(tmp_path: Path) -> None:
    layout = _layout(tmp_path / "dense.pdf")
    (table,) = [b for b in layout.blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    # each group's label spans its three columns, each year heads one column, the stub's header both header rows
    assert rows[0] == ["Offense", *(label for label in GROUPS for _ in range(3))]
    assert rows[1] == ["Offense", *YEARS * 3]
    # every label (leaders gone, a wrapped one whole) beside its nine figures, one a cell
    assert rows[2:] == [[" ".join(label), *figures] for label, figures in ROWS]
    # the headnote and the footnotes stay text around it
    texts = [b.text for b in layout.blocks if b.kind is not Kind.TABLE]
    assert any(t.startswith("Offenses reported to the police.") for t in texts)
    assert any("Source: U.S. Department of Justice" in t for t in texts)


def test_column_labels_wrapped_in_narrow_columns_are_one_header_row(tmp_path: Path) -> None:
    # the first group's labels take two lines in their columns, bottom-aligned beside the years of the others
    (table,) = [b for b in _layout(tmp_path / "wrapped.pdf", wrapped=True).blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    assert rows[0] == ["Offense", *(label for label in GROUPS for _ in range(3))]
    assert rows[1] == ["Offense", *(" ".join(label) for label in LABELS), *YEARS * 2]
    assert rows[2:] == [[" ".join(label), *figures] for label, figures in ROWS]


def test_without_rules_two_figures_closer_than_a_column_gap_keep_the_table_going(tmp_path: Path) -> None:
    # "10,182.6" ends 0.4 em short of "10,174.8" in the next column, where every other row leaves a column gap: the
    # row stays in the table (it ended the table there, and the rows under it fell apart into lines of figures)
    (table,) = [b for b in _layout(tmp_path / "bare.pdf", rules=False).blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    assert rows[0][1:] == [label for label in GROUPS for _ in range(3)]
    assert rows[1][1:] == list(YEARS) * 3
    assert rows[2:] == [[" ".join(label), *figures] for label, figures in ROWS]


#: A data set printed as a table with no rule (R's `mtcars` as LaTeX sets it): row names, a header of short column
#: names in the body face, each right-aligned over its column of figures.
CARS = (
    ("", "mpg", "cyl", "disp", "hp", "drat", "wt", "qsec", "gear"),
    ("Mazda RX4", "21.0", "6", "160.0", "110", "3.90", "2.620", "16.46", "4"),
    ("Datsun 710", "22.8", "4", "108.0", "93", "3.85", "2.320", "18.61", "4"),
    ("Hornet 4 Drive", "21.4", "6", "258.0", "110", "3.08", "3.215", "19.44", "3"),
    ("Valiant", "18.1", "6", "225.0", "105", "2.76", "3.460", "20.22", "3"),
    ("Duster 360", "14.3", "8", "360.0", "245", "3.21", "3.570", "15.84", "3"),
    ("Merc 240D", "24.4", "4", "146.7", "62", "3.69", "3.190", "20.00", "4"),
    ("Cadillac Fleetwood", "10.4", "8", "472.0", "205", "2.93", "5.250", "17.98", "3"),
    ("Toyota Corolla", "33.9", "4", "71.1", "65", "4.22", "1.835", "19.90", "4"),
)


def _cars(c: object) -> None:
    # 8 pt type, columns set 6 pt (0.75 em) apart from their widest cell: narrower than a column gap
    size, sep = 8.0, 6.0
    widths = [max(c.stringWidth(row[k], "Times-Roman", size) for row in CARS) for k in range(len(CARS[0]))]  # type: ignore[attr-defined]
    rights = [60 + widths[0]]
    for width in widths[1:]:
        rights.append(rights[-1] + sep + width)
    c.setFont("Times-Roman", size)  # type: ignore[attr-defined]
    for r, row in enumerate(CARS):
        y = 760 - 10 * r
        c.drawString(60, y, row[0])  # type: ignore[attr-defined]
        for x, text in zip(rights[1:], row[1:], strict=True):
            c.drawRightString(x, y, text)  # type: ignore[attr-defined]


def test_columns_of_figures_closer_than_a_column_gap_are_read_by_their_figures(tmp_path: Path) -> None:
    # two figures 0.75 em apart are two values, and each column's name ends where its figures end: at the parent the
    # columns from "disp" to "qsec" were one, under one header cell "disp hp drat wt qsec"
    content = drawn_page(tmp_path / "cars.pdf", _cars)
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    assert table_rows(table) == [list(row) for row in CARS]
