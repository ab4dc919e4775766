"""Assessment campaigns over the REST API:
`palimpsest organizer campaign open|show|agreement|bayes|disagreements|adjudicate|close|export` (an
organizer's token) and
`palimpsest assess CAMPAIGN [--item ITEM --label LABEL [--comment ...]]` (an assessor's token).

Each takes `--json` (exactly one JSON document on stdout); a failure is one line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from urllib.parse import quote

import click

from cli.common import JSON, call, emit


def _q(v: str) -> str:
    return quote(str(v), safe="")


def _campaign_lines(c: dict) -> None:
    cnt = c["counts"]
    click.echo(
        f"campaign {c['id']} on {c['task']}/{c['phase']} ({c['state']}): {cnt['items']} items, "
        f"{cnt['assignments']} assignments, {cnt['judgments']} judgments; depth {c['depth']}, "
        f"{c['per_item']} assessors per item, seed {c['seed']}"
    )
    for a in c["assessors"]:
        gold = ""
        if a.get("gold_judged") is not None:
            gold = f"; {a['gold_agreed']}/{a['gold_judged']} gold links judged a link"
        click.echo(f"  {a['email']}: {a['judged']}/{a['assigned']} judged{gold}")
    if c.get("participants"):
        click.echo(f"  warning: assessors who take part: {', '.join(c['participants'])}")
    for it in c.get("items") or []:
        click.echo(f"  item {it['id']}: {it['key'].replace(chr(9), '  ->  ')}")


def _measure(name: str, v: dict | None) -> str:
    if not v or v.get("value") is None:
        return f"{name} -"
    lo, hi = v.get("low"), v.get("high")
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{name} {v['value']:.3f}{ci}"


def _agreement_lines(a: dict) -> None:
    cnt = a["counts"]
    click.echo(
        f"campaign {a['campaign']}: {cnt['complete_items']} of {cnt['items']} items fully judged "
        f"({cnt['judgments']}/{cnt['assignments']} judgments)"
    )
    rows = [("overall", a["overall"])] + [(lv["level"], lv) for lv in a.get("levels") or []]
    for name, r in rows:
        by_dataset = (
            f"  {_measure('with the A_e of all items', r.get('multi_kappa_dataset_expected'))}"
            if "multi_kappa_dataset_expected" in r
            else ""
        )
        click.echo(
            f"  {name:<24} items {r.get('items', 0):>5}  "
            f"{_measure('multi-kappa', r.get('multi_kappa'))}  "
            f"{_measure('pair-weighted', r.get('multi_kappa_weighted'))}{by_dataset}  "
            f"{_measure('observed', r.get('observed'))}"
        )
    if a["overall"].get("note"):
        click.echo(f"  ({a['overall']['note']}; by level: multi-kappa with the level's own A_e)")


def _items_lines(a: dict) -> None:
    click.echo(
        f"campaign {a['campaign']} ({a['task']}, {a['state']}): {a['judged']}/{a['total']} "
        f"judged; labels: {', '.join(a['labels'])}"
    )
    for it in a["items"]:
        mark = it["label"] if it.get("label") else "-"
        click.echo(f"[{it['item']}] {mark}")
        if it.get("candidate") is not None:
            click.echo(f"  query     {it['query']}: {it.get('query_text') or ''}")
            click.echo(f"  candidate {it['candidate']}: {it.get('candidate_text') or ''}")
        else:
            click.echo(f"  {it['query']}: {it.get('fields')}")


def _disagreement_lines(d: dict) -> None:
    cnt = d["counts"]
    click.echo(
        f"campaign {d['campaign']} ({d['state']}): {cnt['items']} items, {cnt['unanimous']} "
        f"unanimous, {cnt['disagreeing']} disagreeing, {cnt['decided']} decided, "
        f"{cnt['undecided']} still need a decision"
    )
    for it in d["items"]:
        votes = ", ".join(f"{k} {v}" for k, v in it["counts"].items())
        dec = f" -> {it['decision']} ({it['rule']})" if it.get("decision") else ""
        more = "" if it["complete"] else " (not all judged)"
        click.echo(
            f"  item {it['item']}: {it['key'].replace(chr(9), '  ->  ')}: {votes}{more}{dec}"
        )


def _adjudicate_lines(a: dict) -> None:
    for d in a["decided"]:
        click.echo(f"item {d['item']}: {d['label']} ({d['rule']})")
    if a["ties"]:
        click.echo(f"ties left for a person: {', '.join(str(i) for i in a['ties'])}")
    click.echo(f"campaign {a['campaign']}: {a['undecided']} item(s) still need a decision")


def _close_lines(c: dict) -> None:
    g = c["gold"]
    click.echo(
        f"campaign {c['campaign']} closed: gold v{g['version']} of {g['task']}/{g['split']} "
        f"({g['reason']}): {g['added']} added, {g['judged_negative']} judged negative; "
        f"sha256 {g['sha256'][:16]}"
    )
    click.echo(f"{len(c['rescoring'])} run(s) marked stale and queued for rescoring")
    for p in c["published"]:
        click.echo(
            f"the published ranking of {p['phase']} (version {p['version']}) stays as published; "
            f"to publish it under the new gold: {p['command']}"
        )


def _fit_line(f: dict) -> str:
    cfg = f["settings"]
    head = (
        f"fit {f['id']} of campaign {f['campaign']}: {f['state']} (seed {f['seed']}, "
        f"{cfg.get('chains')} chains of {cfg.get('warmup')} + {cfg.get('samples')} draws)"
    )
    r = f.get("result") or {}
    if f["state"] == "done":
        k, d = r["kappa"], r["diagnostics"]
        lo, hi = k["95%"]
        stale = "" if f.get("current") in (None, True) else "; judgments changed since"
        return (
            f"{head}\n  multi-kappa {k['median']:.3f} [{lo:.3f}, {hi:.3f}] (posterior median, 95%; "
            f"{r['items']} items){stale}\n  R-hat max {d['max_rhat']:.4f}, divergences "
            f"{d['divergences']}, ESS min {d['min_ess']:.0f}, {d['seconds']} s"
        )
    if f["state"] == "not_converged" and r.get("diagnostics"):
        d = r["diagnostics"]  # the refused attempt's: why it was refused
        rhat = "undefined" if d.get("max_rhat") is None else f"{d['max_rhat']:.4f}"
        ess = "undefined" if d.get("min_ess") is None else f"{d['min_ess']:.0f}"
        return (
            f"{head}\n  {f['error']}\n  the refused fit: R-hat max {rhat}, divergences "
            f"{d.get('divergences')}, ESS min {ess}, target acceptance {d.get('target_accept')}"
        )
    if f["state"] in ("not_converged", "failed"):
        return f"{head}\n  {f['error']}"
    return head


def _fits_lines(got: dict) -> None:
    if not got["fits"]:
        click.echo(f"campaign {got['campaign']}: no fit of the Bayesian model yet")
    for f in got["fits"]:
        click.echo(_fit_line(f))


@click.group("campaign")
def campaign():
    """Assessment campaigns: open one on a phase, see it, measure the assessors' agreement."""


@campaign.command("open")
@click.argument("task_id", metavar="TASK")
@click.argument("phase")
@click.option("--depth", type=int, required=True, help="Top-k links per query of each run.")
@click.option("--assessors", "per_item", type=int, default=3, show_default=True, help="Per item.")
@click.option("--assessor", "emails", multiple=True, required=True, help="An email; repeat.")
@click.option("--label", "labels", multiple=True, help="A label; repeat (default: 2).")
@click.option(
    "--guideline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A Markdown file shown to assessors.",
)
@click.option("--seed", type=int, default=None, help="Of the assignment (drawn if absent).")
@click.option(
    "--positive", multiple=True, help="A label that makes a link; repeat (default: the first)."
)
@click.option(
    "--allow-participants",
    is_flag=True,
    help="Open it although an assessor takes part in the competition (refused otherwise).",
)
@JSON
def campaign_open(
    task_id,
    phase,
    depth,
    per_item,
    emails,
    labels,
    guideline,
    seed,
    positive,
    allow_participants,
    as_json,
):
    """Pool the phase's ranked runs and assign the items to the assessors."""
    body = {"depth": depth, "assessors": list(emails), "per_item": per_item}
    if labels:
        body["labels"] = list(labels)
    if guideline is not None:
        body["guideline"] = guideline.read_text(encoding="utf-8")
    if seed is not None:
        body["seed"] = seed
    if positive:
        body["positive"] = list(positive)
    if allow_participants:
        body["allow_participants"] = True
    got = call(
        as_json,
        lambda c: c.send_json("POST", f"/tasks/{_q(task_id)}/phases/{_q(phase)}/campaigns", body),
    )
    emit(as_json, got, _campaign_lines)


@campaign.command("show")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@JSON
def campaign_show(campaign_id, as_json):
    """A campaign's items and each assessor's progress."""
    got = call(as_json, lambda c: c.get_json(f"/campaigns/{campaign_id}"))
    emit(as_json, got, _campaign_lines)


@campaign.command("agreement")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@click.option(
    "--by",
    type=click.Choice(["run", "source_work", "overlap", "query_had_gold", "stratum"]),
    default=None,
    help="A factor of the items.",
)
@JSON
def campaign_agreement(campaign_id, by, as_json):
    """Multi-kappa with its interval over the fully judged items, overall and by a factor."""
    params = {"by": by} if by else {}
    got = call(as_json, lambda c: c.get_json(f"/campaigns/{campaign_id}/agreement", **params))
    emit(as_json, got, _agreement_lines)


@campaign.command("bayes")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@click.option("--show", is_flag=True, help="List the fits, newest first; request none.")
@click.option("--seed", type=int, default=None, help="Of the sampler (default: the campaign's).")
@click.option("--chains", type=int, default=None, help="NUTS chains (default 4, at most 4).")
@click.option("--warmup", type=int, default=None, help="Warmup draws a chain (default 1000).")
@click.option("--samples", type=int, default=None, help="Kept draws a chain (default 1000).")
@click.option("--wait", is_flag=True, help="Wait for the fit to finish, then print it.")
@click.option("--timeout", type=int, default=3600, show_default=True, help="Seconds --wait waits.")
@JSON
def campaign_bayes(campaign_id, show, seed, chains, warmup, samples, wait, timeout, as_json):
    """Ask a worker for the Bayesian agreement model of a campaign (or, with --show, list its
    fits); a fit that did not converge shows what failed, never its figures."""
    path = f"/campaigns/{campaign_id}/bayes"
    if show and not wait:
        emit(as_json, call(as_json, lambda c: c.get_json(path)), _fits_lines)
        return
    if show:
        fits = call(as_json, lambda c: c.get_json(path))["fits"]
        if not fits:
            emit(as_json, {"campaign": campaign_id, "fits": []}, _fits_lines)
            return
        got = fits[0]
    else:
        body = {
            k: v
            for k, v in (
                ("seed", seed),
                ("chains", chains),
                ("warmup", warmup),
                ("samples", samples),
            )
            if v is not None
        }
        got = call(as_json, lambda c: c.send_json("POST", path, body))
    deadline = time.monotonic() + timeout
    while wait and got["state"] in ("queued", "running"):
        if time.monotonic() > deadline:
            message = f"fit {got['id']} is still {got['state']} after {timeout} s"
            if as_json:
                click.echo(json.dumps({"error": {"message": message, "code": "timeout"}}))
                sys.exit(1)
            raise click.ClickException(message)
        time.sleep(2)
        fits = call(as_json, lambda c: c.get_json(path))["fits"]
        got = next((f for f in fits if f["id"] == got["id"]), got)
    emit(as_json, got, lambda f: click.echo(_fit_line(f)))


@campaign.command("disagreements")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@JSON
def campaign_disagreements(campaign_id, as_json):
    """The items whose judgments disagree, with each label's count and their decisions."""
    got = call(as_json, lambda c: c.get_json(f"/campaigns/{campaign_id}/disagreements"))
    emit(as_json, got, _disagreement_lines)


@campaign.command("adjudicate")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@click.option("--majority", is_flag=True, help="Apply the strict majority to every item.")
@click.option("--item", type=int, default=None, help="Decide this item.")
@click.option("--label", default=None, help="Its label (with --item).")
@click.option("--reason", default="", help="Why (required with --item).")
@JSON
def campaign_adjudicate(campaign_id, majority, item, label, reason, as_json):
    """Decide disagreeing items: --majority, or --item ITEM --label LABEL --reason ..."""
    if majority == (item is not None) or (item is not None) != (label is not None):
        message = "give either --majority, or --item with --label (and --reason)"
        if as_json:
            click.echo(json.dumps({"error": {"message": message, "code": "usage"}}))
            sys.exit(1)
        raise click.UsageError(message)
    body = {"majority": True} if majority else {"item": item, "label": label}
    body["reason"] = reason
    got = call(as_json, lambda c: c.send_json("POST", f"/campaigns/{campaign_id}/adjudicate", body))
    emit(as_json, got, _adjudicate_lines)


@campaign.command("close")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@JSON
def campaign_close(campaign_id, as_json):
    """Close a decided campaign: a new gold version, every run rescored under it."""
    got = call(as_json, lambda c: c.send_json("POST", f"/campaigns/{campaign_id}/close", {}))
    emit(as_json, got, _close_lines)


@campaign.command("export")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@click.option(
    "-o",
    "--output",
    "dest",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The directory to write into.",
)
@JSON
def campaign_export(campaign_id, dest, as_json):
    """Write the judgments, decisions, gold, qrels and agreement of a campaign to a folder."""
    got = call(as_json, lambda c: c.get_json(f"/campaigns/{campaign_id}/export"))
    written = []
    for name, text in sorted(got["files"].items()):
        p = dest / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            continue  # never outside the folder asked for
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode("utf-8"))
        written.append(str(p))
    emit(
        as_json,
        {"campaign": got["campaign"], "written": written},
        lambda r: click.echo("\n".join(r["written"])),
    )


@click.command("assess")
@click.argument("campaign_id", metavar="CAMPAIGN", type=int)
@click.option("--item", type=int, default=None, help="The item to judge.")
@click.option("--label", default=None, help="Its label (one the campaign declared).")
@click.option("--comment", default="", help="An optional comment.")
@JSON
def assess(campaign_id, item, label, comment, as_json):
    """List your items in a campaign; with --item and --label, record a judgment."""
    if (item is None) != (label is None):
        message = "--item and --label go together"
        if as_json:
            click.echo(json.dumps({"error": {"message": message, "code": "usage"}}))
            sys.exit(1)
        raise click.UsageError(message)
    if item is None:
        got = call(as_json, lambda c: c.get_json(f"/campaigns/{campaign_id}/items"))
        emit(as_json, got, _items_lines)
        return
    got = call(
        as_json,
        lambda c: c.send_json(
            "PUT",
            f"/campaigns/{campaign_id}/items/{item}/judgment",
            {"label": label, "comment": comment},
        ),
    )
    emit(
        as_json,
        got,
        lambda j: click.echo(f"item {j['item']} of campaign {j['campaign']}: {j['label']}"),
    )


def register(main: click.Group) -> None:
    """Add `organizer campaign ...` (under the organizer group) and `assess`."""
    main.commands["organizer"].add_command(campaign)
    main.add_command(assess)
