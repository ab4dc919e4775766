"""A reference system as a participant's system runs: inside the sandbox, from /input alone.

`python3 -m baselines.sandboxed TASK SYSTEM --output /output/predictions.jsonl [--options JSON]`
reads the task's public files from `/input/public/<area>/` (the run's split and every other area
a participant may download: the dev gold that tunes a threshold, the training data), writes the
submission file, and nothing else: no gold, no server, no network. The server packs this package
with `scorer` and `tasks` into the archive of the baselines team's code run
(server.domain.baselines.baseline_archive), so a baseline is measured exactly as a team's system is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from baselines.systems import Models, Options, write_submission
from tasks.store import TaskStore


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="baselines.sandboxed")
    p.add_argument("task")
    p.add_argument("system")
    p.add_argument("--input", default="/input", type=Path)
    p.add_argument("--output", default="/output/predictions.jsonl", type=Path)
    p.add_argument("--options", default="{}", help="baselines.systems.Options fields, as JSON")
    a = p.parse_args(argv)
    options = Options(**{**json.loads(a.options), "progress": False})
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        root = home / "tasks" / a.task
        root.mkdir(parents=True)
        (root / "public").symlink_to((a.input / "public").resolve(), target_is_directory=True)
        store = TaskStore(a.task, home)
        path = write_submission(a.task, a.system, store, Path(tmp) / "out", Models(options))
        a.output.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, a.output)
    print(f"{a.task}/{a.system}: wrote {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
