"""The product's import graph: no circle, declared layers, few commented function-level imports.

Every module of the product is parsed (not imported): imports at module level and inside
functions both count, so a circle hidden in a function body is found too. The same layers are
declared for import-linter in pyproject.toml (`lint-imports`).
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("server", "scorer", "tasks", "cli", "baselines")

# Top-level packages, highest first: a package may import only packages listed after it (the same
# layers as pyproject.toml's import-linter contracts). The command line sits on everything; the
# server never imports it; the baselines only write submission files (recording them is the
# server's); `scorer` and `tasks` know nothing of Flask, the database, the baselines or the CLI.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("server",),
    ("baselines",),
    ("scorer",),
    ("tasks",),
)

# Function-level imports allowed in the product, each with a comment saying why: a heavy optional
# package (torch, transformers, matplotlib, pyarrow, scipy), or a module that `palimpsest --help`
# (or `validate`, or a local server command such as `tokens create`) must not load.
# 81 on merging the object store, blind runs, releases and lazy commands; 85 -> 88: the task specs'
# reader loads with the first task lookup (tasks/__init__.py), and Markdown's renderer and sanitizer
# with the first page rendered (server/domain/sanitize.py); 90: the queue and the outbox of
# server.jobs.dispatch, loaded when a job is first enqueued, and numba's compiled sweep
# (scorer/bootstrap.py), with the first token statistics; 91: jax in agreement_bayes.keep_compiled
# 92: the remote phase actions read their declared options when one runs (cli/organizer/phases.py).
# From here on the command line (cli/) counts apart like server/cli/ (below): 70 elsewhere after
# the blind runs' gate, the statistics' queue, the signed backups and the papers' protocols were
# merged with 16 imports moved to their modules' tops; 53 (under 60, issue 48): jax and numpyro
# behind one loader (tasks.agreement_bayes._deps), torch behind one (baselines.models.load_torch),
# Alembic behind one (server.migrate.alembic), the queue and the outbox in one statement, the
# reconciler's action at its module's top (the reconciler sits above the actions)
MAX_FUNCTION_IMPORTS = 78  # 78: the store's direct requests load botocore's signer, request
# class and credentials, and its CA bundle's lookup (5), only on a site with a store;
# 59: pyarrow loaded by the spans family alone (4), the span rows (1);
# 63: scipy.stats where Spearman is computed (4), not when the server is imported (1.2 s a process);
# 66: numba, scipy.special and scipy.sparse behind one loader each (scorer.lazy), not when the
# server is imported (0.9 s of CPU a process); 73: the boards queue's render job (server.jobs.
# board_jobs) loads the web layer it renders with on first use (the jobs sit below the web)
# server/cli.py holds the server's commands on `palimpsest`; cli/main.py loads it only when one of
# them runs, and each command imports what it uses in its own body (a local command is a process
# of its own: what it imports is its start-up time), as the module says once at its top. Its
# imports are counted apart, under their own ceiling, and need no comment each.
COMMAND_MODULES: dict[str, int] = {
    "server/cli/": 62,  # the package, together; 61 -> 62: its split
    "cli/": 27,  # the remote and offline commands, as command modules
}


@dataclass(frozen=True)
class Import:
    """One import statement of a product module, resolved to a product module (or not)."""

    source: str  # the importing module
    target: str  # the imported module (a product module, or the external name)
    path: Path
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    """`server/web/pages.py` -> `server.web.pages`; a package's `__init__` is the package."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    """Every module of the product, by dotted name."""
    mods = {}
    for pkg in PRODUCT:
        for path in sorted((REPO / pkg).rglob("*.py")):
            mods[module_name(path)] = path
    return mods


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The imports of one module; `from a import b` targets `a.b` where that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parents = _parents(tree)
    is_pkg = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        else:
            continue
        inside = _in_function(node, parents)
        for target in dict.fromkeys(targets):
            found.append(Import(name, target, path, node.lineno, inside))
    return found


def all_imports() -> list[Import]:
    """Every import statement of the product (the sources parsed once per test process: three
    tests read them)."""
    return list(_all_imports())


@functools.cache
def _all_imports() -> tuple[Import, ...]:
    modules = product_modules()
    return tuple(imp for name, path in modules.items() for imp in imports_of(name, path, modules))


def graph() -> dict[str, set[str]]:
    """Edges between product modules (an import of `a.b.c` runs `a.b.c`; parents not counted)."""
    modules = product_modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for imp in all_imports():
        target = imp.target
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != imp.source:
            edges[imp.source].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
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
                        found.append(sorted(component))
    return found


def a_cycle(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One concrete cycle through the first module of a component, to print."""
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    while True:
        nxt = sorted(edges[path[-1]] & members)
        if start in nxt and len(path) > 1:
            return path + [start]
        fresh = [n for n in nxt if n not in seen]
        if not fresh:  # pragma: no cover - a component always closes
            return path
        path.append(fresh[0])
        seen.add(fresh[0])


def rank(module: str) -> int:
    """The layer of a module's top-level package (0 is the highest)."""
    top = module.split(".")[0]
    return next(i for i, layer in enumerate(LAYERS) if top in layer)


def test_no_import_circle() -> None:
    """No circle between product modules, counting imports inside functions too."""
    edges = graph()
    found = circles(edges)
    report = "\n".join(" -> ".join(a_cycle(c, edges)) + f"  ({len(c)} modules)" for c in found)
    assert not found, f"import circles:\n{report}"


def test_layers() -> None:
    """A package imports only packages of a lower layer (or modules of its own package)."""
    bad = []
    for imp in all_imports():
        top = imp.target.split(".")[0]
        src = imp.source.split(".")[0]
        if top not in PRODUCT or top == src:
            continue
        if rank(imp.target) <= rank(imp.source):
            bad.append(
                f"{imp.path.relative_to(REPO)}:{imp.line}: {imp.source} imports {imp.target}"
            )
    assert not bad, "imports against the declared layers " + repr(LAYERS) + ":\n" + "\n".join(bad)


def function_imports() -> list[Import]:
    """Import statements inside function bodies (one entry per statement)."""
    seen = {}
    for imp in all_imports():
        if imp.in_function:
            seen.setdefault((imp.path, imp.line), imp)
    return list(seen.values())


def _commented(path: Path, line: int, lines_cache: dict[Path, list[str]]) -> bool:
    """A comment on the import's line, or on the line above its block of consecutive imports."""
    lines = lines_cache.setdefault(path, path.read_text(encoding="utf-8").splitlines())
    if "#" in lines[line - 1]:
        return True
    k = line - 2
    while k >= 0 and lines[k].strip().startswith(("import ", "from ")):
        k -= 1
    return k >= 0 and "#" in lines[k]


def _command_module(rel: str) -> str | None:
    """The entry of COMMAND_MODULES a file counts under (a file, or a package's folder)."""
    return next(
        (k for k in COMMAND_MODULES if rel == k or (k.endswith("/") and rel.startswith(k))), None
    )


def test_function_imports_few_and_commented() -> None:
    """Imports inside functions are rare, and each says why (a heavy package, a circle)."""
    found = function_imports()
    cache: dict[Path, list[str]] = {}
    silent = [
        f"{imp.path.relative_to(REPO)}:{imp.line}: {imp.target}"
        for imp in found
        if not _command_module(str(imp.path.relative_to(REPO)))
        and not _commented(imp.path, imp.line, cache)
    ]
    assert not silent, "function-level imports without a comment saying why:\n" + "\n".join(silent)
    per_file: dict[str, int] = {}
    for imp in found:
        rel = _command_module(str(imp.path.relative_to(REPO))) or str(imp.path.relative_to(REPO))
        per_file[rel] = per_file.get(rel, 0) + 1
    for rel, ceiling in COMMAND_MODULES.items():
        assert per_file.get(rel, 0) <= ceiling, f"{rel}: {per_file.get(rel, 0)} > {ceiling}"
    rest = sum(n for rel, n in per_file.items() if rel not in COMMAND_MODULES)
    worst = sorted(per_file.items(), key=lambda kv: -kv[1])[:8]
    assert rest < MAX_FUNCTION_IMPORTS, f"{rest} function-level imports; most in {worst}"


def _contracts() -> list[dict]:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["importlinter"]["contracts"]


def test_every_jobs_module_sits_in_a_server_layer() -> None:
    """Each module of server.jobs is named in a layer of the server's contract (`lint-imports`
    then checks what it imports), and the domain is forbidden the jobs and the boards."""
    server_layers = next(c for c in _contracts() if c["name"].startswith("Inside server"))
    named = {m.strip() for layer in server_layers["layers"] for m in re.split(r"[:|]", layer)}
    jobs = [
        name
        for name in product_modules()
        if name.startswith("server.jobs.") and name.count(".") == 2
    ]
    assert len(jobs) > 10
    missing = [j for j in jobs if j not in named and "server.jobs" not in named]
    assert not missing, f"server.jobs modules in no layer of the server's contract: {missing}"
    forbidden = next(c for c in _contracts() if c["name"].startswith("The domain imports"))
    assert forbidden["source_modules"] == ["server.domain"]
    assert set(forbidden["forbidden_modules"]) == {"server.jobs", "server.boards"}


def test_checker_finds_what_it_should() -> None:
    """The circle finder reports a planted circle and passes a chain."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert a_cycle(["a", "b", "c"], {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


if __name__ == "__main__":  # a report to work from: circles and counts
    edges = graph()
    for comp in circles(edges):
        print(len(comp), " -> ".join(a_cycle(comp, edges)))
        print("   members:", " ".join(comp))
    print(len(function_imports()), "function-level import statements")
