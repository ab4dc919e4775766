"""Write the bytecode of what the suite imports, once, before the tests (`.ci/run`).

The packages are installed without bytecode (`--no-compile`: compiling every module of every
package costs more than the suite imports). The suite's first processes (its workers, the first
served site, the first worker of the jobs) would then each compile the same modules at once;
here each module is compiled once, in two processes side by side (one argument each: `web` or
`models`), and the rest of the run reads the bytecode.
"""

from __future__ import annotations

import importlib
import sys

GROUPS = {
    # the app, the jobs, the command line, the scorer and what the tests drive them with
    "web": [
        "server.app",
        "server.jobs.worker",
        "server.jobs.board_jobs",
        "cli.main",
        "scorer",
        "scorer.sweep",
        "tasks.builtin",
        "hypothesis",
        "schemathesis",
        "selenium.webdriver",
        "aiosmtpd.controller",
        "boto3",
        "psutil",
        "pytest",
        "xdist",
    ],
    # the models and the Bayesian agreement model's sampler
    "models": [
        "torch",
        "sentence_transformers",
        "transformers",
        "jax",
        "numpyro",
        "numpyro.infer",
        "arviz",
        "sklearn.metrics",
        "pandas",
        "baselines.systems",
        "tasks.agreement_bayes",
    ],
}


def main() -> None:
    for name in GROUPS[sys.argv[1]]:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - an extra not installed: nothing to warm
            print(f"warm_bytecode: {name}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
