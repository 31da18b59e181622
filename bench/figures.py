"""Benchmark: a finished run's summary (its tables, figures and report) under two figure settings, interleaved in one
process. `--sides vector` (the default): a PDF beside each figure (reference: the default) against PNG only (ours:
`CONCEPTLAB_VECTOR_FIGURES=""`); `--sides none`: PNG only (reference) against no figures at all (ours:
`CONCEPTLAB_FIGURES=none`, the test suite's setting but where figures are the subject).

Trains and evaluates one run of `--preset` once, then re-summarizes it A B A B: each repetition removes the run's
`summary.json` and calls `run_experiment` again, which measures nothing (every checkpoint is evaluated) and writes the
summary, figures and report anew — what ends every run, and what `conceptlab resume` does on a finished one.

    .venv/bin/python bench/figures.py [--preset micro] [--reps 5] [--threads 1] [--sides vector|none]
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
from conceptlab.report.save import FIGURES_ENV, VECTOR_ENV

QUIET = Console(quiet=True)
QUICK = ["train.steps=4", "train.checkpoint_schedule=list", "train.checkpoint_steps=[4]", "eval.samples_per_class=2",
         "eval.interventions.samples=2", "eval.interventions.linear=null", "eval.interventions.patching=null"]


SIDES = {  # --sides: (what the reference writes, what ours writes, their environments)
    "vector": ("PNG + PDF each (the default)", "PNG only", {VECTOR_ENV: None}, {VECTOR_ENV: ""}),
    "none": ("PNG only", "no figures (CONCEPTLAB_FIGURES=none)", {VECTOR_ENV: ""},
             {VECTOR_ENV: "", FIGURES_ENV: "none"}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    benchlib.add_common_arguments(parser, "micro")
    parser.add_argument("--sides", choices=sorted(SIDES), default="vector", help="which two settings to compare")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    benchlib.print_environment(args.threads)
    cfg = load_config(args.preset, [*(QUICK if args.quick else []), *args.overrides])
    reference_text, ours_text, reference_env, ours_env = SIDES[args.sides]
    given = {name: os.environ.get(name) for name in (VECTOR_ENV, FIGURES_ENV)}

    def set_env(values: dict[str, str | None]) -> None:
        for name in given:
            value = values.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        try:
            set_env({})  # the run itself draws every figure
            run_experiment(cfg, run, progress=False, console=QUIET)
            figures = len(list((run / "figures").glob("*.png")))

            def summary(env: dict[str, str | None]):
                def again():
                    set_env(env)
                    (run / "summary.json").unlink()
                    run_experiment(cfg, run, progress=False, console=QUIET)
                return again

            times = benchlib.interleaved({"reference": summary(reference_env), "ours": summary(ours_env)}, args.reps,
                                         warmup=0 if args.quick else 1)
        finally:
            set_env(given)
    print(f"preset {args.preset}: {figures} figures a summary; reference: {reference_text}, ours: {ours_text}")
    print(f"reference  s/summary: {benchlib.fmt_spread(times['reference'], 's')}")
    print(f"ours       s/summary: {benchlib.fmt_spread(times['ours'], 's')}")
    print(benchlib.ratio_line("summary", times["reference"], times["ours"]))


if __name__ == "__main__":
    main()
