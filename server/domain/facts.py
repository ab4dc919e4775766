"""Fact sheets: the questions a competition asks of every submission (`Competition.fact_fields`,
each a `FactField`: key, label, kind, choices, required, phases, help), and the answers a run
carries (`Submission.facts`).

`check_facts` is the one check of every surface (the web form, the API's multipart upload, the CLI
through the API): every problem is named at once, keyed `facts.<key>`. The answers travel as form
fields `fact.<key>` (`form_facts` reads them). Values are stored typed: a yes/no as a bool.

Nothing here knows of Flask.
"""

from __future__ import annotations

from server.domain.bounds import CONTROL, url_problem
from server.exceptions import UploadFieldsInvalid
from tasks.bundle_models import fact_items

PREFIX = "fact."
MAX_TEXT = 500
MAX_LONG_TEXT = 20_000
YES, NO = frozenset({"yes", "true"}), frozenset({"no", "false"})


def form_facts(form) -> dict[str, str]:
    """The answers of a submitted form (web or API multipart): every field `fact.<key>`, by key.
    A field sent empty counts as not answered."""
    out = {}
    for name in form.keys():
        if name.startswith(PREFIX):
            out[name[len(PREFIX) :]] = form.get(name) or ""
    return out


def required_in(field: dict, phase_name: str) -> bool:
    """Whether a declared field must be answered in the phase (`phases` empty: in every one)."""
    return bool(field.get("required")) and (
        not field.get("phases") or phase_name in field["phases"]
    )


def check_facts(
    fields: list[dict], phase_name: str, given: dict[str, str], *, require: bool = True
) -> dict:
    """The cleaned answers (stripped; a yes/no as a bool; unanswered fields left out), or
    `UploadFieldsInvalid` naming every problem at once, keyed `facts.<key>`. Without `require`
    (an organizer's baseline entry), no field is required."""
    declared = {f["key"]: f for f in fields or []}
    problems: dict[str, str] = {}
    out: dict = {}
    for key in given:
        if key not in declared:
            problems[f"facts.{key}"] = "not a field of this competition's fact sheet" + (
                f" (its fields: {', '.join(declared)})" if declared else " (it asks for none)"
            )
    for key, f in declared.items():
        raw = given.get(key)
        value = (raw or "").strip() if isinstance(raw, str) else raw
        if value is None or value == "":
            if require and required_in(f, phase_name):
                problems[f"facts.{key}"] = f"required: {f.get('label') or key}"
            continue
        if not isinstance(value, str):
            problems[f"facts.{key}"] = "a text value is expected"
            continue
        problem, clean = _check_one(f, value)
        if problem:
            problems[f"facts.{key}"] = problem
        else:
            out[key] = clean
    if not problems:
        problems.update(rule_problems(fields, out))
    if problems:
        raise UploadFieldsInvalid(problems)
    return out


def rule_problems(fields: list[dict], sheet: dict) -> dict[str, str]:
    """What a cleaned fact sheet breaks of its choice fields' rules (a track's), keyed
    `facts.<the fact the rule restricts>`: e.g. Track B forbids declaring `train` among the
    training files. A `forbid_board_subset` rule depends on a board (Track C's: no labelled data
    in the language a board ranks): it is applied where each board is built
    (`server.boards.leaderboard.passes`), not here."""
    problems: dict[str, str] = {}
    declared = {f["key"]: f for f in fields or []}
    for f in fields or []:
        answer = sheet.get(f["key"])
        for r in f.get("rules") or ():
            if answer not in (r.get("when") or ()):
                continue
            other = declared.get(r["fact"], {})
            name = f"{f.get('label') or f['key']} {answer}"
            items = fact_items(sheet.get(r["fact"]))
            why = f" ({r['message']})" if r.get("message") else ""
            if r.get("forbid"):
                bad = [x for x in items if x in {v.lower() for v in r["forbid"]}]
                if bad:
                    problems[f"facts.{r['fact']}"] = (
                        f"{name} forbids declaring {', '.join(bad)} in "
                        f"{other.get('label') or r['fact']}{why}"
                    )
            elif r.get("only"):
                allowed = {v.lower() for v in r["only"]}
                bad = [x for x in items if x not in allowed]
                if bad or not items:
                    problems[f"facts.{r['fact']}"] = (
                        f"{name} allows only {', '.join(r['only'])} in "
                        f"{other.get('label') or r['fact']}"
                        + (f" (not {', '.join(bad)})" if bad else " (unanswered)")
                        + why
                    )
    return problems


def _check_one(f: dict, value: str) -> tuple[str | None, object]:
    m = CONTROL.search(value)
    if m:
        return f"a control character (U+{ord(m.group()):04X}) is not allowed in this field", None
    kind = f.get("kind") or "text"
    if kind == "text":
        if "\n" in value or "\r" in value:
            return "one line, please (a long text field takes several)", None
        if len(value) > MAX_TEXT:
            return f"at most {MAX_TEXT} characters (this has {len(value)})", None
    elif kind == "long_text":
        if len(value) > MAX_LONG_TEXT:
            return f"at most {MAX_LONG_TEXT} characters (this has {len(value)})", None
    elif kind == "choice":
        choices = list(f.get("choices") or [])
        if value not in choices:
            return f"{value[:100]!r} is not one of: {', '.join(choices)}", None
    elif kind == "yes_no":
        v = value.lower()
        if v in YES:
            return None, True
        if v in NO:
            return None, False
        return f"{value[:100]!r}: answer yes or no (or true or false)", None
    elif kind == "url":
        problem = url_problem(value)
        if problem:
            return problem.replace("the paper/code URL", "the URL"), None
    return None, value


def shown(value) -> str:
    """An answer as text (an export, a page): a yes/no as yes or no."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return "" if value is None else str(value)
