"""The board builder stays in parts: no function in server/boards/ has more than 30 branches,
counted as ruff's PLR0912 (pylint's too-many-branches) counts them, and `build_board` stays
short. Read from the source with `ast`: no database, no server."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

BOARDS = Path(__file__).resolve().parent.parent / "server" / "boards"
MAX_BRANCHES = 30
MAX_BUILD_LINES = 80


def branches(stmts: list[ast.stmt]) -> int:
    """The branches of a body as PLR0912 counts them: an `if` 1 (and 1 for each `elif` and the
    `else`), a loop 1 (and 1 for its `else`), each `except` 1, a `try`'s `else` and `finally` 1
    each, each `case` 1; the bodies' own branches added; a nested function's are its own."""
    n = 0
    for st in stmts:
        if isinstance(st, ast.If):
            n += 1 + branches(st.body)
            orelse = st.orelse
            while orelse:
                n += 1
                if len(orelse) == 1 and isinstance(orelse[0], ast.If):  # an `elif`
                    n += branches(orelse[0].body)
                    orelse = orelse[0].orelse
                else:
                    n += branches(orelse)
                    break
        elif isinstance(st, ast.Match):
            n += sum(1 + branches(c.body) for c in st.cases)
        elif isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
            n += 1 + branches(st.body)
            n += 1 + branches(st.orelse) if st.orelse else 0
        elif isinstance(st, (ast.Try, ast.TryStar)):
            n += branches(st.body) + sum(1 + branches(h.body) for h in st.handlers)
            n += 1 + branches(st.orelse) if st.orelse else 0
            n += 1 + branches(st.finalbody) if st.finalbody else 0
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            n += branches(st.body)
    return n


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def over_limit(source: str, limit: int = MAX_BRANCHES) -> list[tuple[str, int, int]]:
    """(name, line, branches) of each function of `source` with more than `limit` branches."""
    out = []
    for f in functions(ast.parse(source)):
        n = branches(f.body)
        if n > limit:
            out.append((f.name, f.lineno, n))
    return out


def test_the_count_is_ruffs():
    # the shapes PLR0912 counts, each with its known count
    src = textwrap.dedent(
        """
        def f(x):
            if x:            # 1
                pass
            elif x > 1:      # 1
                for y in x:  # 1
                    pass
                else:        # 1
                    pass
            else:            # 1
                pass
            while x:         # 1
                pass
            try:
                pass
            except ValueError:  # 1
                pass
            except KeyError:    # 1
                pass
            else:               # 1
                pass
            finally:            # 1
                pass
            with open(x):
                if x:           # 1
                    pass
            match x:
                case 1:         # 1
                    pass
                case _:         # 1
                    pass

            def inner():        # its own
                if x:
                    pass
        """
    )
    tree = ast.parse(src)
    counts = {f.name: branches(f.body) for f in functions(tree)}
    assert counts == {"f": 13, "inner": 1}


def test_a_function_over_the_limit_is_named():
    body = "".join(f"    if x == {i}:\n        pass\n" for i in range(MAX_BRANCHES + 1))
    assert over_limit(f"def big(x):\n{body}") == [("big", 1, MAX_BRANCHES + 1)]
    assert over_limit(f"def fits(x):\n{body}", MAX_BRANCHES + 1) == []


def test_no_function_in_the_boards_has_more_than_30_branches():
    files = sorted(BOARDS.glob("*.py"))
    assert len(files) >= 10  # the builder's parts are all read
    over = [
        f"{p.name}:{line} {name} has {n} branches (at most {MAX_BRANCHES})"
        for p in files
        for name, line, n in over_limit(p.read_text(encoding="utf-8"))
    ]
    assert over == []


def test_build_board_is_short():
    tree = ast.parse((BOARDS / "leaderboard.py").read_text(encoding="utf-8"))
    sizes = {
        f.name: f.end_lineno - f.lineno + 1
        for f in functions(tree)
        if f.name in ("build_board", "build")
    }
    assert set(sizes) == {"build_board", "build"}
    assert all(n < MAX_BUILD_LINES for n in sizes.values()), sizes
