"""Imports flow one way (docs/architecture.md): capture (collector/, workflow/, the task
log's record) → store/ (and the task log's reads) → views/ → presentation (cli/, web/,
export/, plots.py), each layer importing only from its left but through the few doors
named here, and a foundation module (model, format, the task log's format) from none;
the exports render views and never read the store; the sink protocol knows no sink; the
workflow package imports no presentation; and no module imports itself back through
others (imports inside functions counted). The analyses' own purity is checked in
test_analysis.py."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import daskscope

SRC = Path(daskscope.__file__).parent

#: layers from left to right; a package not named here is a foundation (model, format, ...)
LAYERS = {
    "collector": 0,
    "workflow": 0,
    "client": 0,
    "importers": 0,
    "store": 1,
    "views": 2,
    "cli": 3,
    "web": 3,
    "export": 3,
    "plots": 3,
    "notebook": 3,
}

#: modules whose layer is not their package's: the task log's capture and its reads
#: (the package's other modules, its pure format and forms, are foundation)
MODULE_LAYERS = {
    "daskscope.tasklog.record": 0,
    "daskscope.tasklog.reads": 1,
    "daskscope.tasklog.window": 1,
    "daskscope.tasklog.lookups": 1,
    "daskscope.tasklog.scan": 1,
}

#: the imports that go to the right on purpose: (importer, imported module)
DOORS = {
    # the store sink and its SQLite child: the store's public names and what a sink
    # needs of it (store/batches.py), never its tables or its writer; the scheduler's
    # side of a SQLite file only its errors, the child the URL's parsing
    ("daskscope.collector.store_sink", "daskscope.store"),
    ("daskscope.collector.store_sink", "daskscope.store.batches"),
    ("daskscope.collector.store_sink", "daskscope.store.errors"),
    ("daskscope.collector.store_process", "daskscope.store"),
    ("daskscope.collector.store_process", "daskscope.store.batches"),
    ("daskscope.collector.store_process", "daskscope.store.engine"),
    ("daskscope.collector.store_process", "daskscope.store.errors"),
    # the public API's conveniences, at call time (as pyinstrument's Profiler.print
    # imports its renderers): MetricsCollector.print_summary and .plot
    ("daskscope.workflow.collector", "daskscope.cli.run_summary"),
    ("daskscope.workflow.collector", "daskscope.plots"),
    # ... and its notebook display (_repr_mimebundle_), rendered when shown
    ("daskscope.workflow.collector", "daskscope.notebook.live"),
}

#: the views and the pages ask the Store (its methods: store/reads.py) and write no SQL;
#: these alone still use the database's own terms: (importer, imported)
SQL_DOORS = {
    # ingest hands the writer its rows by table in one transaction (write_parts' interface)
    ("daskscope.web.routes.ingest", "sqlalchemy"),
    ("daskscope.web.routes.ingest", "daskscope.store.schema"),
}

#: circles among the modules that are known and left for later: each a set of modules
KNOWN_CIRCLES = []


@dataclass(frozen=True)
class Import:
    importer: str
    #: the module imported (a name imported from a package resolved to its module)
    module: str
    line: int
    #: the function the import is in (None: the module's top level)
    function: str | None
    #: under ``if TYPE_CHECKING:``: for the type checker only
    types_only: bool


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(("daskscope", *parts))] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of daskscope that ``name`` (a module, or a name in one) is from."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


class _Visitor(ast.NodeVisitor):
    def __init__(self, me: str, is_package: bool) -> None:
        self.me, self.is_package = me, is_package
        self.function: list[str] = []
        self.types_only = 0
        self.found: list[Import] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.function.append(node.name)
        self.generic_visit(node)
        self.function.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        checking = "TYPE_CHECKING" in ast.unparse(node.test)
        self.types_only += checking
        for child in node.body:
            self.visit(child)
        self.types_only -= checking
        for child in node.orelse:
            self.visit(child)

    def _add(self, names: list[str], line: int) -> None:
        modules = {_resolve(n) if n.startswith("daskscope") else n for n in names}
        for module in sorted(m for m in modules if m is not None and m != self.me):
            function = self.function[-1] if self.function else None
            self.found.append(Import(self.me, module, line, function, self.types_only > 0))

    def visit_Import(self, node: ast.Import) -> None:
        self._add([a.name for a in node.names], node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            base = self.me.split(".") if self.is_package else self.me.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join([*base, *([module] if module else [])])
        self._add([module, *(f"{module}.{a.name}" for a in node.names)], node.lineno)


def imports(module: str) -> list[Import]:
    path = MODULES[module]
    visitor = _Visitor(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text()))
    return visitor.found


def every_import() -> Iterator[Import]:
    for module in sorted(MODULES):
        yield from imports(module)


def layer(module: str) -> int | None:
    if module in MODULE_LAYERS:
        return MODULE_LAYERS[module]
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "daskscope" and len(parts) > 1 else None


def package_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_runs_to_the_right_but_through_a_door() -> None:
    wrong = []
    used = set()
    for item in every_import():
        mine, theirs = layer(item.importer), layer(item.module)
        if mine is None or theirs is None or theirs <= mine:
            continue
        if (item.importer, item.module) in DOORS:
            used.add((item.importer, item.module))
            continue
        wrong.append(f"{item.importer}:{item.line} imports {item.module}")
    assert not wrong, "\n".join(wrong)
    assert used == DOORS, f"doors no longer used: {DOORS - used}"


def _speaks_sql(module: str) -> bool:
    return module == "daskscope.store.schema" or module.split(".")[0] == "sqlalchemy"


def test_views_and_pages_ask_the_store_and_write_no_sql() -> None:
    wrong, used = [], set()
    for item in every_import():
        if package_of(item.importer) not in ("daskscope.views", "daskscope.web"):
            continue
        if item.types_only or not _speaks_sql(item.module):
            continue  # a connection's type for the type checker is no query
        if (item.importer, item.module) in SQL_DOORS:
            used.add((item.importer, item.module))
            continue
        wrong.append(f"{item.importer}:{item.line} imports {item.module}")
    assert not wrong, "\n".join(wrong)
    gone = {door for door in SQL_DOORS if door[0] not in MODULES}
    assert used | gone == SQL_DOORS, f"doors no longer used: {SQL_DOORS - used - gone}"
    # nor do they reach for the engine behind the Store
    for module, path in MODULES.items():
        if package_of(module) not in ("daskscope.views", "daskscope.web"):
            continue
        if any(door[0] == module for door in SQL_DOORS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "engine":
                wrong.append(f"{module}:{node.lineno} uses .engine")
    assert not wrong, "\n".join(wrong)


def test_views_routes_and_commands_read_through_the_stores_methods() -> None:
    """A read the Store has as a method (store/reads.py: the task log's reads too) is
    asked of the Store, never imported from its module and handed the store."""
    from daskscope.store.database import Database
    from daskscope.store.reads import StoreReads

    methods = set(vars(StoreReads)) - set(vars(Database))
    wrong = []
    for module, path in MODULES.items():
        if package_of(module) not in (
            "daskscope.views", "daskscope.web", "daskscope.cli", "daskscope.notebook",
        ):  # fmt: skip
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("daskscope.store", "daskscope.tasklog")
            ):
                named = sorted(a.name for a in node.names if a.name in methods)
                if named:
                    wrong.append(f"{module}:{node.lineno} imports {', '.join(named)}")
    assert not wrong, "\n".join(wrong)


def test_the_public_apis_doors_open_only_when_called() -> None:
    # importing daskscope.workflow (every worker does) loads no presentation
    for item in imports("daskscope.workflow.collector"):
        if (item.importer, item.module) in DOORS:
            assert item.function in ("print_summary", "plot", "save_plots", "_repr_mimebundle_"), (
                item
            )


def test_the_exports_render_views_and_never_read_the_store() -> None:
    # type-only imports aside (the one-call conveniences name the Store they are given)
    forbidden = (
        "daskscope.store", "daskscope.collector", "daskscope.workflow", "daskscope.cli",
        "daskscope.web", "daskscope.plots", "sqlalchemy", "distributed",
    )  # fmt: skip
    exports = [m for m in MODULES if m.startswith("daskscope.export")]
    assert len(exports) >= 7
    for module in exports:
        for item in imports(module):
            if item.types_only:
                continue
            assert not item.module.startswith(forbidden), f"{module}:{item.line} {item.module}"
            if package_of(item.module) == "daskscope.views":
                assert item.module == "daskscope.views.export", item


def test_the_sink_protocol_knows_no_sink_and_no_sink_another() -> None:
    sinks = {
        "daskscope.collector.store_sink",
        "daskscope.collector.http_sink",
        "daskscope.collector.memory_sink",
    }
    protocol = imports("daskscope.collector.sink")
    assert {i.module for i in protocol if i.module.startswith("daskscope")} == {"daskscope.model"}
    for sink in sinks:
        for item in imports(sink):
            assert item.module not in sinks | {"daskscope.collector.destination"}, item
    # only the factory picks a sink (a recorder never names one)
    for item in every_import():
        if item.module in sinks and item.importer.startswith("daskscope.collector"):
            assert item.importer == "daskscope.collector.destination", item


def test_the_recorder_never_reaches_into_the_stores_tables_or_writer() -> None:
    for item in every_import():
        if package_of(item.importer) in ("daskscope.collector", "daskscope.workflow"):
            assert item.module not in ("daskscope.store.schema", "daskscope.store.writer"), item


def test_the_workflow_package_imports_no_presentation() -> None:
    presentation = ("daskscope.views", "daskscope.cli", "daskscope.web", "daskscope.export",
                    "daskscope.plots", "daskscope.notebook", "rich", "matplotlib")  # fmt: skip
    for item in every_import():
        if package_of(item.importer) != "daskscope.workflow":
            continue
        if (item.importer, item.module) in DOORS:
            continue
        assert not item.module.startswith(presentation), item
    # and its renderers read a run's record, not the workflow's machinery
    for renderer in ("daskscope.cli.run_summary", "daskscope.plots"):
        for item in imports(renderer):
            if package_of(item.module) == "daskscope.workflow":
                assert item.module in ("daskscope.workflow.run", "daskscope.workflow.chunk"), item


def test_the_backends_registry_imports_no_backend() -> None:
    base = imports("daskscope.workflow.backends.base")
    assert not [i for i in base if i.module.startswith("daskscope")]


def _circles() -> list[set[str]]:
    """Strongly connected groups of modules (a module importing its own package aside:
    the package's ``__init__`` re-exports)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for item in every_import():
        if item.module in MODULES and not item.importer.startswith(item.module + "."):
            graph[item.importer].add(item.module)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        # Tarjan's algorithm without recursion: (module, its neighbours still to see)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, todo = work[-1]
            for nxt in todo:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(group)
    return found


def test_no_new_circle_of_imports() -> None:
    new = [sorted(c) for c in _circles() if c not in KNOWN_CIRCLES]
    assert not new, new


def test_a_foundation_module_imports_no_layer() -> None:
    # (the package's own __init__ aside: the public API re-exports the recorder)
    wrong = [
        f"{item.importer}:{item.line} imports {item.module}"
        for item in every_import()
        if item.importer != "daskscope"
        and layer(item.importer) is None
        and layer(item.module) is not None
        and not item.types_only
    ]
    assert not wrong, "\n".join(wrong)


def test_the_task_logs_layers_name_its_modules() -> None:
    tasklog = {m for m in MODULES if m.startswith("daskscope.tasklog.")}
    assert set(MODULE_LAYERS) <= tasklog
    # its capture loads no store
    for item in imports("daskscope.tasklog.record"):
        assert layer(item.module) in (None, 0), item
    # and the view models ask its reads: none queries the segments' table itself
    for module, path in MODULES.items():
        if module.startswith("daskscope.views"):
            assert "task_segments" not in path.read_text(), module
