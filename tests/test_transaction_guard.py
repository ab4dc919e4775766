"""The guard of "each change is one action and one transaction", read from the code itself:

- nothing below the actions (server/domain, server/boards) commits or rolls back a transaction;
- the worker's and the operator's machinery (server/jobs, server/demo.py, server/backup) never
  commits or rolls back a session by hand: a step of its own opens its transaction
  (`session_scope`), as an action does (`transaction`);
- no surface (server/web, server/api, server/cli, cli/) commits, rolls back or opens one;
- no surface calls a domain function that writes (one that adds, flushes, deletes or merges on its
  session, or executes an UPDATE/INSERT/DELETE, directly or through another of its module).

What still does is listed below with its count and why: the lists may only shrink (a count above
its entry, a file or function not listed, or an entry that no longer stands, fails), so a new rule
written in a surface or a new
commit in the domain is caught. A session is recognised by its type, whatever it is called: a
parameter annotated `Session`, a variable made by `Session(...)`, `session_scope(...)`, `db()` or
a backend's `.session()` (and, where a parameter has no annotation, one named `s` or `session`).
Every package is read, its subpackages too. `test_the_guard_sees_*` show each check failing on
code that breaks it."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOWER = ("server/domain", "server/boards")
MACHINERY = ("server/jobs", "server/demo.py", "server/backup")
SURFACES = ("server/web", "server/api", "server/cli", "cli")
WRITES = {"add", "add_all", "flush", "delete", "merge"}
TX = {"commit", "rollback"}

# what still commits below the actions, with why (nothing)
LOWER_ALLOWED: dict[tuple[str, str], int] = {}
# every way a transaction begins below the actions, by the file: a transaction of its own
# (`session_scope(...)`, an engine's or a connection's `.begin()`) or a nested one
# (`begin_nested()`, which only server.db.savepoint may open: none is allowed here); those that
# stand, with why
LOWER_OWN_ALLOWED = {
    # a value drawn once for good, first writer wins (the shared partition, its redraw before any
    # score, a phase's link to it, a board's bootstrap seed): not undone with the action that
    # first needed it
    ("server/domain/partitions.py", "session_scope"): 4,
    # the worker's and the reconciler's steps (a score recorded, a submission requeued) and the
    # start-up's default phases: no action is open
    ("server/domain/lifecycle.py", "session_scope"): 2,
    # the worker's steps of a blind run: finished, failed for the server's reasons, put back in
    # the queue when the object store did not answer
    ("server/domain/code_runs.py", "session_scope"): 4,
    # the code runs' queues: a worker's claim (started under a lease), its heartbeat's renewal,
    # the reconciler's taking back of a run whose lease ran out
    ("server/domain/run_queue.py", "session_scope"): 3,
    # a token's last use, marked in a step of its own (what the request does is not part of it)
    ("server/domain/accounts.py", "begin"): 1,
}
# the machinery's hand-made commits and rollbacks, with why
MACHINERY_ALLOWED = {
    # the demo's seed commits its teams, then each phase's runs (queued once committed): a
    # start-up step of `palimpsest serve --demo`, not a request
    ("server/demo.py", "commit"): 2,
    # the restore drill rebuilds each published snapshot to compare it and throws away what
    # building it wrote
    ("server/backup/verify.py", "rollback"): 1,
}
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
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def _rel(p: Path) -> str:
    return str(p.relative_to(REPO))


def _module(p: Path) -> str:
    return ".".join(p.relative_to(REPO).with_suffix("").parts)


SESSION_MAKERS = {"Session", "session_scope", "db", "local_session", "transaction", "session"}


def _makes_session(node: ast.AST | None) -> bool:
    """A call that returns a session: `Session(...)`, `session_scope(...)`, `db()`,
    `x.session()`."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in SESSION_MAKERS


def session_names(fn: ast.AST) -> set[str]:
    """The names a function (or a module's top level) binds to a session, by type: parameters
    annotated `Session`, variables assigned or bound by `with` from what makes one; an
    unannotated parameter named `s` or `session`."""
    names = set()
    args = getattr(fn, "args", None)
    if args is not None:
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            ann = ast.unparse(a.annotation) if a.annotation is not None else None
            if (ann is not None and "Session" in ann) or (
                ann is None and a.arg in ("s", "session")
            ):
                names.add(a.arg)
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and _makes_session(n.value):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            if "Session" in ast.unparse(n.annotation) or _makes_session(n.value):
                names.add(n.target.id)
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                if _makes_session(item.context_expr) and isinstance(item.optional_vars, ast.Name):
                    names.add(item.optional_vars.id)
    return names


def _on_session(call: ast.Call, names: set[str]) -> bool:
    """Whether the method call's receiver is a session: a name bound to one, or a call that
    makes one (`db().commit()`)."""
    obj = call.func.value
    return (isinstance(obj, ast.Name) and obj.id in names) or _makes_session(obj)


def _scopes(tree: ast.AST):
    """Each function (its own session names) and the module's top level."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    top = ast.Module(body=[n for n in tree.body if n not in funcs], type_ignores=[])
    for fn in funcs:
        own = [n for n in fn.body]
        yield fn, ast.Module(body=own, type_ignores=[])
    yield top, top


def tx_calls(tree: ast.AST, rel: str, names=TX) -> collections.Counter:
    """`x.commit()` / `x.rollback()` on a session (recognised by type: `session_names`), not on a
    Redis pipe or an SMTP connection; with other `names`, also opening a transaction."""
    got = collections.Counter()
    seen = set()
    for scope, body in _scopes(tree):
        sessions = session_names(scope)
        for c in ast.walk(body):
            if not isinstance(c, ast.Call) or id(c) in seen:
                continue
            f = c.func
            if isinstance(f, ast.Attribute) and f.attr in names and _on_session(c, sessions):
                seen.add(id(c))
                got[(rel, f.attr)] += 1
            if isinstance(f, ast.Name) and f.id in ("transaction", "session_scope"):
                if names is not TX:
                    seen.add(id(c))
                    got[(rel, f.id)] += 1
    return got


def writers(sources: dict[str, str]) -> dict[str, set[str]]:
    """Public functions of each module (name -> source) that write to the database."""
    out = {}
    for mod, src in sources.items():
        tree = ast.parse(src)
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        # the module's functions that build an UPDATE/INSERT/DELETE (a statement built once and
        # executed with its parameters bound at each call: `execute(_mark_statement(), {...})`)
        builds = {
            name
            for name, fn in funcs.items()
            if any(
                isinstance(c, ast.Call)
                and ast.unparse(c).startswith(("update(", "insert(", "delete("))
                for c in ast.walk(fn)
            )
        }
        w = set()
        for name, fn in funcs.items():
            sessions = session_names(fn)
            for c in ast.walk(fn):
                if not isinstance(c, ast.Call) or not isinstance(c.func, ast.Attribute):
                    continue
                if c.func.attr in WRITES | {"commit"} and _on_session(c, sessions):
                    w.add(name)
                if c.func.attr == "execute" and c.args:
                    arg = ast.unparse(c.args[0])
                    if arg.startswith(("update(", "insert(", "delete(")):
                        w.add(name)
                    a0 = c.args[0]
                    if isinstance(a0, ast.Call) and isinstance(a0.func, ast.Name):
                        if a0.func.id in builds:
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
    """What goes past its entry, and (so that a list only shrinks) an entry that no longer
    stands as written."""
    over = [
        f"{k}: {n} (allowed {allowed.get(k, 0)})" for k, n in found.items() if n > allowed.get(k, 0)
    ]
    return over + [f"{k}: listed {n}, found {found.get(k, 0)}" for k, n in allowed.items()
                   if found.get(k, 0) < n]  # fmt: skip


def _lower_writers() -> dict[str, set[str]]:
    return writers({_module(p): p.read_text() for p in _files(*LOWER)})


def own_transactions(tree: ast.AST, rel: str) -> collections.Counter:
    """Every call that begins a transaction: `session_scope(...)` (by name or attribute), `.begin()`
    on anything (an engine, a connection, a session) and `.begin_nested()`."""
    got = collections.Counter()
    for c in ast.walk(tree):
        if not isinstance(c, ast.Call):
            continue
        f = c.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name == "session_scope" or (
            isinstance(f, ast.Attribute) and name in ("begin", "begin_nested")
        ):
            got[(rel, name)] += 1
    return got


# ----------------------------------------------------------------------------- the checks


def test_nothing_below_the_actions_commits():
    found = collections.Counter()
    for p in _files(*LOWER):
        found += tx_calls(ast.parse(p.read_text()), _rel(p))
    assert not _over(found, LOWER_ALLOWED), _over(found, LOWER_ALLOWED)


def test_every_transaction_begun_below_the_actions_is_listed():
    found = collections.Counter()
    for p in _files(*LOWER):
        found += own_transactions(ast.parse(p.read_text()), _rel(p))
    assert not _over(found, LOWER_OWN_ALLOWED), _over(found, LOWER_OWN_ALLOWED)
    planted = "def f(s, engine):\n    with s.begin_nested():\n        pass\n"
    planted += "    with engine.begin() as c:\n        pass\n    with session_scope(engine):\n"
    planted += "        pass\n"
    assert own_transactions(ast.parse(planted), "x.py") == {
        ("x.py", "begin_nested"): 1,
        ("x.py", "begin"): 1,
        ("x.py", "session_scope"): 1,
    }


def test_savepoint_is_the_only_nested_transaction():
    """`begin_nested()` is written once, in server.db.savepoint (SQLite's transaction opened first,
    so that the savepoint's release does not commit it): everywhere else a nested transaction is
    `savepoint(s)`."""
    found = collections.Counter()
    for p in _files("server", "cli"):
        for (rel, name), n in own_transactions(ast.parse(p.read_text()), _rel(p)).items():
            if name == "begin_nested":
                found[rel] += n
    assert found == {"server/db.py": 1}, found


def test_no_action_commits_or_rolls_back_by_hand():
    """An action is the transaction (`@action` opens and ends it): none of them, the one intake
    of every upload among them (a file, a system, a large upload's completion), commits or rolls
    back a session itself."""
    found = collections.Counter()
    for p in _files("server/actions"):
        found += tx_calls(ast.parse(p.read_text()), _rel(p))
    assert not found, found
    planted = "def f(*, s):\n    s.add(x)\n    s.commit()\n"
    assert tx_calls(ast.parse(planted), "server/actions/x.py")  # the check sees one


def test_the_machinery_opens_its_own_transactions():
    found = collections.Counter()
    for p in _files(*MACHINERY):
        found += tx_calls(ast.parse(p.read_text()), _rel(p))
    assert not _over(found, MACHINERY_ALLOWED), _over(found, MACHINERY_ALLOWED)


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


def _machinery_found(planted: dict[str, str] | None = None) -> collections.Counter:
    found = collections.Counter()
    for p in _files(*MACHINERY):
        found += tx_calls(ast.parse(p.read_text()), _rel(p))
    for rel, src in (planted or {}).items():
        found += tx_calls(ast.parse(src), rel)
    return found


def test_the_guard_sees_a_planted_commit_in_jobs_demo_and_backup():
    """A commit or rollback by hand in the worker's or the operator's machinery fails the check,
    whatever the session is called; a step opened with session_scope does not."""
    assert not _over(_machinery_found(), MACHINERY_ALLOWED)
    hand = (
        "def step(engine):\n    with Session(engine) as work:\n        work.add(1)\n"
        "        work.commit()\n"
    )
    own = "def step(engine):\n    with session_scope(engine) as work:\n        work.add(1)\n"
    for rel in ("server/jobs/planted.py", "server/demo.py", "server/backup/planted.py"):
        assert _over(_machinery_found({rel: hand}), MACHINERY_ALLOWED), rel
        assert not _over(_machinery_found({rel: own}), MACHINERY_ALLOWED), rel
    rollback = "def verify(db_session: Session):\n    db_session.rollback()\n"
    assert _over(_machinery_found({"server/backup/planted.py": rollback}), MACHINERY_ALLOWED)


def test_the_guard_sees_a_write_through_a_session_not_named_s():
    """Writes are recognised by the session's type: a parameter annotated Session, or a variable
    made by Session(...) / db(), whatever its name; a Redis pipe's `delete` is no write."""
    domain = {
        "server.domain.m": "def low(conn: Session, x):\n    conn.add(x)\n\n"
        "def made(engine, x):\n    work = Session(engine)\n    work.merge(x)\n\n"
        "def pipe(r, key):\n    p = r.pipeline()\n    p.delete(key)\n\n"
        "def high(conn: Session):\n    low(conn, 1)\n"
    }
    assert writers(domain) == {"server.domain.m": {"low", "made", "high"}}
    src = "def f(conn: Session):\n    conn.commit()\n\ndef g(redis):\n    redis.commit()\n"
    assert tx_calls(ast.parse(src), "server/domain/new.py") == {
        ("server/domain/new.py", "commit"): 1
    }


def test_the_guard_sees_a_write_through_a_statement_built_once():
    """An UPDATE/INSERT/DELETE built once by a function of the module and executed with its
    parameters (`own.execute(_mark(), {...})`) is a write, on whatever it is executed; a select
    built once is not."""
    domain = {
        "server.domain.m": "def _mark():\n    return update(T).values(x=bindparam('x'))\n\n"
        "def _count():\n    return select(T.id)\n\n"
        "def marks(engine):\n    with engine.begin() as own:\n"
        "        own.execute(_mark(), {'x': 1})\n\n"
        "def counts(s):\n    return s.execute(_count()).all()\n"
    }
    assert writers(domain) == {"server.domain.m": {"marks"}}
