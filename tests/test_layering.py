"""The import graph of `src/modelhost`, read from the source with `ast`, held to the layering of docs/architecture.md.

Every import statement of a module counts: top-level ones, function-local ones and those under `if TYPE_CHECKING:`
alike. Lazy imports are exactly how a cycle or a layering break hides (a backend that imports the host inside a
function runs fine until the day the host imports it back at module level), so the graph is built from the source
text, not from what `import` happens to execute.

Three rules, each with a RATCHET: the violations present when the test was written are listed below, one per line
with the reason it exists. The test fails when a violation appears that is not listed, and also when a listed one
has gone (delete its line then: the ratchet only tightens). An engineer fixing a violation deletes its entry in the
same commit.

(a) Layers: the inference contract imports nothing of modelhost outside `modelhost.inference` except the error
    family (`modelhost.errors`, a leaf); a backend imports only the contract, its own package and leaf libraries,
    never another backend, the host, a door or `modelhost.training`; the host imports no backend, no door and not
    the jobs package; the jobs package (`modelhost.jobs`: the job store, board and executor both job doors stand on)
    imports no door and no backend; a door (wire, http, worker, ray) imports the host, the jobs package and the
    contract, never a backend and never another door (what two doors share goes below them); nothing imports the
    CLI, which composes (it alone hands one door's piece to another, as `serve --ray` gives each replica the HTTP
    door).
(b) No import cycle: no strongly connected component of more than one module.
(c) No private name (`_x`) imported from another module, and no private module imported from outside its package.

(d) Another library reached past its public API (a private module, `x._y`) is reached from one adapter module,
    which says why and which release its names were read from (pyproject.toml bounds the library to it): ADAPTERS.

And one rule of the same kind (what a clone of the repository holds): no file cites a path outside it.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import modelhost

ROOT = "modelhost"
SRC = Path(modelhost.__file__).parent

#: The contract's package.
CONTRACT = "modelhost.inference"
#: Leaf libraries inside modelhost, which every layer may use: they import nothing of modelhost but each other
#: (the error family, the document engine: text layer, layout, emitters, and the lazy package attributes of
#: modelhost._lazy). A test below holds them to that.
LEAVES = ("modelhost.errors", "modelhost.docengine", "modelhost._lazy")
#: The doors: each turns its wire format into host calls (ray: `serve --ray`'s replicas and the Ray Data pools).
DOORS = ("modelhost.wire", "modelhost.http", "modelhost.worker", "modelhost.ray")
#: Durable jobs (store, board, executor, operations both job doors run), below the doors and above the host.
JOBS = "modelhost.jobs"
#: The composition root: the CLI and the `serve` process it runs (and the training CLI it mounts).
CLI = ("modelhost.cli", "modelhost.serve", "modelhost.training.cli", "modelhost.__main__")
HOST = "modelhost.host"
BACKENDS = "modelhost.backends"
TRAINING = "modelhost.training"

#: A library whose private modules modelhost imports -> the one module allowed to import them. (rapidocr's private
#: names are attributes, reached in backends/ocr/rapid.py; llama_cpp's go behind backends/llama_cpp/lowlevel.py.)
ADAPTERS = {
    "ray": "modelhost.ray.raydata",  # Ray Data's execution callback: stopping a run from another thread
    "llama_cpp": "modelhost.backends.llama_cpp.lowlevel",  # contexts, samplers and the log below `Llama`
}

# --------------------------------------------------------------------------------------------------------------------
# RATCHETS. One entry per line; delete an entry in the commit that fixes it (the test says so when one has gone).
# --------------------------------------------------------------------------------------------------------------------

#: (importer, imported): a layering rule broken, with why it is still here.
# fmt: off
LAYERING_VIOLATIONS: dict[tuple[str, str], str] = {
}
# fmt: on

#: The modules of one import cycle (a strongly connected component), sorted: why the cycle is still here.
# fmt: off
CYCLES: dict[tuple[str, ...], str] = {
}
# fmt: on

#: (importer, imported module, private name): why the importer still reaches into it.
# fmt: off
PRIVATE_IMPORTS: dict[tuple[str, str, str], str] = {
}
# fmt: on


# --------------------------------------------------------------------------------------------------------------------
# The graph
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Import:
    """One imported thing: the module it resolves to, and the name taken from it (None for `import x.y`)."""

    importer: str
    module: str
    name: str | None
    line: int


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its `__init__.py`)."""
    out: dict[str, Path] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_names()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _resolve_from(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module of `from ... import` (relative levels counted from the importer's package)."""
    if not node.level:
        return node.module or ""
    package = importer if _is_package(importer) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_of(importer: str) -> Iterator[Import]:
    """Every import of modelhost in one module, wherever the statement stands (function bodies, TYPE_CHECKING)."""
    tree = ast.parse(MODULES[importer].read_text(encoding="utf-8"), filename=str(MODULES[importer]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    yield Import(importer, _known(alias.name), None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(importer, node)
            if base != ROOT and not base.startswith(ROOT + "."):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:  # `from pkg import module`: the edge goes to the module itself
                    yield Import(importer, submodule, None, node.lineno)
                else:
                    yield Import(importer, _known(base), alias.name, node.lineno)


def _known(name: str) -> str:
    """The longest prefix of `name` that is a module of the package (an attribute path ends at its module)."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]


def graph() -> dict[str, set[str]]:
    """importer -> the modules it imports (itself excluded)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for imp in ALL_IMPORTS:
        if imp.module != imp.importer:
            edges[imp.importer].add(imp.module)
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of modules): components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[tuple[str, ...]] = []
    counter = 0
    for start in sorted(set(edges).union(*edges.values())):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


# --------------------------------------------------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------------------------------------------------


def _within(module: str, package: str | tuple[str, ...]) -> bool:
    packages = (package,) if isinstance(package, str) else package
    return any(module == p or module.startswith(p + ".") for p in packages)


def _backend_of(module: str) -> str | None:
    """The backend package a module belongs to (`modelhost.backends.llama_cpp`), or None."""
    if not module.startswith(BACKENDS + "."):
        return None
    return ".".join(module.split(".")[:3])


def layering_break(importer: str, imported: str) -> str | None:
    """Which rule `importer` importing `imported` breaks, in words; None when it breaks none."""
    if _within(imported, CLI) and not _within(importer, CLI):
        return "only the CLI may import the CLI: it composes, nothing depends on it"
    if _within(importer, CONTRACT):
        if not _within(imported, (CONTRACT, *LEAVES)):
            return "the contract imports nothing of modelhost outside modelhost.inference"
        return None
    backend = _backend_of(importer)
    if backend is not None:
        other = _backend_of(imported)
        if other is not None and other != backend:
            return "a backend never imports another backend"
        if _within(imported, (HOST, *DOORS, TRAINING)):
            return "a backend never imports the host, a door or modelhost.training"
        if not _within(imported, (CONTRACT, backend, *LEAVES)):
            return "a backend imports only the contract, its own package and leaf libraries"
        return None
    if _within(importer, HOST) and (_within(imported, (*DOORS, JOBS)) or _backend_of(imported)):
        return "the host imports no door, no backend and not modelhost.jobs (which stands on it)"
    if _within(importer, JOBS) and (_within(imported, DOORS) or _backend_of(imported)):
        return "modelhost.jobs stands below the doors: it imports no door and no backend"
    if _within(importer, DOORS) and _backend_of(imported):
        return "a door imports the host and the contract, never a backend"
    door, other = _door_of(importer), _door_of(imported)
    if door is not None and other is not None and door != other:
        return "a door never imports another door: what two doors share goes below them (modelhost.jobs, the host)"
    return None


def _door_of(module: str) -> str | None:
    """The door a module belongs to (`modelhost.http`), or None."""
    return next((door for door in DOORS if _within(module, door)), None)


def layering_violations() -> dict[tuple[str, str], int]:
    """(importer, imported) -> the first line of such an import, for every import that breaks a layer rule."""
    found: dict[tuple[str, str], int] = {}
    for imp in ALL_IMPORTS:
        if layering_break(imp.importer, imp.module) is not None:
            found.setdefault((imp.importer, imp.module), imp.line)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports() -> dict[tuple[str, str, str], int]:
    """(importer, module, name) -> line, for each private name taken from another module and each private module
    imported from outside its own package."""
    found: dict[tuple[str, str, str], int] = {}
    for imp in ALL_IMPORTS:
        if imp.name is not None and _private(imp.name) and imp.module != imp.importer:
            found.setdefault((imp.importer, imp.module, imp.name), imp.line)
        parts = imp.module.split(".")
        for i, part in enumerate(parts):
            if _private(part):
                package = ".".join(parts[:i])
                if not _within(imp.importer, package):
                    found.setdefault((imp.importer, ".".join(parts[: i + 1]), part), imp.line)
                break
    return found


def library_of_private(module: str) -> str | None:
    """The library of `module` when `module` is one of its private modules (`ray.data._internal.x` -> `ray`)."""
    if module.startswith((ROOT + ".", "__")) or module == ROOT:
        return None
    return module.split(".")[0] if any(_private(part) for part in module.split(".")[1:]) else None


def library_private_imports() -> list[tuple[str, str, int]]:
    """(importer, private module of a library in ADAPTERS, line) for every such import in the package."""
    found = []
    for importer, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            found += [(importer, n, node.lineno) for n in names if library_of_private(n) in ADAPTERS]
    return found


# --------------------------------------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------------------------------------


def _ratchet(kind: str, found: dict[tuple[str, ...], str], listed: dict[tuple[str, ...], str]) -> list[str]:
    problems = []
    for key in sorted(set(found) - set(listed)):
        problems.append(f"new {kind}: {key} ({found[key]}): fix it (the ratchet only tightens)")
    for key in sorted(set(listed) - set(found)):
        problems.append(f"{kind} {key} is gone: delete its entry from {Path(__file__).name}")
    return problems


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    # The point of reading the source: these are imports a runtime trace of module loading would miss.
    local = [
        imp
        for imp in ALL_IMPORTS
        if imp.importer == "modelhost.host.models" and imp.module.startswith("modelhost.inference")
    ]
    assert local, "the host imports the contract; the graph must see it"
    assert len(MODULES) > 100 and all(m.startswith(ROOT) for m in MODULES)


def test_the_checks_catch_what_they_are_for() -> None:
    # The detectors on cases of their own, so a ratchet that passes is known to be able to fail.
    assert layering_break("modelhost.wire.server", "modelhost.backends.llama_cpp.model")
    assert layering_break("modelhost.backends.ocr.model", "modelhost.backends.llama_cpp.model")
    assert layering_break("modelhost.backends.ocr.model", "modelhost.host.models")
    assert layering_break("modelhost.inference.types", "modelhost.host")
    assert layering_break("modelhost.host.models", "modelhost.cli")
    assert layering_break("modelhost.http.docling.tasks", "modelhost.worker.protocol")  # door to door
    assert layering_break("modelhost.ray.replica", "modelhost.http")
    assert layering_break("modelhost.worker.server", "modelhost.http.app")
    assert layering_break("modelhost.jobs.board", "modelhost.worker.protocol")  # jobs/ under the doors
    assert layering_break("modelhost.jobs.documents", "modelhost.backends.ocr.model")
    assert layering_break("modelhost.host.models", "modelhost.jobs.store")  # the host under jobs/
    assert layering_break("modelhost.http.docling.tasks", "modelhost.jobs.board") is None
    assert layering_break("modelhost.http.app", "modelhost.http.docling") is None  # within one door
    assert layering_break("modelhost.serve", "modelhost.http.mounted") is None  # the CLI composes doors
    assert layering_break("modelhost.cli", "modelhost.backends.llama_cpp") is None
    assert layering_break("modelhost.backends.ocr.model", "modelhost.inference.types") is None
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert strongly_connected(edges) == [("a", "b", "c"), ("d", "e")]


def test_leaf_libraries_import_nothing_of_modelhost_but_leaves() -> None:
    # What lets every layer use them without a layering break or a cycle through them.
    bad = [imp for imp in ALL_IMPORTS if _within(imp.importer, LEAVES) and not _within(imp.module, LEAVES)]
    assert not bad, f"a leaf library imports modelhost: {bad}"


def test_layering_rules_hold_except_the_listed_violations() -> None:
    found = {key: f"line {line}: {layering_break(*key)}" for key, line in layering_violations().items()}
    problems = _ratchet("layering violation", found, LAYERING_VIOLATIONS)
    assert not problems, "\n".join(problems)


def test_no_import_cycle_except_the_listed_ones() -> None:
    found = {component: f"{len(component)} modules" for component in strongly_connected(graph())}
    problems = _ratchet("import cycle", found, CYCLES)
    assert not problems, "\n".join(problems)


def test_no_private_name_crosses_a_module_except_the_listed_ones() -> None:
    found = {key: f"line {line}" for key, line in private_imports().items()}
    problems = _ratchet("private import", found, PRIVATE_IMPORTS)
    assert not problems, "\n".join(problems)


def test_a_library_reached_past_its_api_is_reached_from_its_adapter_alone() -> None:
    assert library_of_private("ray.data._internal.execution") == "ray"  # the detector, on cases of its own
    assert library_of_private("ray.data") is None and library_of_private("modelhost._serving") is None
    found = library_private_imports()
    elsewhere = [(i, m, line) for i, m, line in found if ADAPTERS[library_of_private(m) or ""] != i]
    assert not elsewhere, f"reach a library's private module through its adapter (ADAPTERS): {elsewhere}"
    # An adapter that no longer reaches past its library's API is no longer one: delete its entry (and its bound).
    assert {library_of_private(m) for _, m, _ in found} == set(ADAPTERS), found


def test_no_file_cites_a_path_outside_the_repository() -> None:
    # Specs cited as "/work/shared/spec/..." or "../shared/..." exist on one machine only: a reader of a clone finds
    # nothing there. The specs live in docs/ (issue 20).
    outside = re.compile(r"(?:\.\./|/work/)shared/|shared/(?:spec|seeds)/")
    repo = SRC.parents[1]
    texts = [repo / "README.md"] + [
        path
        for folder in ("src", "tests", "bench", "docs")
        for path in sorted((repo / folder).rglob("*"))
        if path.suffix in (".py", ".md", ".toml", ".txt") and path != Path(__file__)
    ]
    cited = [
        f"{path.relative_to(repo)}:{number}"
        for path in texts
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if outside.search(line)
    ]
    assert not cited, f"paths outside the repository cited at: {cited}"
