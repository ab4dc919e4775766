"""The columnar reader of link files (pyarrow) against the row-by-row one: the same links for every
accepted form of a valid file, and every problem still reported by line and id."""

from __future__ import annotations

import gzip
import zipfile

import numpy as np
import pytest

pytest.importorskip(
    "pyarrow", reason="pyarrow is not installed (a core dependency): pip install pyarrow"
)

from scorer import validate_file
from scorer.errors import SubmissionInvalid
from scorer.families import LinkFamily, _id_arrays
from scorer.reader import Limits, arrow_links, load
from tasks import get_task
from tasks.store import TaskStore


def ids(home):
    st = TaskStore("loci-similes", home)

    def read(p):
        return p.read_text(encoding="utf-8").splitlines()

    return read(st.root / "index" / "test" / "query_ids.txt"), read(
        st.root / "index" / "test" / "source_ids.txt"
    )


def table(home, sep=",", score=True, n=40, seed=0) -> str:
    qs, ss = ids(home)
    rng = np.random.default_rng(seed)
    pairs = sorted(
        {(qs[int(rng.integers(len(qs)))], ss[int(rng.integers(len(ss)))]) for _ in range(n)}
    )
    q = (lambda x: x) if sep == "\t" else (lambda x: '"' + x.replace('"', '""') + '"')
    head = sep.join(["query_id", "source_id"] + (["score"] if score else []))
    rows = [
        sep.join([q(a), q(b)] + ([repr(float(rng.random()))] if score else [])) for a, b in pairs
    ]
    return head + "\n" + "\n".join(rows) + "\n"


def forms(tmp_path, home):
    csv_text = table(home)
    out = {
        "csv": ("a.csv", csv_text.encode()),
        "no score": ("b.csv", table(home, score=False).encode()),
        "tsv": ("c.tsv", table(home, sep="\t").encode()),
        "crlf": ("d.csv", csv_text.replace("\n", "\r\n").encode()),
        "bom": ("e.csv", b"\xef\xbb\xbf" + csv_text.encode()),
        "columns reordered": (
            "f.csv",
            (
                "score,query_id,source_id\n"
                + "".join(
                    f"{r.rsplit(',', 1)[1]},{r.rsplit(',', 1)[0]}\n"
                    for r in csv_text.splitlines()[1:]
                )
            ).encode(),
        ),
        "blank lines": ("g.csv", csv_text.replace("\n", "\n\n", 3).encode()),
        "header only": ("h.csv", b"query_id,source_id\n"),
        "txt sniffed": ("i.txt", table(home, sep="\t").encode()),
    }
    paths = {}
    for label, (name, data) in out.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths[label] = p
    gz = tmp_path / "a.csv.gz"
    gz.write_bytes(gzip.compress(out["csv"][1]))
    paths["gz"] = gz
    zp = tmp_path / "a.zip"
    with zipfile.ZipFile(zp, "w") as z:
        z.writestr("inner.csv", out["csv"][1])
    paths["zip"] = zp
    return paths


def test_columnar_equals_row_by_row(home, tmp_path):
    fam = LinkFamily(get_task("loci-similes"), TaskStore("loci-similes", home), "test")
    qk, sk = _id_arrays(fam.store, "test")
    for label, path in forms(tmp_path, home).items():
        fast = arrow_links(path, qk, sk)
        assert fast is not None, label
        slow = fam.validate(load(path))
        np.testing.assert_array_equal(fast[0], slow.q, err_msg=label)
        np.testing.assert_array_equal(fast[1], slow.s, err_msg=label)
        if slow.score is None:
            assert fast[2] is None, label
        else:
            np.testing.assert_array_equal(fast[2], slow.score, err_msg=label)


@pytest.mark.parametrize(
    "edit, line, words",
    [
        (
            lambda rows: rows.__setitem__(5, '"nope","verg. aen. 10.636",0.5'),
            6,
            ("unknown query_id", "nope"),
        ),
        (
            lambda rows: rows.__setitem__(3, rows[3].rsplit(",", 1)[0] + ",abc"),
            4,
            ("score must be a number",),
        ),
        (lambda rows: rows.__setitem__(7, rows[7].rsplit(",", 1)[0] + ",inf"), 8, ("infinite",)),
        (lambda rows: rows.__setitem__(2, rows[2] + ",extra"), 3, ("expected 3 columns",)),
        (lambda rows: rows.__setitem__(4, rows[1]), None, ("duplicate link",)),
    ],
)
@pytest.mark.parametrize("wrap", ["plain", "gz"])
def test_problems_named_by_line_and_id(home, tmp_path, edit, line, words, wrap):
    rows = table(home, n=30).splitlines()
    edit(rows)
    data = ("\n".join(rows) + "\n").encode()
    path = tmp_path / ("s.csv" if wrap == "plain" else "s.csv.gz")
    path.write_bytes(data if wrap == "plain" else gzip.compress(data))
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("loci-similes", path, home=home)
    text = str(e.value)
    assert all(w in text for w in words), text
    if line is not None:
        assert any(p.line == line for p in e.value.problems), text


def test_gzip_over_the_uncompressed_limit(home, tmp_path):
    path = tmp_path / "big.csv.gz"
    path.write_bytes(gzip.compress(table(home, n=200).encode()))
    with pytest.raises(SubmissionInvalid) as e:
        validate_file(
            "loci-similes",
            path,
            home=home,
            limits=Limits(max_bytes=10**9, max_uncompressed_bytes=2000),
        )
    assert "over the limit" in str(e.value)


def test_participant_download_without_the_index(home, tmp_path):
    """Offline validation where only the public segment files are (no server index): the same
    ids."""
    import shutil

    st = TaskStore("loci-similes", home)
    h = tmp_path / "participant"
    shutil.copytree(st.root / "public", h / "tasks" / "loci-similes" / "public")
    shutil.copy(st.root / "task.json", h / "tasks" / "loci-similes" / "task.json")
    q, s = _id_arrays(TaskStore("loci-similes", h), "test")
    assert [x.decode() for x in q.to_pylist()] == ids(home)[0]
    assert [x.decode() for x in s.to_pylist()] == ids(home)[1]
    path = forms(tmp_path, home)["csv"]
    a = validate_file("loci-similes", path, home=h).parsed
    b = validate_file("loci-similes", path, home=home).parsed
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.s, b.s)
