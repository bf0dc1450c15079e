"""A ruled grid read from pixels whose header cell's line pokes out of the table (scantable._into_cells).

Found on a scan of a policy report's appendix table (scan/scan_tablesdev_hydrogen_projects_a1): its header is set
white on a dark band, and the detector's box of one header line ("Expected", over "project completion date") rose
past the band's top rule, so the ruled-table finder, which reads the words inside the frame's cells, left it as a
line of text above an otherwise whole 12 x 8 grid. `scantable.completed`, which reads a frame again from word
positions where the finder left lines loose (a booktabs table whose body rows it did not stack), then threw the grid
away: positions made each wrapped cell's lines rows of their own and read "In production" as "production In".
"""

from __future__ import annotations

from modelhost.backends.ocr.scantable import completed
from modelhost.docengine.types import Block, Cell, Kind, Table, Word

#: The grid as the ruled-table finder read it: (row, column) -> (text, cell box); the header's last cell lacks its
#: first line, which poked out of the band.
CELLS = {
    (0, 0): ("Status", (10.0, 100.0, 60.0, 120.0)),
    (0, 1): ("Project name", (60.0, 100.0, 200.0, 120.0)),
    (0, 2): ("project completion date", (200.0, 100.0, 300.0, 120.0)),
    (1, 0): ("In production", (10.0, 120.0, 60.0, 150.0)),
    (1, 1): ("Ordos Jungar Banner Narisong Photovoltaic Hydrogen Project", (60.0, 120.0, 200.0, 150.0)),
    (1, 2): ("2023", (200.0, 120.0, 300.0, 150.0)),
    (2, 0): ("Planned", (10.0, 150.0, 60.0, 180.0)),
    (2, 1): ("Envision Zero Carbon Technology Hydrogen Project", (60.0, 150.0, 200.0, 180.0)),
    (2, 2): ("2028", (200.0, 150.0, 300.0, 180.0)),
}
#: The detector lines as the recogniser gave them: (text, box); wrapped cells in lines 8 points apart.
LINES = [
    ("Expected", (220.0, 96.0, 262.0, 108.0)),
    ("Status", (14.0, 104.0, 45.0, 116.0)),
    ("Project name", (64.0, 104.0, 120.0, 116.0)),
    ("project completion date", (204.0, 104.0, 296.0, 116.0)),
    ("In", (28.0, 122.0, 38.0, 134.0)),
    ("production", (14.0, 130.0, 56.0, 142.0)),
    ("Ordos Jungar Banner Narisong", (64.0, 122.0, 190.0, 134.0)),
    ("Photovoltaic Hydrogen Project", (64.0, 130.0, 190.0, 142.0)),
    ("2023", (204.0, 126.0, 224.0, 138.0)),
    ("Planned", (14.0, 156.0, 50.0, 168.0)),
    ("Envision Zero Carbon", (64.0, 152.0, 150.0, 164.0)),
    ("Technology Hydrogen Project", (64.0, 160.0, 190.0, 172.0)),
    ("2028", (204.0, 156.0, 224.0, 168.0)),
]


def test_a_header_line_poking_out_of_a_ruled_grid_joins_its_cell_and_the_grid_stays() -> None:
    table = Table(3, 3, tuple(Cell(r, c, text, header=r == 0, bbox=box) for (r, c), (text, box) in CELLS.items()))
    found = (
        Block(Kind.TEXT, LINES[0][1], "Expected"),
        Block(Kind.TABLE, (10.0, 100.0, 300.0, 180.0), table=table),
    )
    words = [Word(text, box, size=10.0, line=k) for k, (text, box) in enumerate(LINES)]
    (block,) = completed(found, words, ())
    assert block.table is not None
    grid = [[cell.text if cell else "" for cell in row] for row in block.table.grid()]
    assert grid == [
        ["Status", "Project name", "Expected project completion date"],
        ["In production", "Ordos Jungar Banner Narisong Photovoltaic Hydrogen Project", "2023"],
        ["Planned", "Envision Zero Carbon Technology Hydrogen Project", "2028"],
    ]
