"""The built-in tasks are bundles too: what each one is (its metadata, format, metrics, subsets,
splits, references, folds and published rows) lives in its spec, `tasks/specs/<id>.yaml`, a
`TaskSpec` of tasks/bundle_models.py, the format of a bundle's task. What stays Python is what a
family needs and a bundle cannot say: the importer that turns an official release into a bundle
and its options, the demo generator and the agreement hooks, joined to the spec by task id.

A spec is read without pydantic (declared.py says why): it is the model's full dump, checked by
tests/test_task_specs.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from tasks.base import Task
from tasks.declared import task_from_declaration

SPECS = Path(__file__).with_name("specs")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def spec_path(task_id: str) -> Path:
    return SPECS / f"{task_id}.yaml"


def builtin_spec(task_id: str) -> dict:
    """A built-in task's spec (a `TaskSpec` as data), as its YAML file declares it."""
    return yaml.load(spec_path(task_id).read_text(encoding="utf-8"), Loader=_LOADER)


def _python() -> dict[str, dict]:
    # the family modules hold the importers and their options; imported here, not at the top, so
    # that a family module may use this one (and they are light: no numpy, no pydantic)
    from tasks import loci, semrel, swissgov, trotr

    tric = dict(
        importer="tasks.trotr:import_trotr",
        import_options=(trotr.FROM, trotr.FOLD, trotr.PROTOCOL),
        demo=trotr.DEMO,
        agreement="tasks.agreement:trotr_release",
        agreement_bayes="tasks.agreement:trotr_bayes_release",
    )
    return {
        "tric-binary": dict(tric, import_help=trotr.IMPORT_HELP.format(id="tric-binary")),
        "tric-ranking": dict(
            tric,
            import_help=trotr.IMPORT_HELP.format(id="tric-ranking"),
            agreement_rows="tasks.agreement:trotr_rows",
        ),
        "trac": dict(
            importer="tasks.trotr:import_trotr",
            import_help="palimpsest tasks import trac --from path/to/TRoTR",
            import_options=(trotr.FROM,),
            demo=trotr.DEMO,
        ),
        "swissgov-rsd": dict(
            importer="tasks.swissgov:import_swissgov",
            import_help=swissgov.IMPORT_HELP,
            import_options=swissgov.IMPORT_OPTIONS,
            demo=swissgov.DEMO,
            agreement="tasks.agreement_swissgov:swissgov_release",
            agreement_rows="tasks.agreement:swissgov_rows",
        ),
        "loci-similes": dict(
            importer="tasks.loci:import_loci",
            import_help=loci.IMPORT_HELP,
            import_options=loci.IMPORT_OPTIONS,
            demo=loci.DEMO,
        ),
        "str": dict(
            importer="tasks.semrel:import_str",
            import_help=semrel.IMPORT_HELP,
            import_options=semrel.IMPORT_OPTIONS,
            demo=semrel.DEMO,
            agreement="tasks.agreement_str:str_release",
            agreement_rows="tasks.agreement:str_rows",
        ),
    }


BUILTIN_IDS = ("tric-binary", "tric-ranking", "trac", "swissgov-rsd", "loci-similes", "str")


def builtin_tasks() -> list[Task]:
    """The built-in tasks: each spec joined to its family's Python."""
    python = _python()
    return [replace(task_from_declaration(builtin_spec(i)), **python[i]) for i in BUILTIN_IDS]
