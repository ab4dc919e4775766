"""A click choice whose values are read when first needed, not when the command table is built:
the registered tasks and their splits are read from their specs only by a command that takes one
(`palimpsest tokens create` never reads them)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import click


class LazyChoice(click.Choice):
    """`click.Choice(values())`, with `values` called on first use (parsing, help, completion)."""

    def __init__(self, values: Callable[[], Iterable[str]], case_sensitive: bool = True) -> None:
        super().__init__((), case_sensitive)
        del self.choices  # read by the property below when first asked for
        self._values = values

    @functools.cached_property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self._values())
