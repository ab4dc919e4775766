"""Release rules for a live board's public scores: what a team is shown of each run's public-part
score, so that the feedback itself cannot be climbed (the private part and the published ranking
are never affected).

- `exact`: every run's score as it is.
- `ladder` (Blum and Hardt, "The Ladder: a reliable leaderboard for machine learning
  competitions", ICML 2015, Algorithm 1): a run's score is released, rounded to a multiple of
  eta, only when it beats the team's best released one by more than eta; otherwise the best is
  repeated.
- `ladder-paired` (their parameter-free Ladder, Algorithm 2, with the board's paired bootstrap for
  the paired t-test): released, rounded to the resolution of the units (1/n), only when it beats
  the team's best run by more than one standard error of the paired difference over the
  resamples; otherwise the best is repeated.
- `rounded`: every run's score rounded to the resolution of its interval (the largest 1, 2 or 5
  times a power of ten not above the interval's half-width), so that differences inside the
  noise do not show.

`released(runs, rule)` takes a team's runs in the order they were made and returns what each
shows. Greater is better (a caller negates a loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RULES = ("exact", "ladder", "ladder-paired", "rounded")
DEFAULT_ETA = 0.01


@dataclass(frozen=True)
class Rule:
    kind: str = "exact"
    eta: float = DEFAULT_ETA

    def __post_init__(self):
        if self.kind not in RULES:
            raise ValueError(f"release rule: one of {', '.join(RULES)}, not {self.kind!r}")
        if not (isinstance(self.eta, (int, float)) and 0 < self.eta < 1):
            raise ValueError(f"release rule: eta in (0, 1), not {self.eta!r}")

    @classmethod
    def parse(cls, spec) -> Rule:
        """From a phase's setting: None or "exact", "ladder", "ladder-paired", "rounded", or a
        mapping {"rule": ..., "eta": ...}."""
        if spec is None:
            return cls()
        if isinstance(spec, str):
            return cls(spec)
        if isinstance(spec, dict):
            unknown = set(spec) - {"rule", "eta"}
            if unknown:
                raise ValueError(f"release rule: unknown key(s) {', '.join(sorted(unknown))}")
            return cls(spec.get("rule", "exact"), spec.get("eta", DEFAULT_ETA))
        raise ValueError(f"release rule: a name or a mapping, not {type(spec).__name__}")

    def to_json(self):
        return self.kind if self.kind != "ladder" else {"rule": "ladder", "eta": self.eta}


def resolution(half_width: float) -> float:
    """The largest 1, 2 or 5 times a power of ten not above half_width (0: none)."""
    if not (half_width > 0 and math.isfinite(half_width)):
        return 0.0
    e = math.floor(math.log10(half_width))
    for m in (5, 2, 1):
        if m * 10.0**e <= half_width * (1 + 1e-12):
            return m * 10.0**e
    return 10.0**e  # pragma: no cover (1 x 10^e is always below)


def _round_to(x: float, step: float) -> float:
    return x if step <= 0 else round(round(x / step) * step, 12)


def released(
    scores,
    rule: Rule,
    *,
    samples=None,
    half_widths=None,
    n_units: int | None = None,
) -> list[float | None]:
    """What each of a team's runs (in the order made) shows under `rule`. `samples` (runs x B,
    the runs' paired resampled scores) for `ladder-paired`, `half_widths` (each run's interval
    half-width) for `rounded`, `n_units` (the public part's units) for `ladder-paired`'s
    rounding. A run without a score (None or NaN) shows none and changes nothing."""
    out: list[float | None] = []
    best = -math.inf  # the best released value
    best_i = None  # the run that set it
    for i, s in enumerate(scores):
        if s is None or not math.isfinite(s):
            out.append(None)
            continue
        s = float(s)
        if rule.kind == "exact":
            out.append(s)
        elif rule.kind == "rounded":
            hw = None if half_widths is None else half_widths[i]
            out.append(_round_to(s, resolution(hw) if hw is not None else 0.0))
        elif rule.kind == "ladder":
            if s > best + rule.eta:
                best, best_i = _round_to(s, rule.eta), i
            out.append(best)
        else:  # ladder-paired
            if best_i is None:
                better = True
            else:
                d = np.asarray(samples[i], dtype=np.float64) - np.asarray(samples[best_i])
                d = d[np.isfinite(d)]
                se = float(np.std(d, ddof=1)) if d.size >= 2 else math.inf
                better = s - float(scores[best_i]) > se
            if better:
                best, best_i = _round_to(s, 1.0 / n_units if n_units else 0.0), i
            out.append(best)
    return out


__all__ = ["DEFAULT_ETA", "RULES", "Rule", "released", "resolution"]
