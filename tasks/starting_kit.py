"""A task's starting kit, generated from its declaration: a README (the submission format, how to
download the data, validate and score a file offline, run a baseline and submit), an example
file and the format as JSON. A bundle may carry its own kit instead (a `starting_kit` folder of
its `public_files`), which the task page shows in place of this one."""

from __future__ import annotations

import io
import json
import zipfile

from tasks.base import Task


def example_name(task: Task) -> str:
    return f"example-predictions.{task.format.native}"


def readme(
    task: Task,
    systems: tuple[str, ...] = (),
    server: str | None = None,
    phases: dict[str, str] | None = None,
) -> str:
    """The kit's README.md, in Markdown (the task page shows it as text); `server`: the site's
    address for the login line (its base URL), else a placeholder; `phases`: the task's phases
    (name: split), so that the submit step names the phase of the split the file is made for
    (the default phase is the open test phase, which refuses a dev file)."""
    fmt = task.format
    dev = "dev" in task.splits
    split = "dev" if dev else task.splits[0]
    phase = next((n for n, sp in (phases or {}).items() if sp == split), None)
    phase_arg = f" --phase {phase}" if phase else ""
    rows = "\n".join(
        f"| `{f.name}` | {f.kind} | {f.description.replace('|', '/')} |" for f in fmt.fields
    )
    lines = [
        f"# Starting kit: {task.title}",
        "",
        task.description.strip(),
        "",
        "## What to submit",
        "",
        f"One {fmt.native} file (CSV/TSV with a header is accepted too, optionally .gz or .zip), "
        f"one row per {', '.join(fmt.key)}:",
        "",
        "| Field | Kind | Meaning |",
        "|---|---|---|",
        rows,
        "",
        f"`{example_name(task)}` in this kit shows the shape (its ids are made up).",
        "",
        f"Ranked by {task.primary[1]} on {task.primary[0]} "
        f"({'higher' if task.greater_is_better else 'lower'} is better).",
        "",
        "## Steps",
        "",
        "```sh",
        f"palimpsest login --server {server or 'https://SERVER'} --token YOUR_TOKEN",
        f"palimpsest download {task.id}                      # into ./palimpsest-data",
        f"palimpsest validate {task.id} predictions.{fmt.native} --split {split} "
        "--home palimpsest-data",
    ]
    if dev:
        lines.append(
            f"palimpsest score {task.id} predictions.{fmt.native} --split dev "
            "--home palimpsest-data   # the dev gold is public"
        )
    lines += [
        f"palimpsest submit {task.id} predictions.{fmt.native}{phase_arg} --wait",
        "```",
        "",
    ]
    if systems:
        lines += [
            "## A baseline",
            "",
            f"Systems: {', '.join(systems)}. The lexical one needs no model:",
            "",
            "```sh",
            f"palimpsest baselines run --task {task.id} --system lexical --home palimpsest-data "
            "--out baselines-out",
            "```",
            "",
            "It writes a submission file under `baselines-out/` that `validate` accepts.",
            "",
        ]
    return "\n".join(lines)


def kit_files(
    task: Task,
    systems: tuple[str, ...] = (),
    server: str | None = None,
    phases: dict[str, str] | None = None,
) -> dict[str, bytes]:
    """The generated kit's files: {name: bytes}."""
    fmt = task.format
    spec = {
        "task": task.id,
        "native": fmt.native,
        "key": list(fmt.key),
        "fields": [
            {"name": f.name, "kind": f.kind, "description": f.description} for f in fmt.fields
        ],
    }
    return {
        "README.md": readme(task, systems, server, phases).encode("utf-8"),
        example_name(task): fmt.example.encode("utf-8"),
        "format.json": (json.dumps(spec, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }


def kit_zip(task: Task, files: dict[str, bytes]) -> bytes:
    """The kit as one zip under `<task>-starting-kit/` (the same files give the same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(
                f"{task.id}-starting-kit/{name}", date_time=(1980, 1, 1, 0, 0, 0)
            )
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, files[name])
    return buf.getvalue()
