"""Hostile competition.yaml files cost bounded work: an alias bomb, an anchor, nesting 50,000
deep are each refused in under a second and 50 MB with a problem naming the line, by the reader,
the API, the upload form and the CLI; never a 500 or a crash."""

from __future__ import annotations

import html
import io
import json
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from webkit import Browser, make_token, make_user

from tasks.bundle import BundleInvalid, load_yaml, read_bundle


def _alias_bomb(levels: int = 9, width: int = 10) -> str:
    """The billion laughs: `width ** levels` expansions of one string."""
    lines = ["id: bomb", "title: Bomb", 'l0: &l0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"tasks: [*l{levels}]")
    return "\n".join(lines) + "\n"


def _deep(depth: int = 50_000) -> str:
    return "id: deep\ntitle: Deep\ntasks: " + "[" * depth + "]" * depth + "\n"


def _deep_block(depth: int = 2_000) -> str:
    return "id: deep\ntitle: Deep\n" + "".join(" " * i + "k:\n" for i in range(depth))


MANIFESTS = {
    "alias bomb": (_alias_bomb(), "anchor (&l0)", 3),
    "one alias": ("id: x\ntitle: X\ntasks: [*t]\n", "alias (*t)", 3),
    "one anchor": ("id: x\ntitle: &t X\ntasks: []\n", "anchor", 2),
    "nested 50,000 deep": (_deep(), "nested more than", 3),
    "block nesting 2,000 deep": (_deep_block(), "nested more than", None),
}


def _bundle(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "b"
    root.mkdir(parents=True, exist_ok=True)
    (root / "competition.yaml").write_text(text, encoding="utf-8")
    return root


def _zip(tmp_path: Path, text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # no zip bomb by ratio
        zf.writestr("competition.yaml", text)
    return buf.getvalue()


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_the_reader_refuses_each_hostile_manifest_in_bounded_work(tmp_path, name):
    text, needle, line = MANIFESTS[name]
    root = _bundle(tmp_path, text)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(BundleInvalid) as e:
            read_bundle(root)
        took = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    problems = e.value.to_list()
    assert len(problems) == 1 and needle in problems[0]["message"], problems
    assert problems[0]["path"] == "competition.yaml"
    if line is not None:
        assert problems[0]["line"] == line, problems
    assert took < 1.0, took
    assert peak < 50 * 2**20, peak


def test_load_yaml_reads_ordinary_yaml_and_refuses_the_rest():
    assert load_yaml("- key: a\n  label: [1, 2]\n") == [{"key": "a", "label": [1, 2]}]
    nested = "[" * 64 + "]" * 64
    assert load_yaml(nested) is not None  # 64 levels: allowed
    import yaml

    for text in (_alias_bomb(), "[" * 65 + "]" * 65, "a: &x 1\nb: *x\n"):
        with pytest.raises(yaml.YAMLError):
            load_yaml(text)


def test_the_api_the_form_and_the_cli_answer_each_bomb_with_a_named_problem(
    app, tmp_path, monkeypatch
):
    admin = make_user(app, "admin@x.org", organizer=True)
    token = make_token(app, admin)
    c = app.test_client()
    web = Browser(app.test_client())
    web.login("admin@x.org")
    for name, (text, needle, _line) in MANIFESTS.items():
        data = _zip(tmp_path, text)
        t0 = time.perf_counter()
        r = c.post(
            "/api/v1/competitions/bundle",
            data={"bundle": (io.BytesIO(data), "b.zip")},
            headers={"Authorization": f"Bearer {token}"},
            content_type="multipart/form-data",
        )
        assert time.perf_counter() - t0 < 2.0, name
        assert r.status_code == 422, (name, r.status_code, r.get_data(as_text=True)[:300])
        assert r.json["error"]["code"] == "invalid_bundle" and needle in json.dumps(r.json), name
        r = web.post(
            "/competitions/new/bundle",
            {"bundle": (io.BytesIO(data), "b.zip")},
            content_type="multipart/form-data",
        )
        assert r.status_code == 422 and needle in html.unescape(r.get_data(as_text=True)), name

    from cli.main import main

    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    for name, (text, needle, _line) in MANIFESTS.items():
        root = _bundle(tmp_path / name.replace(" ", "-").replace(",", ""), text)
        r = CliRunner().invoke(main, ["competitions", "create", str(root), "--json"])
        assert r.exit_code == 1, (name, r.output[:300])
        err = json.loads(r.stdout)["error"]
        assert err["code"] == "invalid_bundle" and needle in json.dumps(err), name
