"""The `palimpsest` command: thin commands over library functions.

Heavy libraries (scipy, flask, torch) are imported inside the commands that need them, so that
`palimpsest --help` and `palimpsest validate` start fast.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import click

from cli import baselines, campaigns, organizer, participant, signup, task_changes
from cli.choices import LazyChoice
from cli.participant.data import server_tasks
from tasks import all_tasks, get_task, task_ids
from tasks.base import resolve
from tasks.errors import PalimpsestError
from tasks.store import TaskStore

EXIT_INVALID = 1
EXIT_ERROR = 2


def _fail(message: str, code: int = EXIT_ERROR):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _fail_json(message: str, code: int = EXIT_ERROR):
    """`_fail` for a --json command: the message on stderr and as {"error": {...}} on stdout."""
    click.echo(json.dumps({"error": {"message": message, "exit_status": code}}))
    _fail(message, code)


def friendly(fn):
    """Turn every error a user can cause into a one-line message and an exit status."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # the scorer loads only when a command needs it: `palimpsest --help` stays light
        from scorer.errors import PalimpsestError

        # with --json, stdout holds exactly one JSON document, an error included
        fail = _fail_json if kwargs.get("as_json") else _fail
        try:
            return fn(*args, **kwargs)
        except PalimpsestError as e:
            fail(str(e))
        except (click.exceptions.Exit, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # output piped into e.g. `head`
            sys.stderr.close()
            sys.exit(0)
        except Exception as e:  # never a traceback for a user; PALIMPSEST_DEBUG=1 shows it
            if os.environ.get("PALIMPSEST_DEBUG"):
                raise
            fail(
                f"internal error ({type(e).__name__}: {e}); "
                "rerun with PALIMPSEST_DEBUG=1 for details",
                3,
            )

    return wrapper


HOME_OPTION = click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PALIMPSEST_HOME",
    default=None,
    # read before TASK: a task declared by a bundle in that directory is then known
    is_eager=True,
    help="Data directory (default: $PALIMPSEST_HOME or ~/.local/share/palimpsest).",
)


class TaskId(click.ParamType):
    """A task's id: a built-in task, or one a bundle declared in the data directory (`--home`,
    else $PALIMPSEST_HOME or the default one)."""

    name = "task"

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(task_ids()) + "]"

    def convert(self, value, param, ctx):
        home = ctx.params.get("home") if ctx is not None else None
        if home is not None and value not in task_ids():
            # the bundle module (pydantic) loads only for a task not known already
            from tasks.bundle import load_declared

            load_declared(Path(home))
        if value in task_ids():
            return value
        close = difflib.get_close_matches(value, task_ids(), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        self.fail(f"{value!r} is not a task{hint} (tasks: {', '.join(task_ids())})", param, ctx)


TASK_ARG = click.argument("task_id", metavar="TASK", type=TaskId())


def split_names() -> list[str]:
    """Every split a registered task declares (test, dev, and a cross-validated one such as cv)."""
    return list(dict.fromkeys(["test", "dev", *(s for t in all_tasks() for s in t.splits)]))


SPLIT_OPTION = click.option(
    "--split",
    type=LazyChoice(split_names),
    default="test",
    show_default=True,
    help="Which split's inputs and gold to use (cv: every fold of a cross-validated "
    "task, a row per fold and id).",
)


# The server's own commands (server/cli/), loaded only when one of them runs or its own help is
# asked for: `palimpsest --help` lists them from this table and imports no server code. A test
# checks that the table and server/cli/ agree.
SERVER_COMMANDS = {
    "backup": "Back up the site into one archive (`backup OUT`), or check one (`backup verify "
    "OUT`).",
    "competitions": "Competitions: their state, tasks and pages.",
    "db": "Database schema (Alembic migrations).",
    "phases": "Phases of a task: windows, limits and the public part of the test gold.",
    "rankings": "Published final rankings (immutable snapshots, numbered versions).",
    "restore": "Restore the site from an archive of `palimpsest backup` (into an empty site).",
    "reconcile": "Re-enqueue what the database says is pending but no live job holds (run one "
    "per site).",
    "runs": "Organizer actions on submitted runs, at the server's own shell: rescore, hide, "
    "remove.",
    "serve": "Run the web app, an embedded Redis, workers and the reconciler on this machine.",
    "settings": "Print every setting: its value here (secrets masked), or the docs' table.",
    "store": "The object store (PALIMPSEST_S3_*): push the data directory's files into it.",
    "tokens": "API tokens (shown once, stored as sha256).",
    "users": "Accounts: create one, print a password-reset link, sign one out everywhere.",
    "worker": "Run a scoring worker (RQ, JSON-serialized jobs) against DATABASE_URL and REDIS_URL, "
    "or with --attach a run worker that holds a token alone.",
}


class LazyServerGroup(click.Group):
    """The `palimpsest` group: its own commands, and the server's, loaded on first use."""

    def _server_commands(self) -> dict[str, click.Command]:
        if not hasattr(self, "_loaded"):
            try:
                # the server loads only when one of its commands runs: `--help` stays light
                from server.cli import register
            except ModuleNotFoundError as e:  # a client-only install has no server package
                if e.name and (e.name == "server" or e.name.startswith("server.")):
                    self._loaded = {}
                    return self._loaded
                raise
            group = click.Group()
            register(group)
            self._loaded = dict(group.commands)
        return self._loaded

    def list_commands(self, ctx) -> list[str]:
        return sorted({*super().list_commands(ctx), *SERVER_COMMANDS})

    def get_command(self, ctx, name):
        got = super().get_command(ctx, name)
        if got is None and name in SERVER_COMMANDS:
            got = self._server_commands().get(name)
        return got

    def format_commands(self, ctx, formatter) -> None:
        """As click lists commands, the server's short help taken from SERVER_COMMANDS."""
        names = []
        for name in self.list_commands(ctx):
            own = super().get_command(ctx, name)
            if own is None or not own.hidden:
                names.append((name, own))
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n, _ in names)
        rows = [
            (
                name,
                own.get_short_help_str(limit)
                if own is not None
                else click.utils.make_default_short_help(SERVER_COMMANDS[name], limit),
            )
            for name, own in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyServerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="palimpsest")
def main():
    """Palimpsest: evaluation server and leaderboard for text reuse and relatedness tasks."""


@main.group("tasks", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def tasks_group(ctx, as_json):
    """List tasks: the server's, with your quota, once you are logged in; else the local ones.

    Subcommands describe and import tasks locally.
    """
    if ctx.invoked_subcommand is None:
        if not server_tasks(as_json):
            ctx.invoke(tasks_list, as_json=as_json)


@tasks_group.command("list")
@HOME_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tasks_list(home=None, as_json=False):
    """List the registered tasks and whether their data is imported."""
    rows = []
    for t in all_tasks():
        st = TaskStore(t.id, home)
        rows.append(
            {
                "id": t.id,
                "title": t.title,
                "primary": f"{t.primary[1]} ({t.primary[0]})",
                "imported": st.exists(),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        mark = "imported" if r["imported"] else "not imported"
        click.echo(f"{r['id']:<14} {mark:<13} {r['primary']:<18} {r['title']}")


@tasks_group.command("show")
@TASK_ARG
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tasks_show(task_id, as_json):
    """Describe a task: its format, metrics, splits and citation."""
    t = get_task(task_id)
    if as_json:
        click.echo(json.dumps(asdict(t), indent=2))
        return
    click.echo(f"{t.id} (v{t.version}): {t.title}\n\n{t.description}\n")
    click.echo(
        "Submission format (" + t.format.native + "; also csv/tsv, .gz or .zip of one file):"
    )
    for f in t.format.fields:
        opt = " (optional)" if f.name in t.format.optional else ""
        click.echo(f"  {f.name:<12} {f.kind:<8} {f.description}{opt}")
    click.echo("Example:\n" + "".join("  " + line + "\n" for line in t.format.example.splitlines()))
    click.echo(
        f"Primary metric: {t.primary[1]} on {t.primary[0]} "
        f"({'higher' if t.greater_is_better else 'lower'} is better)"
    )
    click.echo(
        f"Metrics: {', '.join(t.metrics)}; subsets: {', '.join(t.subsets)}; "
        f"splits: {', '.join(t.splits)}"
    )
    click.echo(f"Import: {t.import_help}\nLicence: {t.licence}\n\n{t.citation}")


def _import_option_list() -> list[click.Option]:
    """The options every registered task declares for its importer (`Task.import_options`), once
    each; `tasks import` passes a task only the ones it declares."""
    seen: dict[str, object] = {}
    for t in all_tasks():
        for o in t.import_options:
            seen.setdefault(o.flag, o)

    def command():
        pass

    for o in reversed(list(seen.values())):
        if o.choices:
            kind = click.Choice(list(o.choices))
        elif o.kind == "int":
            kind = click.IntRange(*o.range) if o.range else click.INT
        elif o.kind == "list":
            kind = click.STRING
        else:
            kind = click.Path(
                exists=True, path_type=Path, file_okay=o.kind != "dir", dir_okay=o.kind != "file"
            )
        users = [t.id for t in all_tasks() if any(x.flag == o.flag for x in t.import_options)]
        default = f" [default: {o.default}]" if o.default is not None else ""
        command = click.option(
            o.flag,
            _param(o.flag),
            type=kind,
            default=None,
            help=f"{o.help}{default} ({', '.join(users)})",
        )(command)
    return list(reversed(command.__click_params__))


class ImportCommand(click.Command):
    """`tasks import`, its importer options (`_import_option_list`) put after TASK when the command
    is first parsed or its help shown: the task specs are read then, not when the command table is
    built (`palimpsest tokens create` never reads them)."""

    @property
    def params(self) -> list[click.Parameter]:
        if not self._options_added:
            self._options_added = True
            self._params[1:1] = _import_option_list()
        return self._params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._params = value
        self._options_added = False


def _param(flag: str) -> str:
    return "opt_" + flag.lstrip("-").replace("-", "_")


@tasks_group.command("import", cls=ImportCommand)
@TASK_ARG
@HOME_OPTION
@friendly
def tasks_import(task_id, home, **given):
    """Build a task from its official release into the data directory (idempotent)."""
    # the importers load only when this command runs: `palimpsest --help` stays light
    from tasks.importers import import_task

    t = get_task(task_id)
    declared = {_param(o.flag): o for o in t.import_options}
    wrong = [k for k, v in given.items() if v is not None and k not in declared]
    if wrong:
        flags = ", ".join("--" + k[4:].replace("_", "-") for k in wrong)
        _fail(f"{task_id} takes no {flags} (usage: {t.import_help})")
    options = {}
    for param, o in declared.items():
        v = given.get(param)
        if v is None:
            if o.required:
                flags = [x.flag for x in t.import_options if x.required]
                need = flags[0] if len(flags) == 1 else ", ".join(flags[:-1]) + " and " + flags[-1]
                _fail(f"{task_id} needs {need} (usage: {t.import_help})")
            v = o.default
        elif o.kind == "list":
            v = [x.strip() for x in v.split(",") if x.strip()]
        if v is not None:
            options[o.dest] = v
    manifest = import_task(task_id, home, **options)
    counts = "; ".join(
        f"{split}: " + ", ".join(f"{k} {v}" for k, v in c.items())
        for split, c in manifest["counts"].items()
    )
    click.echo(f"imported {task_id}: {counts}")
    for note in manifest.get("notes", []):
        click.echo(f"note: {note}")
    _push_imported(task_id, home)


def _push_imported(task_id: str, home: Path | None) -> None:
    """A site on an object store (PALIMPSEST_S3_BUCKET): the imported files go into it too."""
    # the server's settings and store load only when a task was imported
    from server.objectstore import push_imported

    done = push_imported(task_id, home)
    if done is not None:
        click.echo(f"put {done[1]} file(s) of {task_id} into the object store {done[0]}")


def compiled_in(home: Path) -> Path:
    """Where `agreement --bayes` keeps jax's compiled programs by default: the data directory's
    cache/jax, as the server's campaign fits do (server/jobs/campaign_fit_jobs.py)."""
    return Path(home) / "cache" / "jax"


@main.command("agreement")
@TASK_ARG
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, path_type=Path),
    help="A release checkout (TRoTR, SwissGov-RSD, STR) to compute from (default: what the import "
    "recorded).",
)
@click.option(
    "--by",
    "factor",
    help="The measures within each level of a contextual factor the task declares (TRoTR: book, "
    "passage, annotator_pair, overlap), with their intervals.",
)
@click.option(
    "--bayes",
    is_flag=True,
    help="Fit the Bayesian multilevel model (needs the [agreement] extra and --from; up to a few "
    "minutes on a CPU); the fit is cached for the task's agreement page when the task is imported.",
)
@click.option(
    "--compare",
    is_flag=True,
    help="With --bayes: fit the nested models the paper compares (its Table 2, as far as the "
    "release has its factors) and rank them by PSIS-LOO: ELPD with its standard error.",
)
@click.option("--seed", type=int, default=None, help="The Bayesian fit's seed (default: recorded).")
@click.option(
    "--draws",
    type=click.IntRange(100, 20_000),
    default=None,
    help="With --bayes: warm-up and kept draws per chain (default: TRoTR's set-up, 750 warm-up "
    "and 1,000 kept draws; the paper's is 1,000 each); fewer is quicker and more likely to be "
    "refused as not converged.",
)
@click.option(
    "--compile-cache/--no-compile-cache",
    default=True,
    show_default=True,
    help="With --bayes: keep jax's compiled sampler programs in <home>/cache/jax (the directory "
    "the server's campaign fits keep theirs in; JAX_COMPILATION_CACHE_DIR, where set, wins), so "
    "that a later fit of the same judgments and settings, any seed, skips their compilation; the "
    "draws are the same either way.",
)
@click.option(
    "--expected",
    type=click.Choice(["level", "dataset"]),
    default="level",
    show_default=True,
    help="With --by: the expected agreement A_e of the multi-kappa shown for each level, the "
    "level's own or the whole dataset's (the paper's Table 3); --json carries both.",
)
@HOME_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def agreement_cmd(
    task_id, source, factor, bayes, compare, seed, draws, compile_cache, expected, home, as_json
):
    """Human agreement in a task's release: the ceiling its board shows as a reference row."""
    # numpy loads only when this command runs: `palimpsest --help` stays light
    from tasks.agreement import BAYES_FILE, load_agreement

    t = get_task(task_id)
    if not t.agreement:
        raise PalimpsestError(f"{t.id} declares no human agreement figures")
    store = TaskStore(t.id, home)
    if source is not None:
        got = resolve(t.agreement)(Path(source))
    else:
        got = (
            (load_agreement(store.root) or store.manifest().get("agreement"))
            if store.exists()
            else None
        )
        if got is None:
            raise PalimpsestError(
                f"{t.id} was imported without its annotations; re-import it, or pass --from"
            )
    if factor and not got.get("factors"):
        raise PalimpsestError(
            f"{t.id} declares no contextual factors to break its agreement down by"
        )
    known = sorted(got.get("factors", {}).get("binary", {}))
    if factor and factor not in known:
        raise PalimpsestError(
            f"--by {factor}: {t.id}'s agreement is broken down by {', '.join(known)} only"
        )
    fitted = None
    if compare and not bayes:
        raise PalimpsestError("--compare compares fits of the Bayesian model: add --bayes")
    if draws is not None and not bayes:
        raise PalimpsestError("--draws sets the Bayesian fit's draws: add --bayes")
    if bayes:
        if not t.agreement_bayes:
            raise PalimpsestError(f"{t.id} declares no Bayesian agreement model")
        if source is None:
            raise PalimpsestError(
                "--bayes needs the release's judgments: pass --from CHECKOUT (the import keeps "
                "only the figures)"
            )
        # numpy loads only when this command runs: `palimpsest --help` stays light
        from tasks.agreement_bayes import NotConverged

        try:
            fitted = resolve(t.agreement_bayes)(
                Path(source),
                **({"seed": seed} if seed is not None else {}),
                **({"compare": True} if compare else {}),
                **({"warmup": draws, "samples": draws} if draws is not None else {}),
                **({"compile_cache": str(compiled_in(store.home))} if compile_cache else {}),
            )
        except ImportError as e:
            raise PalimpsestError(
                f"--bayes needs numpyro and jax: pip install 'palimpsest[agreement]' ({e})"
            ) from None
        except NotConverged as e:
            raise PalimpsestError(str(e)) from None
        if compare:
            if as_json:
                click.echo(json.dumps({"task": t.id, "compare": fitted}, indent=2, sort_keys=True))
            else:
                _print_comparison(t.id, fitted)
            return
        if store.exists():  # the agreement page shows the last converged fit
            (store.root / BAYES_FILE).write_text(
                json.dumps(fitted, indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )
    if as_json:
        doc = got
        if factor:
            doc = {
                "task": t.id,
                "factor": factor,
                "binarisation": got.get("kappa", {}).get("binarisation"),
                "labels": got["factors"]["labels"][factor],
                "binary": got["factors"]["binary"][factor],
                "expected": got["factors"].get("expected"),
            }
        if fitted is not None:
            doc = doc | {"bayes": fitted}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    if got.get("nothing_to_measure"):
        click.echo(f"{t.id}: nothing to measure: {got['nothing_to_measure']}")
        return
    if "language_pairs" in got:  # SwissGov-RSD: annotator against annotator per language pair
        # numpy, scipy and krippendorff load only when an import computes human rows
        from tasks.agreement_swissgov import span_rows, why

        click.echo(
            f"{t.id}: token Spearman x100, annotator 1 against annotator 2 ({got['source']})"
        )
        click.echo(
            f"  {'pair':<6} {'ours':>6} {'paper':>6} {'alpha':>6} {'docs':>5} {'tokens':>7}  how"
        )
        for pair, a in sorted(got["language_pairs"].items()):
            ours = "-" if a["spearman"] is None else f"{a['spearman'] * 100:.2f}"
            paper = "-" if a.get("paper") is None else f"{a['paper']:.2f}"
            alpha = "-" if a.get("alpha_ordinal") is None else f"{a['alpha_ordinal'] * 100:.2f}"
            click.echo(
                f"  {pair:<6} {ours:>6} {paper:>6} {alpha:>6} {a['documents']:>5} "
                f"{a['tokens']:>7}  {a['procedure']}"
            )
        click.echo(
            "  (ours, paper: Spearman; alpha: Krippendorff's alpha, ordinal, of the same labels)"
        )
        for pair, a in sorted(got["language_pairs"].items()):
            if a["spearman"] is not None:
                click.echo(f"  {pair}: {why(pair, a)}")
        for pair, a in sorted(got["language_pairs"].items()):
            if "spans_paper" in a:  # Table 2's span rows, a span being an annotation
                click.echo(f"  {pair} spans: {span_rows(pair, a)}")
        return
    if (
        "languages" in got and "splits" in got
    ):  # STR: split-half reliability of the raw BWS annotations
        click.echo(
            f"{t.id}: split-half reliability of the raw Best-Worst-Scaling annotations "
            f"({got['source']}/), {got['splits']} splits, seed {got['seed']}"
        )
        click.echo(
            f"  {'lang':<5} {'spearman':>15} {'pearson':>15} {'items':>6} {'tuples':>6} "
            f"{'annot.':>6}  gold check (all annotations against the release's Score)"
        )
        for lang, a in sorted(got["languages"].items()):
            g = a.get("gold_check", {})
            check = (
                "-"
                if "spearman" not in g
                else f"{'reproduced' if g['reproduced'] else 'NOT reproduced'}: "
                f"Spearman {g['spearman']:.3f}, {g['within_rounding'] * 100:.1f}% of "
                f"{g['matched']} pairs within rounding"
            )
            click.echo(
                f"  {lang:<5} {a['spearman']:>7.3f} ± {a['spearman_sd']:.3f} "
                f"{a['pearson']:>7.3f} ± {a['pearson_sd']:.3f} {a['items']:>6} {a['tuples']:>6} "
                f"{a['annotations']:>6}  {check}"
            )
        if got.get("other_files"):
            click.echo(
                f"  left out (not a str language, or not imported): {', '.join(got['other_files'])}"
            )
        click.echo(
            "  (beside the declared 0.84: STR-2022's English, a different language and dataset)"
        )
        return
    _print_trotr_agreement(t.id, got, factor, fitted, expected)


def _interval(m: dict | None) -> str:
    if not m or m.get("value") is None:
        return "-"
    if m.get("low") is None:
        return f"{m['value']:.3f}"
    return f"{m['value']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"


def _print_trotr_agreement(
    task_id: str, got: dict, factor: str | None, fitted: dict | None, expected: str = "level"
):
    """TRoTR's agreement as text: the paper's figures, the kappa family, a factor, a fit."""
    p = got.get("paper", {})
    pf = p.get("filtered", {})
    f = got.get("filtered", {})
    click.echo(
        f"{task_id}: {got['pairs']} pairs, {got['annotators']} annotators, "
        f"{got['judgments']} judgments"
    )
    click.echo(f"  {'':34} {'all':>7} {'paper':>6}   {'filtered':>8} {'paper':>6}")
    click.echo(
        f"  {'Krippendorff alpha (ordinal)':34} {got['alpha_ordinal']:>7.3f} "
        f"{p.get('alpha', 0):>6.3f}   "
        + (f"{f['alpha_ordinal']:>8.3f} {pf.get('alpha', 0):>6.3f}" if f else "")
    )
    click.echo(
        f"  {'weighted mean pairwise Spearman':34} {got['weighted_mean_pairwise_spearman']:>7.3f} "
        f"{p.get('spearman', 0):>6.3f}   "
        + (
            f"{f['weighted_mean_pairwise_spearman']:>8.3f} {pf.get('spearman', 0):>6.3f}"
            if f
            else ""
        )
    )
    if f:
        click.echo(
            f"  {'pairs':34} {got['pairs']:>7} {p.get('pairs', 0):>6}   {f['pairs']:>8} "
            f"{pf.get('pairs', 0):>6}"
        )
        click.echo(f"  filter: {f['filter']}")
    k = got.get("kappa")
    if k:
        b = k["labels"]["bootstrap"]
        click.echo(
            f"  chance-corrected, {b['confidence']:.0%} percentile bootstrap over pairs "
            f"({b['replicates']} replicates, seed {b['seed']}); binary: {k['binarisation']}"
        )
        click.echo(f"  {'':20} {'labels 1-4':>25} {'binary':>25}")
        for m, name in (
            ("multi_kappa", "multi-kappa"),
            ("multi_kappa_weighted", "pair-weighted"),
            ("fleiss_pi", "Fleiss' pi"),
            ("alpha", "Krippendorff alpha"),
            ("observed", "observed agreement"),
        ):
            if m not in k["labels"]:
                continue  # figures cached by an import before they were computed
            click.echo(
                f"  {name:20} {_interval(k['labels'][m]):>25} {_interval(k['binary'][m]):>25}"
            )
        click.echo(
            "  multi-kappa: Manjavacas et al. (2021)'s eq. 7-8, each annotator pair counted once; "
            "pair-weighted: each pair weighted by the items it judged together (equal when every "
            "annotator judged every item; they differ when some pairs share far fewer items)"
        )
        click.echo("  Cohen's kappa per annotator pair (items both judged):")
        for pair, c in k["binary"]["cohen"].items():
            lab = k["labels"]["cohen"].get(pair)
            click.echo(f"  {pair:28} {c['items']:>5}  {_interval(lab):>25} {_interval(c):>25}")
    if factor:
        key = "multi_kappa" if expected == "level" else "multi_kappa_dataset_expected"
        which = (
            "A_e within each level"
            if expected == "level"
            else "A_e of the whole dataset, as the paper's Table 3"
        )
        click.echo(
            f"  by {factor} (multi-kappa with its interval, {which}; labels 1-4, then binary):"
        )
        for lab, b in zip(
            got["factors"]["labels"][factor], got["factors"]["binary"][factor], strict=True
        ):
            if key not in lab:
                raise PalimpsestError(
                    f"{task_id}'s cached agreement has no multi-kappa with the dataset's A_e: "
                    "re-import the task"
                )
            click.echo(
                f"  {lab['level'][:34]:34} {lab['items']:>5}  {_interval(lab[key]):>25} "
                f"{_interval(b[key]):>25}"
            )
    if fitted:
        d = fitted["diagnostics"]
        click.echo(
            f"  Bayesian model ({fitted['model']}), {d['chains']} chains of {d['warmup']} + "
            f"{d['samples']} draws, seed {d['seed']}, {d['seconds']} s wall, "
            f"{d.get('cpu_seconds')} s CPU: "
            f"max R-hat {d['max_rhat']:.4f}, "
            f"min ESS {d['min_ess']:.0f}, {d['divergences']} divergences"
        )
        for key, name in (("average", "an average book"), ("marginal", "marginalised over books")):
            s = fitted.get(key)
            if s:
                click.echo(
                    f"  posterior multi-kappa, {name:24} {s['median']:.3f} "
                    f"(95% {s['95%'][0]:.3f}-{s['95%'][1]:.3f}, "
                    f"89% {s['89%'][0]:.3f}-{s['89%'][1]:.3f})"
                )
        s = fitted.get("average_pair_weighted")
        if s:
            click.echo(
                f"  posterior pair-weighted, an average book   {s['median']:.3f} "
                f"(95% {s['95%'][0]:.3f}-{s['95%'][1]:.3f})"
            )
        e = fitted.get("empirical")
        if e:
            click.echo(f"  empirical multi-kappa (binary)          {_interval(e)}")
        e = fitted.get("empirical_pair_weighted")
        if e:
            click.echo(f"  empirical pair-weighted (binary)        {_interval(e)}")


def _print_comparison(task_id: str, got: dict) -> None:
    """The nested models ranked by ELPD-LOO (the paper's Table 2), then any refused model."""
    click.echo(f"{task_id}: models compared by PSIS-LOO ({got['source']}, seed {got['seed']})")
    click.echo(
        f"  {'model':<8} {'ELPD (SE)':>20} {'p_loo':>8} {'ELPD diff (SE)':>18} "
        f"{'max k':>6} {'R-hat':>7} {'div':>4}  factors"
    )
    for r in got["ranking"]:
        m = got["models"][r["model"]]
        lo, d = m["loo"], m["diagnostics"]
        factors = ", ".join(["annotator pair", *m["groups"], *m["covariates"]])
        click.echo(
            f"  {r['model']:<8} {lo['elpd_loo']:>10.2f} ({lo['se']:>6.2f}) {lo['p_loo']:>8.2f} "
            f"{r['elpd_diff']:>9.2f} ({r['se_diff']:>6.2f}) {lo['max_pareto_k']:>6.2f} "
            f"{d['max_rhat']:>7.4f} {d['divergences']:>4}  {factors}"
        )
    for name, m in got["models"].items():
        if not m["converged"]:
            click.echo(f"  {name}: refused, {m['error']}")


def _print_problems(e, as_json: bool, task_id: str, cap: int = 50):
    if as_json:
        click.echo(
            json.dumps(
                {"task": task_id, "valid": False, "problems": e.to_list(), "total": e.total},
                indent=2,
            )
        )
    else:
        click.echo(e.summary(cap), err=True)


@main.command("validate")
@TASK_ARG
@click.argument("file", type=click.Path(path_type=Path))
@SPLIT_OPTION
@HOME_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def validate_cmd(task_id, file, split, home, as_json):
    """Check a submission file; exit 0 only when it is valid."""
    # the scorer loads only when a command needs it: `palimpsest --help` stays light
    from scorer import SubmissionInvalid, validate_file

    try:
        v = validate_file(task_id, file, split, home)
    except SubmissionInvalid as e:
        _print_problems(e, as_json, task_id)
        sys.exit(EXIT_INVALID)
    if as_json:
        click.echo(json.dumps({"task": task_id, "valid": True, "problems": [], "format": v.format}))
    else:
        click.echo(f"{file}: valid {task_id} submission ({split} split, {v.format})")


@main.command("score")
@TASK_ARG
@click.argument("file", type=click.Path(path_type=Path))
@SPLIT_OPTION
@HOME_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the scoring JSON contract.")
@friendly
def score_cmd(task_id, file, split, home, as_json):
    """Validate, then score a submission against the split's gold."""
    # the scorer loads only when a command needs it: `palimpsest --help` stays light
    from scorer import SubmissionInvalid, score_file

    try:
        result = score_file(task_id, file, split, home)
    except SubmissionInvalid as e:
        _print_problems(e, as_json, task_id)
        sys.exit(EXIT_INVALID)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    p = result["primary"]
    click.echo(f"{task_id} ({split}): {p['name']} on {p['subset']} = {_num(p['value'])}")
    names = [m for m in get_task(task_id).metrics]
    subsets = list(result["metrics"])
    click.echo(f"{'':<10}" + "".join(f"{s:>10}" for s in subsets))
    for m in names:
        click.echo(
            f"{m:<10}" + "".join(f"{_num(result['metrics'][s].get(m)):>10}" for s in subsets)
        )
    cuts = result.get("cuts") or {}
    if cuts:  # a ranking cut at each declared k, its top k taken as the predicted links
        columns = list(next(iter(cuts.values())))
        click.echo("ranking cut at k (the top k sources of each query as its links):")
        click.echo(f"{'k':>8}" + "".join(f"{c:>12}" for c in columns))
        for k, row in cuts.items():
            click.echo(f"{k:>8}" + "".join(f"{_num(row[c]):>12}" for c in columns))
    for n in result["notes"]:
        click.echo(f"note: {n}")


def _num(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    return f"{v:.4f}"


def _register_optional_commands():
    """The participants', organizers' and baselines' commands (the server's load lazily)."""
    participant.register(main)
    signup.register(main)  # an account without the website
    organizer.register(main)
    campaigns.register(main)  # assessment campaigns: organizer campaign ..., assess
    task_changes.register(main)  # tasks that change: organizer task show|edit|version|archive
    baselines.register(main, home_option=HOME_OPTION, friendly=friendly)
    # the server's commands (SERVER_COMMANDS) load when one runs


_register_optional_commands()


if __name__ == "__main__":  # pragma: no cover
    main()
