"""Public/private partitions of a split's gold, drawn reproducibly from a recorded seed.

`stratified_partition` divides every stratum (a subset, a language pair, queries with and
without a gold link) in the same proportion, so that each metric defined on the whole split is
defined on both parts. `legacy_partition` is the unstratified draw used before, kept so that a
phase scored with it keeps its partition.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from typing import Iterable


def share(n: int, public_fraction: float) -> int:
    """How many of `n` units go to the public part: round half up, and at least one unit on each
    side whenever there are two or more."""
    if n <= 1:
        return n
    k = math.floor(n * public_fraction + 0.5)
    return max(1, min(n - 1, k))


def stratified_partition(
    units: Iterable[tuple[str, str]], seed: int, public_fraction: float
) -> tuple[list[str], list[str]]:
    """(public, private), each sorted, from (unit, stratum) pairs.

    Each stratum's units are sorted, shuffled with a generator seeded by (seed, stratum) and cut
    at `share(n, public_fraction)`; the result depends on nothing else (not on the order of the
    input, nor on the other strata).
    """
    groups: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for unit, stratum in units:
        if unit in seen:
            raise ValueError(f"unit {unit!r} appears twice in the partition's input")
        seen.add(unit)
        groups[stratum].append(unit)
    public: list[str] = []
    private: list[str] = []
    for stratum in sorted(groups):
        order = sorted(groups[stratum])
        random.Random(f"{seed}:{stratum}").shuffle(order)
        k = share(len(order), public_fraction)
        public += order[:k]
        private += order[k:]
    return sorted(public), sorted(private)


def legacy_partition(
    units: list[str], seed: int, public_fraction: float
) -> tuple[list[str], list[str]]:
    """The unstratified draw of earlier versions (a phase's own seed), unchanged."""
    order = sorted(units)
    random.Random(seed).shuffle(order)
    k = round(len(order) * public_fraction)
    k = max(1, min(len(order) - 1, k)) if len(order) > 1 else len(order)
    return sorted(order[:k]), sorted(order[k:])
