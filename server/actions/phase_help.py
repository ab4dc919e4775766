"""The phase actions by the name every surface uses (the web form's `action=`, the API's path, both
command lines' commands), each with what every surface says of it: declared here once. This module
imports nothing, so that the command lines build a command for each name without loading the
actions; server.actions.phases binds each name to its action (`PHASE_ACTIONS`) and refuses to load
when the two lists differ."""

from __future__ import annotations

PHASE_ACTION_HELP: dict[str, str] = {
    "close": "Close a phase now: no further submissions are accepted.",
    "freeze": "Freeze a phase's leaderboard: later submissions are not shown to participants.",
    "unfreeze": "Unfreeze a phase's leaderboard.",
    "show-board": "Show a phase's leaderboard to everyone.",
    "hide-board": "Hide a phase's leaderboard: organizers only see it.",
    "publish": "Publish the final ranking of a closed phase (an immutable snapshot); again, with "
    "--reason, to publish a correction as a new version.",
    "rerun": "Re-run archived systems (--runs: their code runs' ids) on a phase's inputs, with "
    "their teams' consent: each as a code run of the phase, its row on the board beside the "
    "team's own.",
}


def phase_action_list(names=tuple(PHASE_ACTION_HELP), last: str = "or") -> str:
    """The names as prose: `close, freeze, ... or publish`."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def rerun_line(r: dict) -> str:
    """One re-run of the phase action `rerun` (a `RerunOut` as a dict), as both command lines
    print it."""
    again = " (queued before)" if r["duplicate"] else ""
    return (
        f"code run {r['run']}: team {r['team']}'s system of {r['task']}/{r['phase']} (run "
        f"{r['of']}) re-run{again}"
    )
