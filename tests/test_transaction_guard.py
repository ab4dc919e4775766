"""The guard of "each change is one action and one transaction", read from the code itself:

- nothing below the actions (server/domain, server/boards) commits or rolls back a transaction;
- no surface (server/web, server/api, server/cli, cli/) commits, rolls back or opens one;
- no surface calls a domain function that writes (one that adds, flushes, deletes or merges on its
  session, or executes an UPDATE/INSERT/DELETE, directly or through another of its module).

What still does is listed below with its count and why: the lists may only shrink (a count above
its entry, a file or function not listed, or an entry that no longer stands, fails), so a new rule
written in a surface or a new
commit in the domain is caught. `test_the_guard_sees_*` show each check failing on code that
breaks it."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOWER = ("server/domain", "server/boards")
SURFACES = ("server/web", "server/api", "server/cli", "cli")
WRITES = {"add", "add_all", "flush", "delete", "merge"}
TX = {"commit", "rollback"}

# what still commits below the actions, with why (nothing)
LOWER_ALLOWED: dict[tuple[str, str], int] = {}
# surfaces that still control a transaction: the server's shell opens its session per command
SURFACE_TX_ALLOWED: dict[tuple[str, str], int] = {}
# surfaces that still call a writing domain function, with why
SURFACE_CALLS_ALLOWED = {
    # the request's bearer token: its last use marked in a step of its own
    ("server/web/auth.py", "server.domain.accounts.user_for_token"): 1,
}


def _files(*folders: str) -> list[Path]:
    out = []
    for f in folders:
        p = REPO / f
        out += sorted(p.glob("*.py")) if p.is_dir() else [p]
    return out


def _rel(p: Path) -> str:
    return str(p.relative_to(REPO))


def _module(p: Path) -> str:
    return ".".join(p.relative_to(REPO).with_suffix("").parts)


def tx_calls(tree: ast.AST, rel: str, names=TX) -> collections.Counter:
    """`x.commit()` / `x.rollback()` on a session (not on a Redis pipe or an SMTP connection)."""
    got = collections.Counter()
    for c in ast.walk(tree):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr in names:
            obj = ast.unparse(f.value)
            if obj in ("s", "session", "db()", "own") or obj.endswith(("session", ".s")):
                got[(rel, f.attr)] += 1
        if isinstance(f, ast.Name) and f.id in ("transaction", "session_scope") and names is not TX:
            got[(rel, f.id)] += 1
    return got


def writers(sources: dict[str, str]) -> dict[str, set[str]]:
    """Public functions of each module (name -> source) that write to the database."""
    out = {}
    for mod, src in sources.items():
        tree = ast.parse(src)
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        w = set()
        for name, fn in funcs.items():
            for c in ast.walk(fn):
                if not isinstance(c, ast.Call) or not isinstance(c.func, ast.Attribute):
                    continue
                if c.func.attr in WRITES | {"commit"} and ast.unparse(c.func.value) in (
                    "s",
                    "session",
                ):
                    w.add(name)
                if c.func.attr == "execute" and c.args:
                    arg = ast.unparse(c.args[0])
                    if arg.startswith(("update(", "insert(", "delete(")):
                        w.add(name)
        grew = True
        while grew:  # through the module's own functions
            grew = False
            for name, fn in funcs.items():
                if name not in w and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in w
                    for c in ast.walk(fn)
                ):
                    w.add(name)
                    grew = True
        out[mod] = {x for x in w if not x.startswith("_")}
    return out


def surface_calls(tree: ast.AST, rel: str, writing: dict[str, set[str]]) -> collections.Counter:
    """Calls of a writing domain function, through `from server.domain import m` (m.f()) or
    `from server.domain.m import f` (f())."""
    mods, names = {}, {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            for a in n.names:
                full = f"{n.module}.{a.name}"
                if full in writing:
                    mods[a.asname or a.name] = full
                elif a.name in writing.get(n.module, ()):
                    names[a.asname or a.name] = full
    got = collections.Counter()
    for c in ast.walk(tree):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            m = mods.get(f.value.id)
            if m and f.attr in writing[m]:
                got[(rel, f"{m}.{f.attr}")] += 1
        elif isinstance(f, ast.Name) and f.id in names:
            got[(rel, names[f.id])] += 1
    return got


def _over(found: collections.Counter, allowed: dict) -> list[str]:
    return [
        f"{k}: {n} (allowed {allowed.get(k, 0)})" for k, n in found.items() if n > allowed.get(k, 0)
    ]


def _lower_writers() -> dict[str, set[str]]:
    return writers({_module(p): p.read_text() for p in _files(*LOWER)})


# ----------------------------------------------------------------------------- the checks


def test_nothing_below_the_actions_commits():
    found = collections.Counter()
    for p in _files(*LOWER):
        found += tx_calls(ast.parse(p.read_text()), _rel(p))
    assert not _over(found, LOWER_ALLOWED), _over(found, LOWER_ALLOWED)


def test_no_surface_commits_or_opens_a_transaction():
    found = collections.Counter()
    for p in _files(*SURFACES):
        found += tx_calls(ast.parse(p.read_text()), _rel(p), TX | {"transaction"})
    assert not _over(found, SURFACE_TX_ALLOWED), _over(found, SURFACE_TX_ALLOWED)


def test_no_surface_calls_a_writing_domain_function():
    writing = _lower_writers()
    assert "create_phase" in writing["server.domain.lifecycle"]  # the scan sees what writes
    found = collections.Counter()
    for p in _files(*SURFACES):
        found += surface_calls(ast.parse(p.read_text()), _rel(p), writing)
    assert not _over(found, SURFACE_CALLS_ALLOWED), _over(found, SURFACE_CALLS_ALLOWED)


# ----------------------------------------------------------------------------- the guard fails


def test_the_guard_sees_a_commit_in_the_domain():
    src = "def f(s, x):\n    s.add(x)\n    s.commit()\n"
    assert tx_calls(ast.parse(src), "server/domain/new.py") == {
        ("server/domain/new.py", "commit"): 1
    }


def test_the_guard_sees_a_surface_writing_through_the_domain():
    domain = {
        "server.domain.m": "def low(s):\n    s.flush()\n\ndef high(s):\n    low(s)\n\n"
        "def reads(s):\n    return s.get(1)\n"
    }
    writing = writers(domain)
    assert writing == {"server.domain.m": {"low", "high"}}
    view = "from server.domain import m\nfrom server.domain.m import high\n\ndef view(s):\n"
    view += "    m.low(s)\n    high(s)\n    m.reads(s)\n    db().commit()\n"
    tree = ast.parse(view)
    assert surface_calls(tree, "server/web/x.py", writing) == {
        ("server/web/x.py", "server.domain.m.low"): 1,
        ("server/web/x.py", "server.domain.m.high"): 1,
    }
    assert tx_calls(tree, "server/web/x.py") == {("server/web/x.py", "commit"): 1}
