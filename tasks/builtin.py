"""The built-in tasks are bundles too: what each one is (its metadata, format, metrics, subsets,
splits, references, folds and published rows) lives in its spec, `tasks/specs/<id>.yaml`, a
`TaskSpec` of tasks/bundle_models.py, the format of a bundle's task. What stays Python is what a
family needs and a bundle cannot say: the importer that turns an official release into a bundle
and its options, the demo generator and the agreement hooks, joined to the spec by task id in
`PYTHON` (named as "module:function": a family's module loads when its importer runs).

A spec is read without pydantic (declared.py says why): it is the model's full dump, checked by
tests/test_task_specs.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from tasks.base import Demo, ImportOption, Task
from tasks.catalogue import declaration_problems
from tasks.declared import task_from_declaration

SPECS = Path(__file__).with_name("specs")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def spec_path(task_id: str) -> Path:
    return SPECS / f"{task_id}.yaml"


def builtin_spec(task_id: str) -> dict:
    """A built-in task's spec (a `TaskSpec` as data), as its YAML file declares it."""
    return yaml.load(spec_path(task_id).read_text(encoding="utf-8"), Loader=_LOADER)


# ----------------------------------------------------------------------------- the Python

FROM = ImportOption(
    "--from",
    "source",
    "path",
    "An official release checkout (TRoTR, SwissGov-RSD, ...).",
    required=True,
)
# The two evaluation protocols of TRoTR cannot share a site: every fold's train and dev labels
# together label every instance, so a site scoring the held-out test of one fold with a hidden
# part cannot also publish the other folds' labels (docs/hidden-gold.md).
HELD_OUT, CROSS_VALIDATED = "held-out", "cross-validated"
PROTOCOL = ImportOption(
    "--protocol",
    "protocol",
    "choice",
    "held-out: the release's splits, the test split's gold hidden; cross-validated: the paper's "
    "folds, scored fold by fold, each fold's training labels public (TRoTR: its ten folds, and "
    "no hidden test split; Loci Similes: five folds of the positives, no hidden test split; STR: "
    "STR-2022's five folds of the English pairs beside SemEval's splits).",
    default=HELD_OUT,
    choices=(HELD_OUT, CROSS_VALIDATED),
)
TRIC_HELP = "palimpsest tasks import {id} --from path/to/TRoTR [--fold 1]"
TRIC = dict(
    importer="tasks.trotr:import_trotr",
    import_options=(
        FROM,
        ImportOption("--fold", "fold", "int", "TRoTR fold.", default=1, range=(1, 10)),
        PROTOCOL,
    ),
    demo=Demo(release="tasks.demo:trotr_release", predictions="tasks.demo:keyed_predictions"),
    agreement="tasks.agreement:trotr_release",
    agreement_bayes="tasks.agreement:trotr_bayes_release",
)

PYTHON: dict[str, dict] = {
    "tric-binary": dict(TRIC, import_help=TRIC_HELP.format(id="tric-binary")),
    "tric-ranking": dict(
        TRIC,
        import_help=TRIC_HELP.format(id="tric-ranking"),
        agreement_rows="tasks.agreement:trotr_rows",
    ),
    "trac": dict(
        importer="tasks.trotr:import_trotr",
        import_help="palimpsest tasks import trac --from path/to/TRoTR",
        import_options=(FROM,),
        demo=TRIC["demo"],
    ),
    "swissgov-rsd": dict(
        importer="tasks.swissgov:import_swissgov",
        import_help="palimpsest tasks import swissgov-rsd --from path/to/SwissGov-RSD "
        "[--test-split test|full]",
        import_options=(
            FROM,
            ImportOption(
                "--test-split",
                "test_split",
                "choice",
                "SwissGov-RSD: the 56-document test split per language pair, or all 224 "
                "as the hidden test (the paper's Table 3; no dev split then).",
                default="test",
                choices=("test", "full"),
            ),
        ),
        demo=Demo(
            release="tasks.demo:swissgov_release", predictions="tasks.demo:token_predictions"
        ),
        agreement="tasks.agreement_swissgov:swissgov_release",
        agreement_rows="tasks.agreement:swissgov_rows",
    ),
    "loci-similes": dict(
        importer="tasks.loci:import_loci",
        import_help="palimpsest tasks import loci-similes --query hieronymus_samples.csv "
        "--source vergil_samples.csv --gold ground_truth.csv [--protocol cross-validated] (the "
        "release's three files: the query document, the source document, the gold links)",
        import_options=(
            ImportOption(
                "--query",
                "query",
                "file",
                "The query document: Jerome's segments, seg_id,text (the release's "
                "hieronymus_samples.csv).",
                required=True,
            ),
            ImportOption(
                "--source",
                "source",
                "file",
                "The source document: Virgil's segments, seg_id,text (the release's "
                "vergil_samples.csv).",
                required=True,
            ),
            ImportOption(
                "--gold",
                "gold",
                "file",
                "The gold links: query_id,source_id,label (the release's ground_truth.csv).",
                required=True,
            ),
            PROTOCOL,
        ),
        demo=Demo(release="tasks.demo:loci_release", predictions="tasks.demo:link_predictions"),
    ),
    "str": dict(
        importer="tasks.semrel:import_str",
        import_help="palimpsest tasks import str --from path/to/Semantic_Relatedness_SemEval2024 "
        "[--languages eng,esp,...] [--protocol cross-validated]",
        import_options=(
            FROM,
            ImportOption(
                "--languages",
                "languages",
                "list",
                "STR: the languages to import, comma separated (default: every one found).",
            ),
            PROTOCOL,
        ),
        demo=Demo(release="tasks.semrel:demo_release", predictions="tasks.demo:keyed_predictions"),
        agreement="tasks.agreement_str:str_release",
        agreement_rows="tasks.agreement:str_rows",
        import_boards="tasks.semrel:track_boards",
    ),
    "pan-text-alignment": dict(
        importer="tasks.pan:import_pan",
        import_help="palimpsest tasks import pan-text-alignment --from path/to/corpus (PAN's "
        "layout: susp/, src/, pairs and the per-pair XML)",
        import_options=(FROM,),
        demo=Demo(release="tasks.pan:demo_release", predictions="tasks.pan:demo_predictions"),
    ),
}


def builtin_tasks() -> list[Task]:
    """The built-in tasks: each spec joined to its family's Python."""
    out = []
    for i, py in PYTHON.items():
        task = replace(task_from_declaration(builtin_spec(i)), **py)
        value = [f.kind for f in task.format.fields if f.name not in task.format.key]
        bad = declaration_problems(
            task.kind, task.metrics, task.primary[1], value[0] if value else None
        )
        if bad:  # a spec is refused as a bundle would be
            raise ValueError(f"{spec_path(i)}: {'; '.join(bad)}")
        out.append(task)
    return out
