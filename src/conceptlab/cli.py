"""Command-line interface: `conceptlab run | resume | presets | show`.

Bad input (unknown preset or key, ill-typed value, impossible data split)
prints one line `error: ...` and exits with code 2 — never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from conceptlab.experiments.loading import ConfigError, config_to_yaml, load_config, preset_description, preset_names

app = typer.Typer(add_completion=False, no_args_is_help=True, help="conceptlab: how diffusion models learn concepts.")
console = Console()


def _fail(message: str) -> None:
    console.print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def _set_threads(threads: Optional[int]) -> None:
    if threads is not None:
        import torch

        if threads < 1:
            _fail(f"--threads must be ≥ 1, got {threads}")
        torch.set_num_threads(threads)


@app.command()
def run(
    source: str = typer.Argument(..., help="preset name (see `conceptlab presets`) or a YAML file"),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.steps=500"),
    runs_dir: Optional[Path] = typer.Option(None, help="parent folder of run folders (default: config runs_dir)"),
    resume: bool = typer.Option(False, "--resume", help="continue the newest unfinished run with this exact config"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the resolved config and exit"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Train and evaluate one run in a new numbered folder under runs/."""
    from conceptlab.experiments.runner import find_unfinished_run, new_run_dir

    try:
        cfg = load_config(source, list(overrides or []))
        if runs_dir is not None:
            cfg.runs_dir = str(runs_dir)
    except ConfigError as err:
        _fail(str(err))
    if dry_run:
        console.print(config_to_yaml(cfg), end="", highlight=False)
        return
    _set_threads(threads)
    run_dir = find_unfinished_run(Path(cfg.runs_dir), cfg) if resume else None
    if resume and run_dir is None:
        console.print("no unfinished run with this config: starting a new one")
    run_dir = run_dir or new_run_dir(Path(cfg.runs_dir), cfg.name)
    _execute(cfg, run_dir, progress)


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., help="a run folder to continue"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Continue an interrupted run from its last saved state (nothing is deleted)."""
    config = run_dir / "config.yaml"
    if not config.is_file():
        _fail(f"{run_dir} is not a run folder (no config.yaml)")
    try:
        cfg = load_config(str(config))
    except ConfigError as err:
        _fail(str(err))
    _set_threads(threads)
    _execute(cfg, run_dir, progress)


def _execute(cfg, run_dir: Path, progress: bool) -> None:
    from conceptlab.experiments.runner import run_experiment

    try:
        summary = run_experiment(cfg, run_dir, progress=progress, console=console)
    except (ConfigError, ValueError, FileNotFoundError) as err:
        _fail(str(err))
    _print_summary(summary, run_dir)


@app.command()
def presets() -> None:
    """List the built-in presets."""
    table = Table("preset", "description", box=None)
    for name in preset_names():
        table.add_row(name, preset_description(name))
    console.print(table)


@app.command()
def show(
    run_dir: Path = typer.Argument(..., help="a run folder"),
    as_json: bool = typer.Option(False, "--json", help="print the raw summary.json"),
) -> None:
    """Print a finished run's summary."""
    from conceptlab.experiments.runner import read_summary

    try:
        summary = read_summary(run_dir)
    except FileNotFoundError as err:
        _fail(str(err))
    if as_json:
        console.print_json(json.dumps(summary))
    else:
        _print_summary(summary, run_dir)


def _print_summary(summary: dict, run_dir: Path) -> None:
    console.print(f"\n[bold]{summary['name']}[/] ({run_dir})")
    signal = ", ".join(f"{k} {v:.2f}" for k, v in summary.get("concept_signal", {}).items())
    console.print(f"concept signal: {signal}")
    times = Table("split / concept", "learning time", box=None)
    for key, value in summary["learning_time"].items():
        times.add_row(key, "not learned" if value is None else str(value))
    console.print(times)
    acc = Table("class / concept", f"accuracy @ step {summary['final_step']}", box=None)
    for key, value in summary["final_accuracy"].items():
        acc.add_row(key, f"{value:.3f}")
    console.print(acc)
    if "seconds" in summary:
        s = summary["seconds"]
        console.print(f"seconds: train {s['train']}, probe {s['probe']}, evaluate {s['evaluate']}, total {s['total']}")
    console.print("figures: " + ", ".join(str(run_dir / f) for f in summary.get("figures", [])))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
