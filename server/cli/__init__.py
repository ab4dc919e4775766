"""The server's commands on `palimpsest`: serve, worker, reconcile, users, tokens, phases, db.

cli/main.py loads this module only when one of these commands runs (`palimpsest --help` lists them
from its own table); each command imports only what it uses.
"""

from __future__ import annotations

import click

from server.cli import accounts, backup, competitions, db, phases, runs, site


def register(main: click.Group) -> None:
    """Add the server's commands to the `palimpsest` group."""
    for module in (site, accounts, competitions, phases, runs, backup, db):
        module.register(main)
