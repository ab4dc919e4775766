"""The reference systems' names, in one list: what `palimpsest baselines run --system` accepts and
what baselines.systems implements (it refuses to load when the two differ). Imports nothing, so
that the command line offers them without loading the systems."""

from __future__ import annotations

ALL_SYSTEMS = (
    "lexical",
    "bi-encoder",
    "bi-encoder-mask",
    "cross-encoder",
    "cross-encoder-mask",
    "diffalign",
    "retrieve",
    "retrieve-rerank",
    "ngram-align",
)
