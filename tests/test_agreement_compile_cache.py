"""Keeping the Bayesian agreement model's compiled programs (`tasks.agreement_bayes.keep_compiled`):
`palimpsest agreement --bayes` keeps them in the data directory's cache/jax by default, and the
refits of every seed of the same data run one program (the resumed start, its step size and mass
matrix, are the program's arguments, not constants of it), read back with the same draws.

Each check runs in a fresh process with a cache directory of its own (jax reads its cache setting
once a process; the test run's shared one, tests/conftest.py, is not passed on), so each compiles
a sampler of its own: about 30 s of CPU each on a 2-vCPU machine (docs/benchmarks.md, "The
Bayesian tests"), hence `slow`. Against the refit's step size and mass matrix given to NUTS as
constants (the code before), the first test fails: the other seed's refit compiled a program of
its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpyro", reason="numpyro is the optional [agreement] extra")

REPO = Path(__file__).resolve().parent.parent


def _env(**more) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["PYTHONPATH"] = str(REPO)
    return env | more


REFITS = r"""
import json, sys
from pathlib import Path
import numpy as np
import jax, jax.numpy as jnp
from numpyro.infer.util import initialize_model
from tasks.agreement_bayes import NotConverged, _model, cells, fit, keep_compiled, pair_outcomes
from tasks.agreement_measures import Table

cache = Path(sys.argv[1])
keep_compiled(str(cache))
# every program kept, however quick its compilation (jax keeps those of a second or more)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
rng = np.random.default_rng(2)
truth = rng.random(150) < 0.4
values = np.stack([np.where(rng.random(150) < 0.8, truth, ~truth) for _ in range(3)], 1)
table = Table(values.astype(float))
data = pair_outcomes(table)
agg = cells(data)
args = (jnp.asarray(agg["counts"]), jnp.asarray(agg["pair"]), len(data["pairs"]), {},
        jnp.asarray(agg["X"]), data["k"] ** 2)
z = initialize_model(jax.random.PRNGKey(0), _model, model_args=args)[0].z
size = sum(int(np.size(v)) for v in z.values())

def start(shift, step, scale):
    # a second attempt's start as fit's `resume` takes it (`_resume_from`): four chains'
    # positions, a diagonal inverse mass matrix and a step size, each seed's its own
    return {"positions": {k: jnp.stack([v + shift * c for c in range(4)]) for k, v in z.items()},
            "inverse_mass_matrix": {tuple(sorted(z)): jnp.full(size, scale)},
            "step_size": step}

def refit(seed, resume):
    held = len(list(cache.glob("*-cache")))
    try:
        d = fit(table, seed=seed, chains=4, warmup=40, samples=60, loo_report=False,
                retry_accept=None, target_accept=0.95, resume=resume)["diagnostics"]
    except NotConverged as e:
        d = e.diagnostics
    return {"compiled": len(list(cache.glob("*-cache"))) - held,
            "draws": [d[k] for k in ("max_rhat", "min_ess", "divergences", "mean_leapfrog_steps")]}

print(json.dumps([refit(1, start(0.01, 0.3, 1.0)), refit(2, start(-0.02, 0.2, 0.5)),
                  refit(1, start(0.01, 0.3, 1.0))]))
"""


@pytest.mark.slow
def test_the_refits_of_every_seed_run_one_program_read_back_with_the_same_draws(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", REFITS, str(tmp_path / "jax")],
        env=_env(),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    first, other, again = json.loads(run.stdout.strip().splitlines()[-1])
    assert first["compiled"] >= 1  # the resumed sampler's program, compiled and kept
    # another seed's refit from another start (positions, step size, mass matrix): no new program
    assert other["compiled"] == 0, other
    assert other["draws"] != first["draws"]  # ... and its own draws
    # the first refit again, its program read back from the cache: the same draws
    assert again["compiled"] == 0 and again["draws"] == first["draws"]


@pytest.mark.slow
def test_the_command_keeps_its_compiled_programs_in_the_data_directory(tmp_path):
    """`palimpsest agreement --bayes` on a small TRoTR checkout, in a fresh process with no jax
    cache set: the programs land in <home>/cache/jax, which the help names."""
    from click.testing import CliRunner

    from cli.main import main
    from tests.test_agreement_compare_cli import _trotr_release

    out = CliRunner().invoke(main, ["agreement", "--help"])
    assert "<home>/cache/jax" in " ".join(out.output.split())
    root = _trotr_release(tmp_path / "TRoTR", instances=60, books=3)
    home = tmp_path / "home"
    cmd = "from cli.main import main; main()"
    args = ["agreement", "tric-ranking", "--from", str(root), "--bayes", "--draws", "100"]
    run = subprocess.run(
        [sys.executable, "-c", cmd, *args, "--seed", "1", "--json"],
        env=_env(PALIMPSEST_HOME=str(home)),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    # converged (0) or refused (a message, exit 2): either way the sampler was compiled
    assert run.returncode in (0, 2), run.stderr[-3000:]
    kept = list((home / "cache" / "jax").glob("*-cache"))
    assert kept, sorted(p.name for p in home.rglob("*"))[:20]
