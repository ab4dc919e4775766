"""The remote command line as modules: every participant and organizer command is a click command
importable by its name from the module of its group (`cli.organizer.phases.publish`), invoked here
by itself against a served app; the phase actions' flags are the declared ones the local
`palimpsest phases ACTION` reads (server.api_models.PhaseAction), and the server refuses one the
action does not take."""

from __future__ import annotations

import json
import sys

import click
from click.testing import CliRunner

# the modules of the remote commands: the participants' and organizers' groups, and the
# organizer's campaign and task groups (with `assess`) in modules of their own
HOMES = ("cli.participant.", "cli.organizer.", "cli.campaigns", "cli.task_changes")


def _leaves(group: click.Group, path: tuple[str, ...]):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, (*path, name))


def _remote_commands():
    """(path, command) of every remote command (as cli/main.py registers them)."""
    from cli import campaigns, organizer, participant, task_changes

    main = click.Group("palimpsest")
    participant.register(main)
    organizer.register(main)
    campaigns.register(main)
    task_changes.register(main)
    for path, cmd in _leaves(main, ()):
        if path != ("organizer",):  # made by register: the one group not importable by name
            yield path, cmd


def test_every_remote_command_is_importable_by_its_name():
    seen = []
    for path, cmd in _remote_commands():
        home = cmd.callback.__module__
        assert home.startswith(HOMES), (path, home)
        names = [k for k, v in vars(sys.modules[home]).items() if v is cmd]
        assert names, f"{' '.join(path)}: not a name of {home}"
        seen.append(f"{home}.{names[0]}")
    assert len(seen) == len(set(seen)) > 60  # one name each, and every command counted
    assert "cli.organizer.phases.publish" in seen and "cli.participant.teams.teams_join" in seen
    assert "cli.campaigns.assess" in seen and "cli.task_changes.version" in seen


def _phase_command_lines():
    """The phase actions' commands of both command lines: {name: command} under `palimpsest
    phases` (the server's local one) and under `palimpsest organizer` (the remote one), as
    cli/main.py registers them."""
    from cli.main import main

    ctx = click.Context(main)
    out = {}
    for group in ("phases", "organizer"):
        g = main.get_command(ctx, group)
        out[group] = {n: g.get_command(ctx, n) for n in g.list_commands(ctx)}
    return out


def test_every_declared_phase_action_has_its_command_on_both_command_lines():
    """A phase action the server binds (PHASE_ACTIONS) is a command of `palimpsest phases` and of
    `palimpsest organizer` by its name, with the help it is declared with (show-board and
    hide-board among them)."""
    from server.actions.phase_help import PHASE_ACTION_HELP
    from server.actions.phases import PHASE_ACTIONS

    assert {"show-board", "hide-board", "publish"} <= set(PHASE_ACTIONS)
    lines = _phase_command_lines()
    for group, commands in lines.items():
        missing = [n for n in PHASE_ACTIONS if n not in commands]
        assert not missing, f"palimpsest {group}: no command for the phase actions {missing}"
        for name in PHASE_ACTIONS:
            assert commands[name].help == PHASE_ACTION_HELP[name], (group, name)
    # the check can fail: a declared action without its command on one line is named
    del lines["organizer"]["show-board"]
    assert [n for n in PHASE_ACTIONS if n not in lines["organizer"]] == ["show-board"]


def test_the_apis_prose_names_every_phase_action(app):
    from server.actions.phases import PHASE_ACTIONS

    spec = app.test_client().get("/api/v1/openapi.json").get_json()
    (op,) = [
        v["post"]
        for k, v in spec["paths"].items()
        if k.endswith("/phases/{phase_name}/{action}") and "post" in v
    ]
    for name in PHASE_ACTIONS:
        assert name in op["summary"].lower() and f"`{name}`" in op["description"], name


def test_the_phase_actions_take_the_declared_options_as_the_local_commands_do():
    from cli.organizer import phases as remote
    from server import api_models as m
    from server.cli.phases import PHASE_COMMANDS, phase_command

    declared = {
        "--" + (f.alias or name).replace("_", "-") for name, f in m.PhaseAction.model_fields.items()
    }
    assert declared == {"--reason", "--close", "--runs"}
    for name in PHASE_COMMANDS:
        ours = remote.ACTIONS[name]
        local = phase_command(name, PHASE_COMMANDS[name])
        flags = {o for p in ours.get_params(click.Context(ours)) for o in p.opts}
        local_flags = {o for p in local.get_params(click.Context(local)) for o in p.opts}
        assert declared <= flags, name
        # the same declared options, and those of the transport only (--json, --yes, --home)
        assert flags & local_flags >= declared | {"--json", "--help"}, name


def _invoke(cmd, url, token, *args):
    return CliRunner().invoke(
        cmd,
        list(args),
        env={
            "PALIMPSEST_SERVER": url,
            "PALIMPSEST_TOKEN": token,
            "XDG_CONFIG_HOME": "/nonexistent",
        },
        catch_exceptions=False,
    )


def test_commands_run_by_their_own_name(served):
    from cli.organizer.phases import close, freeze, phases_list, publish
    from cli.participant.runs import submissions
    from cli.participant.teams import teams_show

    url, tokens, home, app = served
    org = tokens["org"]
    r = _invoke(phases_list, url, org, "tric-binary", "--json")
    assert r.exit_code == 0 and "test" in {p["name"] for p in json.loads(r.stdout)}
    # an option the action does not take: refused by the server, in one line, nothing done
    r = _invoke(freeze, url, org, "tric-binary", "test", "--close")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
    assert "freeze action takes no close" in r.stderr
    r = _invoke(freeze, url, org, "tric-binary", "test", "--reason", "why", "--json")
    assert r.exit_code == 1 and "takes no reason" in json.loads(r.stdout)["error"]["message"]
    r = _invoke(phases_list, url, org, "tric-binary", "--json")
    test = next(p for p in json.loads(r.stdout) if p["name"] == "test")
    assert "frozen" not in test["state"]
    # the declared --close and --reason reach the server under the API's names
    r = _invoke(publish, url, org, "tric-binary", "test", "--close", "--yes", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["ranking"]["version"] == 1 and "closed" in got["phase"]["state"]
    # the same click again (nothing changed, no reason): the version just made, not a correction
    r = _invoke(publish, url, org, "tric-binary", "test", "--yes", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["ranking"]["version"] == 1, r.output
    r = _invoke(publish, url, org, "tric-binary", "test", "--reason", "a fix", "--yes", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["ranking"]["version"] == 2
    r = _invoke(close, url, org, "tric-binary", "test")
    assert r.exit_code == 1 and r.stderr.startswith("error: ")
    # a participant's commands, by name too
    r = _invoke(submissions, url, tokens["alpha"], "--json")
    assert r.exit_code == 0 and json.loads(r.stdout) == []
    r = _invoke(teams_show, url, tokens["alpha"])
    assert r.exit_code == 0 and r.stdout.startswith("team alpha ")
