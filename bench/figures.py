"""Benchmark: a finished run's summary (its tables, figures and report) with a PDF beside each figure (reference: the
default) and PNG only (ours: `CONCEPTLAB_VECTOR_FIGURES=""`, the test suite's setting), interleaved in one process.

Trains and evaluates one run of `--preset` once, then re-summarizes it A B A B: each repetition removes the run's
`summary.json` and calls `run_experiment` again, which measures nothing (every checkpoint is evaluated) and writes the
summary, figures and report anew — what ends every run, and what `conceptlab resume` does on a finished one.

    .venv/bin/python bench/figures.py [--preset micro] [--reps 5] [--threads 1]
    .venv/bin/python bench/figures.py --quick --reps 1      # seconds; no claim
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import matplotlib
from rich.console import Console

matplotlib.use("Agg")

import benchlib
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.report.save import VECTOR_ENV

QUIET = Console(quiet=True)
QUICK = ["train.steps=4", "train.checkpoint_schedule=list", "train.checkpoint_steps=[4]", "eval.samples_per_class=2",
         "eval.interventions.samples=2", "eval.interventions.linear=null", "eval.interventions.patching=null"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_common_arguments(parser, "micro")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    benchlib.print_environment(args.threads)
    cfg = load_config(args.preset, [*(QUICK if args.quick else []), *args.overrides])
    given = os.environ.get(VECTOR_ENV)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run_experiment(cfg, run, progress=False, console=QUIET)

        def summary(vector: str | None):
            def again():
                if vector is None:
                    os.environ.pop(VECTOR_ENV, None)
                else:
                    os.environ[VECTOR_ENV] = vector
                (run / "summary.json").unlink()
                run_experiment(cfg, run, progress=False, console=QUIET)
            return again

        try:
            times = benchlib.interleaved({"reference": summary(None), "ours": summary("")}, args.reps,
                                         warmup=0 if args.quick else 1)
        finally:
            if given is None:
                os.environ.pop(VECTOR_ENV, None)
            else:
                os.environ[VECTOR_ENV] = given
        figures = len(list((run / "figures").glob("*.png")))
    print(f"preset {args.preset}: {figures} figures a summary; reference: PNG + PDF each (the default), ours: PNG only")
    print(f"reference  s/summary: {benchlib.fmt_spread(times['reference'], 's')}")
    print(f"ours       s/summary: {benchlib.fmt_spread(times['ours'], 's')}")
    print(benchlib.ratio_line("summary", times["reference"], times["ours"]))


if __name__ == "__main__":
    main()
