"""The suite shares through `conftest.py` and plain helper modules (`helpers.py`, `webkit.py`,
`apikit.py`, ...), never through each other: no test module imports another test module, at its top
or inside a function (importing one would also collect its fixtures into the importer and run its
module-level set-up twice)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a test module (`test_*`) in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[-1].startswith("test_"):
                names = [module]
            else:  # `from tests import test_x`, `from . import test_x`
                names = [f"{module}.{a.name}".lstrip(".") for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[-1].startswith("test_")]
    return found


def test_no_test_module_imports_another():
    offenders = [
        f"{p.relative_to(TESTS)}:{line}: imports {name}"
        for p in sorted(TESTS.rglob("*.py"))
        for line, name in imported_test_modules(p.read_text(encoding="utf-8"))
    ]
    assert not offenders, "move what is shared into conftest.py or a helper module:\n" + "\n".join(
        offenders
    )


def test_the_check_finds_every_form():
    planted = """
import json
from helpers import read_jsonl
from tests.test_api import _h
from test_accounts import smtp
import tests.test_browser
from tests import test_crawl, webkit
from . import test_supervisor

def f():
    from tests.test_backup import _build
"""
    assert [n for _, n in imported_test_modules(planted)] == [
        "tests.test_api",
        "test_accounts",
        "tests.test_browser",
        "tests.test_crawl",
        "test_supervisor",
        "tests.test_backup",
    ]
