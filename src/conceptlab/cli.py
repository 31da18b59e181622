"""Command-line interface, in noun groups: `conceptlab run | resume | report`, `conceptlab sweep run|status|ls`,
`conceptlab runs ls|query|show|migrate`, `conceptlab preset ls|show`, `conceptlab percolation`, `--version`.

Where a command takes a run folder, `latest` names the newest run folder under `./runs`. The old spellings
(`presets`, `sweeps`, `show`, `sweep SPEC`, `sweep-status`, `sweep-report`, `emergence-report`, `controls-report`,
`runs ls ROOT`) keep working for one release and print one deprecation line on stderr naming the new one.

Bad input (unknown preset or key, ill-typed or non-finite value, impossible data split, a run that would not fit
in memory, an unreadable file, a query outside the store) prints one line `error: ...` naming the key or argument
and the value, and exits with code 2, before any work — never a traceback. A run that fails once started (training
diverged, a file system error) prints one line and exits with code 1.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from pathlib import Path

import numpy as np
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperGroup
from rich.markup import escape
from rich.table import Column, Table

from conceptlab.experiments.loading import ConfigError, config_to_yaml, load_config, preset_description, preset_names
from conceptlab.messages import one_line, shown

console = Console()


class _OneLineUsageErrors(TyperGroup):
    """The command group, with usage errors (an unknown option, a value that does not parse as its type, a missing
    argument) printed as one `error:` line with exit code 2, like every other refusal, instead of a usage panel."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            console.print("Aborted!", markup=False)
            sys.exit(1)
        except typer.TyperException as err:  # click's usage errors, vendored by typer
            if type(err).__name__ != "NoArgsIsHelpError":  # (no arguments at all: typer has printed the help)
                ctx = getattr(err, "ctx", None)
                message = err.format_message() if hasattr(err, "format_message") else str(err)
                where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
                console.print(f"[red]error:[/] {escape(one_line(message + where))}", highlight=False, soft_wrap=True)
            sys.exit(getattr(err, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(cls=_OneLineUsageErrors, no_args_is_help=True, rich_markup_mode="markdown",
                  help="conceptlab: how diffusion models learn concepts.")


def _print_version(value: bool) -> None:
    if value:
        from conceptlab import __version__

        console.print(f"conceptlab {__version__}", highlight=False, markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """conceptlab: how diffusion models learn concepts."""
    from conceptlab.report.save import figures_wanted, vector_formats

    try:  # a bad CONCEPTLAB_VECTOR_FIGURES or CONCEPTLAB_FIGURES refused before any work, not at a run's first figure
        vector_formats()
        figures_wanted()
    except ValueError as err:
        _fail(str(err))


MAX_THREADS = 1024  # torch starts a thread per unit: a larger count would only exhaust the system's threads
MAX_WORKERS = 1024  # local sweep worker processes


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[red]error:[/] {escape(one_line(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


def _check_threads(threads: Optional[int]) -> None:
    if threads is not None and not 1 <= threads <= MAX_THREADS:
        _fail(f"--threads must be between 1 and {MAX_THREADS}, got {threads}")


err_console = Console(stderr=True)


def _warn(warnings: list[str]) -> None:
    """Print each warning as one line on stderr (e.g. a damaged run the store left out)."""
    for line in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(one_line(line))}", highlight=False, soft_wrap=True)


def _deprecated(old: str, new: str) -> None:
    """One line on stderr: an old spelling still works for this release; say the new one."""
    err_console.print(f"[yellow]deprecated:[/] `conceptlab {escape(old)}` goes in the next release; use "
                      f"`conceptlab {escape(new)}`", highlight=False, soft_wrap=True)


LATEST = "latest"
RUNS_ROOT = Path("runs")


def _run_folder(target: Path) -> Path:
    """`latest` (when no such folder exists here) is the newest run folder under ./runs, by its config's time."""
    if str(target) != LATEST or target.exists():
        return target
    from conceptlab.store.index import find_run_dirs

    found = find_run_dirs(RUNS_ROOT) if RUNS_ROOT.is_dir() else []
    if not found:
        _fail(f"no run folders under {RUNS_ROOT}/ (`latest` names the newest run folder there)")
    return max(found, key=lambda d: ((d / "config.yaml").stat().st_mtime, d.name))


def _set_threads(threads: Optional[int]) -> None:
    _check_threads(threads)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


@app.command()
def run(
    source: str = typer.Argument(..., help="preset name (see `conceptlab preset ls`) or a YAML file"),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.steps=500"),
    runs_dir: Optional[Path] = typer.Option(None, help="parent folder of run folders (default: config runs_dir)"),
    resume: bool = typer.Option(False, "--resume", help="continue the newest unfinished run with this exact config"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the resolved config and exit"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: torch's choice)"),
    train_from: Optional[Path] = typer.Option(
        None, "--train-from", help="a finished run folder (`latest`: the newest) that trained this run's training "
        "(the same data, model, diffusion and train sections and training code): the new run evaluates its "
        "checkpoints instead of training, e.g. with other eval.* settings"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Train and evaluate one run in a new numbered folder under runs/ (with --train-from: evaluate another run's
    training under this config's evaluation settings)."""
    from conceptlab.experiments.resources import describe_limit
    from conceptlab.experiments.runner import check_runs_dir, find_unfinished_run, new_run_dir, prepare_run

    _check_threads(threads)
    if train_from is not None and resume:
        _fail("--resume continues an unfinished run; --train-from starts a new one from another run's training")
    donor = _run_folder(train_from) if train_from is not None else None
    try:
        cfg = load_config(source, list(overrides or []))
        if runs_dir is not None:
            cfg.runs_dir = str(runs_dir)
        check_runs_dir(Path(cfg.runs_dir), "--runs-dir" if runs_dir is not None else "runs_dir")
        _set_threads(threads)
        prepared = prepare_run(cfg)
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    if donor is not None:
        from conceptlab.experiments.training_reuse import donor_refusal

        why = donor_refusal(cfg, donor)
        if why is not None:
            _fail(f"--train-from {shown(str(donor))}: cannot lend this run its training: {why}")
    if dry_run:
        console.print(config_to_yaml(cfg), end="", highlight=False, markup=False)
        console.print(f"# memory: this run needs {prepared.memory.describe()}; it may use {describe_limit()}",
                      highlight=False, markup=False, soft_wrap=True)
        if donor is not None:
            console.print(f"# training: lent by {donor} (this run would evaluate its checkpoints)",
                          highlight=False, markup=False, soft_wrap=True)
        return
    run_dir = find_unfinished_run(Path(cfg.runs_dir), cfg) if resume else None
    if resume and run_dir is None:
        console.print("no unfinished run with this config: starting a new one")
    try:
        run_dir = run_dir or new_run_dir(Path(cfg.runs_dir), cfg.name)
    except OSError as err:
        _fail(f"cannot create a run folder under {cfg.runs_dir}: {err.strerror or err}", code=1)
    if donor is not None:
        from conceptlab.experiments.training_reuse import find_donor, seed_from

        try:
            seed_from(find_donor(cfg, [donor]), run_dir, cfg)
        except OSError as err:
            _fail(f"{run_dir}: cannot take the training of {donor}: {err.strerror or err}", code=1)
        console.print(f"training of {donor} reused: evaluating its checkpoints", highlight=False, markup=False)
    _execute(cfg, run_dir, progress, prepared)


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., help="a run folder to continue (`latest`: the newest under ./runs)"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Continue an interrupted run from its last saved state (nothing is deleted)."""
    from conceptlab.experiments.runner import prepare_run

    _check_threads(threads)
    run_dir = _run_folder(run_dir)
    config = run_dir / "config.yaml"
    if not config.is_file():
        _fail(f"{shown(str(run_dir))} is not a run folder (no config.yaml)")
    try:
        cfg = load_config(str(config))
        _set_threads(threads)
        prepared = prepare_run(cfg)
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    _execute(cfg, run_dir, progress, prepared)


def _execute(cfg, run_dir: Path, progress: bool, prepared=None) -> None:
    from conceptlab.experiments.runner import run_experiment
    from conceptlab.train.trainer import TrainingDiverged

    from conceptlab.store.run_folder import RunLockedError

    try:
        summary = run_experiment(cfg, run_dir, progress=progress, console=console, prepared=prepared)
    except (ConfigError, ValueError, FileNotFoundError, RunLockedError) as err:
        _fail(str(err))
    except TrainingDiverged as err:
        _fail(str(err), code=1)
    except OSError as err:  # a full disk, a refused symlink, a permission: the run stops, its folder keeps what it has
        _fail(f"{run_dir}: {err}", code=1)
    except KeyboardInterrupt:  # Ctrl-C: the run's folder keeps its last saved state (train state, finished evals)
        if (run_dir / "config.yaml").is_file():
            err_console.print(f"interrupted: {escape(str(run_dir))} keeps its last saved state; continue it with "
                              f"`conceptlab resume {escape(shlex.quote(str(run_dir)))}`", highlight=False,
                              soft_wrap=True)
        else:  # stopped before the run wrote its config: nothing to continue
            err_console.print(f"interrupted before {escape(str(run_dir))} held anything to continue", highlight=False,
                              soft_wrap=True)
        raise typer.Exit(code=130) from None
    _print_summary(summary, run_dir)


preset_app = typer.Typer(no_args_is_help=True, help="The built-in presets: list them, show one resolved.")
app.add_typer(preset_app, name="preset")


@preset_app.command("ls")
def preset_ls() -> None:
    """List the built-in presets with their descriptions."""
    table = Table("preset", "description", box=None)
    for name in preset_names():
        table.add_row(name, preset_description(name))
    console.print(table)


@preset_app.command("show")
def preset_show(
    name: str = typer.Argument(..., help="a preset name (see `conceptlab preset ls`) or a YAML file"),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.steps=500"),
) -> None:
    """Print a preset's description and its fully resolved config (every key, defaults included) as YAML."""
    try:
        cfg = load_config(name, list(overrides or []))
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    if name in preset_names():
        console.print(f"# {preset_description(name)}", highlight=False, markup=False, soft_wrap=True)
    console.print(config_to_yaml(cfg), end="", highlight=False, markup=False)


@app.command(hidden=True)
def presets() -> None:
    """Deprecated: `conceptlab preset ls`."""
    _deprecated("presets", "preset ls")
    preset_ls()


@app.command("show", hidden=True)
def show_deprecated(
    run_dir: Path = typer.Argument(..., help="a run folder"),
    as_json: bool = typer.Option(False, "--json", help="print the raw summary.json"),
) -> None:
    """Deprecated: `conceptlab runs show`."""
    _deprecated("show", "runs show")
    show(run_dir, as_json)


def show(run_dir: Path, as_json: bool = False) -> None:
    """Print a finished run's summary (`runs show`): it reads JSON only, so a finished run shows without torch."""
    from conceptlab.store.run_folder import RunFolder

    run_dir = _run_folder(run_dir)

    try:
        summary = RunFolder(run_dir).read_summary()
    except FileNotFoundError as err:
        if (run_dir / "config.yaml").is_file():  # a run folder, not finished: say how far it got
            from conceptlab.experiments.sweep_state import run_progress, run_state

            holder = RunFolder(run_dir).holder()  # the folder's lock: held exactly while a process runs it
            state, error = run_state(run_dir)
            state = f"running, {holder}" if holder else ("failed" if state == "failed" else "stopped")
            progress = run_progress(run_dir, live=holder is not None)
            hint = "" if holder else f"; resume it with conceptlab resume {shown(str(run_dir))}"
            _fail(f"{shown(str(run_dir))} is not finished ({state}{', ' + progress if progress else ''}"
                  f"{'; last error: ' + error if error else ''}): no summary to show yet{hint}")
        if run_dir.is_dir():  # no config.yaml: not a run folder at all
            where = shown(str(run_dir))
            _fail(f"{where} is a sweep folder, not a run: `conceptlab sweep status {where}` lists its runs"
                  if (run_dir / "manifest.json").is_file() else
                  f"{where} is not a run folder (no config.yaml): `conceptlab runs ls --root {where}` lists the "
                  "runs under it")
        _fail(str(err))
    except ValueError as err:
        _fail(str(err))
    except OSError as err:
        _fail(f"cannot read {shown(str(run_dir / 'summary.json'))}: {err.strerror or err}")
    if not isinstance(summary, dict):
        _fail(f"{shown(str(run_dir / 'summary.json'))} is not a run summary (a JSON object), "
              f"got {type(summary).__name__}")
    if as_json:
        console.print_json(json.dumps(summary))
        return
    with console.capture() as captured:  # printed only if all of it renders: a malformed summary is one error line
        try:
            _print_summary(summary, run_dir)
            failure = None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            failure = f"{type(err).__name__}: {err}" if not isinstance(err, KeyError) else f"it has no {err}"
    if failure is not None:
        _fail(f"{shown(str(run_dir / 'summary.json'))} is not a run summary this version can show ({failure})")
    console.file.write(captured.get())


_COMMON_KEYS = {"run", "name", "kind", "config_hash", "parameters", "device", "bf16", "precision", "threads", "seconds",
                "figures", "provenance", "disk_bytes", "invocations", "seconds_all_invocations"}


# the built-in data kinds whose study is the concept-space study or built on it (tests/unit/test_startup_imports.py
# checks this against the studies), so showing their runs imports no study and no torch
CONCEPT_SPACE_KINDS = frozenset({"shapes", "celeba"})


def _concept_space_kind(kind) -> bool:
    """Whether runs of `kind` have the concept-space study's summary (shapes, celeba, or a plug-in study built on
    it); a plug-in's study is imported to tell."""
    from conceptlab.plugins import is_import_path

    kind = str(kind)
    if not is_import_path(kind):  # a built-in kind, or one this version does not know (printed field by field)
        return kind in CONCEPT_SPACE_KINDS
    from conceptlab.studies import study_for
    from conceptlab.studies.concept_space import ConceptSpaceStudy

    try:
        return isinstance(study_for(kind), ConceptSpaceStudy)
    except ValueError:  # PluginError is one: a plug-in that does not import here prints field by field
        return False


def _print_summary(summary: dict, run_dir: Path) -> None:
    console.print(f"\n[bold]{escape(str(summary['name']))}[/] ({escape(str(run_dir))})")
    if not _concept_space_kind(summary.get("kind", "shapes")):
        _print_fields({k: v for k, v in summary.items() if k not in _COMMON_KEYS})
    else:
        _print_concept_space(summary)
    if "seconds" in summary:
        console.print("seconds: " + ", ".join(f"{k} {v}" for k, v in summary["seconds"].items()), markup=False)
    if "precision" in summary or "bf16" in summary:  # summaries before `precision` name the last invocation's
        from conceptlab.experiments.provenance import precision_name

        made = summary.get("precision") or precision_name(bool(summary.get("bf16")))
        threads = summary.get("threads", "?")
        threads = f"{threads} thread{'' if threads == 1 else 's'}"
        console.print(f"precision: {made} ({summary.get('device', '?')}, {threads})", markup=False)
    _print_code(summary.get("provenance"))
    if "disk_bytes" in summary:
        console.print(f"disk: {summary['disk_bytes'] / 1e6:.1f} MB in {run_dir}", markup=False)
    if summary.get("figures"):  # none drawn under CONCEPTLAB_FIGURES=none
        console.print("figures: " + ", ".join(str(run_dir / f) for f in summary["figures"]), markup=False)


def _print_code(made_by) -> None:
    """`code: <commit> (uncommitted changes); versions …; changed since recorded: …` of the summary's provenance (its
    last invocation's), when it has one."""
    if not isinstance(made_by, dict) or not (made_by.get("git_commit") or made_by.get("versions")):
        return
    line = f"code: {str(made_by.get('git_commit') or 'unknown')[:10]}"
    line += " (uncommitted changes)" if made_by.get("git_dirty") else ""
    if isinstance(made_by.get("versions"), dict):
        line += "; versions " + ", ".join(f"{k} {v}" for k, v in made_by["versions"].items())
    if isinstance(made_by.get("code_drift"), list) and made_by["code_drift"]:
        line += f"; code changed since those versions were recorded: {', '.join(map(str, made_by['code_drift']))}"
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _print_fields(fields: dict, prefix: str = "") -> None:
    """Summary fields of a bumps / shapes3d run, one `key: value` line per leaf (nested keys joined by dots)."""
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            _print_fields(value, name + ".")
        else:
            text = f"{value:.4g}" if isinstance(value, float) else json.dumps(value) if isinstance(value, list) else str(value)
            console.print(f"{name}: {text}", highlight=False, soft_wrap=True, markup=False)


def _print_concept_space(summary: dict) -> None:
    signal = ", ".join(f"{k} {v:.2f}" for k, v in summary.get("concept_signal", {}).items())
    console.print(f"concept signal: {signal}", markup=False)
    times = Table("split / concept", "learning time", box=None)
    for key, value in summary["learning_time"].items():
        times.add_row(escape(str(key)), "not learned" if value is None else escape(str(value)))
    console.print(times)
    acc = Table("class / concept", f"accuracy @ step {escape(str(summary['final_step']))}", box=None)
    for key, value in summary["final_accuracy"].items():
        acc.add_row(escape(str(key)), f"{value:.3f}")
    console.print(acc)
    if "emergence" in summary:
        _print_emergence(summary["emergence"])


def _step_text(step: float | None) -> str:
    return "never" if step is None else f"{step:.0f}"


def _print_emergence(emergence: dict) -> None:
    """Per target: emergence step and final score of each intervention, memorization and turn."""
    for target, entry in emergence["targets"].items():
        name = f" ({entry['name']})" if entry.get("name") else ""
        table = Table(f"target {escape(str(target))}{escape(name)}: intervention",
                      f"emergence step (score ≥ {escape(str(emergence['threshold']))})", "final score", box=None)
        for name, step in entry["emergence_step"].items():
            table.add_row(escape(str(name)), _step_text(step), f"{entry['final_score'][name]:.3f}")
        console.print(table)
        phase, turn = entry.get("memorization"), entry.get("turn") or {}
        if phase:
            as_name = f" ({phase['read_as_name']})" if phase.get("read_as_name") else ""
            console.print(f"  memorization: steps {phase['start']:g}–{phase['end']:g}, reads as {phase['read_as']}"
                          f"{as_name}", markup=False)
        if turn.get("step") is not None:
            way = "toward the target" if turn.get("toward_target") else "away from the target"
            console.print(f"  largest turn: step {turn['step']:g} ({turn['angle']:.0f}°, {way})")


@app.command("emergence-report", hidden=True)
def emergence_report_deprecated(
    root: Path = typer.Argument(..., help="a sweep folder or runs folder holding finished hidden-emergence runs"),
) -> None:
    """Deprecated: `conceptlab report`."""
    _deprecated("emergence-report", "report")
    emergence_report_cmd(root)


def emergence_report_cmd(root: Path) -> None:
    """Hidden emergence across seeds: emergence steps, capability vs behavior, memorization vs turn, one figure."""
    from conceptlab.experiments.emergence_report import emergence_report

    if not root.is_dir():
        _fail(f"{shown(str(root))} is not a folder (give a sweep or runs folder)")
    try:
        verdicts = emergence_report(root)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    except (KeyError, TypeError, IndexError) as err:  # a summary or table not shaped like a finished run's
        _fail(f"{shown(str(root))}: a run's summary or tables are not those of a finished hidden-emergence run "
              f"({type(err).__name__}: {err})")
    shared = verdicts.get("shared_seeds")
    if shared:
        differ = ", ".join(shared["differ_in"][:6]) or "no config key"
        console.print(f"[yellow]warning:[/] {verdicts['runs']} runs over {verdicts['seeds']} seeds: runs share seeds "
                      f"{', '.join(map(str, shared['seeds']))} (they differ in {differ}); every statistic below takes "
                      "one run as one replicate, so runs of one seed are counted as if independent — report each "
                      "setting's runs from a folder of their own")
    over = (f"{verdicts['seeds']} seeds" if not shared else f"{verdicts['runs']} runs ({verdicts['seeds']} seeds)")
    for target, v in verdicts["targets"].items():
        console.print(f"\n[bold]held-out {target}[/] over {over}")
        table = Table("intervention", "final score (mean ± sd)", box=None)
        for name, (mean, std) in v["final_score_mean_std"].items():
            table.add_row(name, f"{mean:.3f}" + ("" if std is None else f" ± {std:.3f}"))
        console.print(table)
        names = sorted({name for row in v["per_seed"] for name in row["emergence_step"]})
        seeds = Table("seed", *(["run"] if shared else []), *[name.replace("_", "-") for name in names], "memorized",
                      "turn", box=None, title="emergence step per " + ("run" if shared else "seed")
                      + ", memorization phase, largest turn", title_justify="left")
        for row in v["per_seed"]:
            mem = row["memorization"]
            seeds.add_row(str(row["seed"]), *([row["run"]] if shared else []),
                          *[_step_text(row["emergence_step"].get(name)) for name in names],
                          "—" if mem is None else f"{mem[0]:.0f}–{mem[1]:.0f}", _step_text(row["turn_step"]))
        console.print(seeds)
        console.print(f"  naive prompting emerged in {v['naive_emerged_in']} " + ("seeds" if not shared else
                      f"runs ({v['naive_emerged_in_seeds']} seeds)")
                      + f"; some intervention emerged in {v['intervention_emerged_in']}" + (" runs" if shared else ""))
        first = v["capability_first_where_naive_emerged"]
        console.print("  capability before behavior where naive emerged: "
                      + ("n/a (naive never emerged)" if first is None
                         else (f"yes, every {'seed' if not shared else 'run'}" if first else "no")))
        both = v["runs_with_memorization_and_turn"]
        console.print("  memorization before the largest turn: "
                      + (f"{v['memorization_precedes_turn_in']} of {both} runs with both" if both else
                         "untested (no run had both a memorization phase and a turn)"))
        _print_matched(v)
    console.print(f"tables: {root / 'emergence_seeds.parquet'}, {root / 'emergence_across_seeds.parquet'}")
    console.print(f"figure: {root / 'emergence_seeds.png'}")


def _bound_text(x: float) -> str:
    return "−∞" if x == float("-inf") else "∞" if x == float("inf") else f"{x:+.0f}"


def _range_text(low: float, high: float) -> str:
    """Where a value lies: one number, or [low, high] (ends ±∞ where censored)."""
    return f"{low:+.0f}" if low == high else f"in [{_bound_text(low)}, {_bound_text(high)}]"


def _gap_text(low: float, high: float) -> str:
    """A gap as a number, or as an interval where censored (≥ / ≤: a curve that never emerged is known only to emerge
    no earlier than its censoring step, `analysis.emergence_stats.EmergenceRule.censor_step` — after it where one
    checkpoint suffices)."""
    if low == high:
        return f"{low:+.0f}"
    if high == float("inf") and low != float("-inf"):
        return f"≥{low:+.0f}"
    if low == float("-inf") and high != float("inf"):
        return f"≤{high:+.0f}"
    return "?"


def _print_matched(v: dict) -> None:
    """Per intervention: the bias-matched gap across seeds (sign test, median bounds) and its null rate."""
    matched = v.get("matched")
    if not matched:
        console.print("  bias-matched gaps: none (runs made without naive repeats; eval.interventions.matched_naive)")
        return
    null = v.get("null") or {}
    table = Table("intervention (k)", "gap per seed (matched naive − it)", "earlier / later / untested",
                  "sign test p (1-sided)", "p vs resampled null", "median gap, its CI (coverage)",
                  "null: gap > 0 / sign p < α", box=None,
                  title="bias-matched: each intervention against the best of as many naive batches as it has variants",
                  title_justify="left")
    for name, g in matched.items():
        gaps = ", ".join(_gap_text(*r["gap"]) for r in v.get("per_seed_gaps", []) if r["intervention"] == name) or "—"
        rate = null.get("new_per_seed", {}).get(name)
        sig = null.get("new_sign_test", {}).get(name)
        p_null = null.get("p_resampled", {}).get(name)
        table.add_row(f"{name} ({g['k']})", gaps, f"{g['positive']} / {g['negative']} / {g['untested']}",
                      f"{g['p_one_sided']:.3f}", "—" if p_null is None else f"{p_null:.3f}", f"{_range_text(g['median_low'], g['median_high'])} "
                      f"CI [{_bound_text(g['ci_low'])}, {_bound_text(g['ci_high'])}] ({g['coverage']:.0%})",
                      "—" if rate is None else f"{rate:.2f} / {sig:.3f}")
    console.print(table)
    if "error" in null:
        console.print(f"  null rates: {null['error']}")
    elif null:
        console.print(f"  under the null ({null['replicates']} resamplings of the naive images of {null['runs']} runs): "
                      f"the old statistic claims capability first in {null['old_per_seed']:.0%} of seeds and "
                      f"'in every seed where naive emerged' in {null['old_all_seeds']:.0%} of replicates; the "
                      f"bias-matched sign test (p < {null['alpha']}) for some intervention in "
                      f"{null['new_sign_test_any']:.1%}")
    spreads = {x: g for x, g in matched.items() if "spread" in g}
    if spreads:
        def mad(x: list | None) -> str:
            if x is None:
                return "undefined"
            low, high = (f"{v:g}" if not math.isinf(v) else "∞" for v in x)
            return low if low == high else f"{low}–{high}"

        steadier = null.get("spread_steadier") or {}
        console.print("  the seeds' spread of each emergence step (median absolute deviation, over the steps the "
                      "seeds that never emerged may truly have; the findings suite's 'steadier than behavior' "
                      "compares the ranges' least favourable ends): " + "; ".join(
                          f"{x} {mad(g['spread'])} vs its matched baseline {mad(g['baseline_spread'])}"
                          + (f" (under the null: steadier in {steadier[x]:.1%})" if x in steadier else "")
                          for x, g in spreads.items()), highlight=False)


@app.command()
def percolation(
    sizes: str = typer.Option("8,16,32", help="canvas sizes N, comma-separated"),
    fractions: str = typer.Option(
        "0.002,0.003,0.005,0.007,0.01,0.015,0.02,0.03,0.05,0.07,0.1,0.15,0.2,0.3,0.5,0.7,1.0",
        help="keep probabilities λ, comma-separated",
    ),
    thresholds: str = typer.Option("0.005,0.05", help="overlap thresholds (the paper: 0.005 and 0.05)"),
    spacing: float = typer.Option(1.0, help="lattice spacing d (both axes)"),
    sigma: float = typer.Option(1.0, help="bump width σ (both axes)"),
    trials: int = typer.Option(20, help="Monte Carlo subsamples per (N, λ)"),
    periodic: bool = typer.Option(False, "--periodic", help="torus: links wrap around the canvas"),
    target: float = typer.Option(0.5, help="mass ratio that defines the critical dataset size"),
    out: Path = typer.Option(Path("runs/percolation"), help="folder for percolation.parquet, critical.parquet, figure"),
    seed: int = typer.Option(0),
) -> None:
    """Percolation model of manifold formation: largest-cluster mass ratio of a subsampled bump lattice vs dataset
    size, the critical dataset size per N and its scaling exponent (size* ∝ N^b)."""
    import pandas as pd

    from conceptlab.analysis.percolation import critical_dataset_size, percolation_curve
    from conceptlab.analysis.power_law import fit_power_law
    from conceptlab.experiments.runner import check_runs_dir
    from conceptlab.report.percolation_figures import plot_percolation
    from conceptlab.report.save import save_figure
    from conceptlab.store.files import write_parquet

    ns = _numbers(sizes, "--sizes", 0, None, "> 0")
    lams = _numbers(fractions, "--fractions", 0, 1, "in (0, 1]")
    levels = _numbers(thresholds, "--thresholds", 0, 1, "in (0, 1)", high_open=True)
    for name, value in (("--spacing", spacing), ("--sigma", sigma)):
        if not (math.isfinite(value) and value > 0):
            _fail(f"{name} must be a finite number > 0, got {value}")
    if not (math.isfinite(target) and 0 < target <= 1):
        _fail(f"--target must be in (0, 1], got {target}")
    if not 1 <= trials <= 100_000:
        _fail(f"--trials must be between 1 and 100000, got {trials}")
    if not 0 <= seed < 2**63:
        _fail(f"--seed must be between 0 and 2^63 − 1, got {shown(seed)}")
    try:
        check_runs_dir(out, "--out")
        _percolation_fits(ns, levels, spacing, sigma, trials)
    except ConfigError as err:
        _fail(str(err))
    try:
        curve = pd.concat([percolation_curve(ns, lams, (spacing, spacing), (sigma, sigma), t, trials, periodic, seed=seed)
                           for t in levels], ignore_index=True)
        critical = pd.concat([critical_dataset_size(curve[curve["threshold"] == t], target).assign(threshold=t)
                              for t in levels], ignore_index=True)
    except ValueError as err:
        _fail(str(err))
    table = Table("threshold", "N", "critical dataset size", "of M nodes", "λ_c", box=None)
    for r in critical.itertuples():
        m = int(curve[(curve["N"] == r.N)]["nodes"].iloc[0])
        lam = f"{r.critical_dataset_size / m:.3f}" if np.isfinite(r.critical_dataset_size) else "-"
        size = "never reached" if not np.isfinite(r.critical_dataset_size) else f"{r.critical_dataset_size:.1f}"
        size = f"≤ {size} (smallest λ already percolates)" if r.censored else size
        table.add_row(f"{r.threshold:g}", f"{r.N:g}", size, str(m), lam)
    console.print(table)
    for t in levels:
        part = critical[(critical["threshold"] == t) & np.isfinite(critical["critical_dataset_size"]) & ~critical["censored"]]
        if part["N"].nunique() >= 2:
            fit = fit_power_law(part["N"].astype(float), part["critical_dataset_size"].astype(float))
            console.print(f"threshold {t:g}: critical size ∝ N^{fit.exponent:.2f}")
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / "percolation.parquet", curve)
    write_parquet(out / "critical.parquet", critical)
    save_figure(plot_percolation(curve, critical, target), out / "percolation.png")
    console.print(f"tables and figure: {out}")


def _numbers(text: str, option: str, low: float, high: float | None, allowed: str, high_open: bool = False,
             most: int = 1000) -> list[float]:
    """The comma-separated numbers of `option`, each finite, > `low` and ≤ `high` (< with `high_open`); else one
    error line naming the option and the bad entry."""
    parts = text.split(",")
    if len(parts) > most:
        _fail(f"{option} takes at most {most} numbers, got {len(parts)}")
    out = []
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            _fail(f"{option} takes comma-separated numbers {allowed}, e.g. {option} 8,16,32; got {shown(part.strip())}")
        above = high is not None and (value >= high if high_open else value > high)
        if not math.isfinite(value) or value <= low or above:
            _fail(f"{option}: every number must be {allowed}, got {shown(part.strip())}")
        out.append(value)
    return out


def _percolation_fits(sizes: list[float], thresholds: list[float], spacing: float, sigma: float, trials: int) -> None:
    """ConfigError unless the largest lattice's nodes, links and trials fit in the memory available (a link per pair
    of bumps closer than the overlap threshold's radius), before any lattice is built."""
    from conceptlab.analysis.percolation import link_radius
    from conceptlab.experiments.resources import available_memory, gigabytes, process_memory

    nodes = max(math.ceil(n / spacing) ** 2 for n in sizes)
    radius = max(link_radius(t) for t in thresholds) * sigma / spacing  # in lattice steps
    links = nodes * math.pi * radius**2 / 2
    need = int(nodes * (64 + trials) + links * 48)
    room = available_memory().bytes - process_memory()
    if need > room:
        raise ConfigError(f"percolation needs about {gigabytes(need)} GB for {nodes:,} lattice nodes (--sizes "
                          f"{max(sizes):g}, --spacing {spacing:g}, --sigma {sigma:g}, --thresholds {min(thresholds):g}), "
                          f"over the {gigabytes(room)} GB available")


# ---------------------------------------------------------------- the findings suite

def _predict_paper_scale(p, console) -> float | None:
    """Predicted seconds of a paper-scale plan on this machine from the performance bench's predictor
    (bench/predict_run_time.py, measured now: one timed training step and the evaluation at 1–2 sampler steps per
    distinct run config of each run set, i.e. its sweep's runs up to their seeds, times the runs of that config);
    None when the bench is not in this checkout."""
    bench = Path(__file__).resolve().parents[2] / "bench"
    if not (bench / "predict_run_time.py").is_file():
        return None
    sys.path.insert(0, str(bench))
    try:
        predict = _paper_predictor(bench / "predict_run_time.py")
        total = 0.0
        for s in p.sets.values():
            if s.sweep is None:
                continue
            for base, overrides, settings, count in _distinct_run_configs(s.sweep):
                seconds = sum(predict(base, overrides, 1).values())
                total += seconds * count
                label = f" ({settings})" if settings else ""
                console.print(f"run set {s.name}{label}: {count} runs × {seconds / 3600:.1f} h", markup=False)
        return total
    finally:
        sys.path.remove(str(bench))


def _paper_predictor(path: Path):
    """`predict(preset, overrides, timed_steps)` of the bench's predictor at `path` (its terms in seconds)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("predict_run_time", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.predict


def _distinct_run_configs(sweep) -> list[tuple[str, list[str], str, int]]:
    """The run configs of an expanded sweep up to their seeds (`findings.config_shape`), each as (base, the
    overrides that give it: the spec's, the command line's, then its axis values, its axis values as text, how many
    runs have it), in manifest order."""
    import json

    from conceptlab.experiments.findings import config_shape
    from conceptlab.experiments.sweep import SEED_KEYS

    groups: dict[str, tuple[str, list[str], str, int]] = {}
    for r in sweep.runs:
        shape = config_shape(r.config.model_dump(mode="json"))
        if shape in groups:
            base, overrides, settings, count = groups[shape]
            groups[shape] = (base, overrides, settings, count + 1)
            continue
        values = {k: v for k, v in r.values.items() if k not in SEED_KEYS.values()}
        axes = [f"{k}={json.dumps(v)}" for k, v in values.items()]
        groups[shape] = (sweep.spec.base, [*sweep.spec.overrides, *sweep.overrides, *axes], " ".join(axes), 1)
    return list(groups.values())


def _print_unfinished(p) -> None:
    """Each started, unfinished run of the plan (a suite made over sessions): its set, seed, state and how far it got
    (`sweep_state.run_progress`); runs queued or never started are left out."""
    from conceptlab.experiments.sweep_state import run_progress, run_state

    for s in p.sets.values():
        if s.sweep is None:
            continue
        for r in s.sweep.runs:
            folder = r.directory(s.sweep.root)
            if not (folder / "config.yaml").is_file():
                continue
            state, _ = run_state(folder)
            if state not in ("done", "queued", "pending"):
                console.print(f"{s.name} seed {r.config.train.train_seed} ({r.run_id}): {state}, "
                              f"{run_progress(folder, live=state == 'running') or 'no progress recorded'}",
                              markup=False)


def _print_run_costs(p, record: Optional[Path], seeds: Optional[set[int]] = None, reuse: bool = True,
                     workers: Optional[int] = None, local: bool = True,
                     train_from: Optional[list[Path]] = None) -> None:
    """What the runs still to do will cost, from the finished runs of the same sets and configs up to the seeds (here,
    recorded in `record`, and the records committed in the repository, which time runs but are reused only when they
    are `record`): a measured time per run and the machines that measured it, never a guess for a set no run has
    finished, and the wall time on `workers` local workers. With `seeds` (`--seeds`), only those report seeds' runs
    are to run now; the rest are said to be left for later. A run that will evaluate a training another run lends
    (`train_from`, or a run of the plan) is priced without training."""
    from conceptlab.experiments.findings import run_costs, shipped_records, wall_seconds

    shipped = shipped_records()  # times only, unless it is the --record folder (then its runs are reused too)
    is_record = shipped is not None and record is not None and Path(record).resolve() == shipped.resolve()
    timing = None if is_record else shipped
    costs = run_costs(p, record, seeds, reuse, timing=timing, train_from=train_from)
    if timing is not None and any(c.pending and c.durations() for c in costs.values()):
        console.print(f"(run times from the records committed in {timing}; they are not reused without --record "
                      f"{timing})", markup=False)
    for name, c in costs.items():
        later = f" ({c.deferred} more of other report seeds left for later)" if c.deferred else ""
        if c.pending:
            console.print(f"{name}: {c.pending} to run{later}; {c.describe()}", markup=False)
        elif later:
            console.print(f"{name}: none to run now{later}", markup=False)
    durations = [d for c in costs.values() if c.pending for d in c.durations()]
    if durations:
        untimed = sum(c.pending - len(c.durations()) for c in costs.values())
        pool = workers or os.cpu_count() or 1
        waves = [[d for c in costs.values() if c.pending for d in c.durations(wave)] for wave in (1, 2)]
        wall = (f": about {sum(wall_seconds(w, pool) for w in waves) / 3600:.1f} h of wall time on {pool} worker"
                f"{'s' if pool != 1 else ''} (one run each at a time, on a machine like those that timed them)"
                if local else " (the cluster's parallelism sets the wall time)")
        console.print(f"at the measured times, {len(durations)} of the runs to go take {sum(durations) / 3600:.1f} "
                      f"run-hours{wall}" + (f"; {untimed} more have no finished run to time" if untimed else ""),
                      markup=False)


@app.command()
def findings(
    names: Optional[list[str]] = typer.Argument(None, help="findings to run (default: every one; see --list)"),
    quick: bool = typer.Option(False, "--quick", help="CI-size presets, one report seed per finding (a smoke run)"),
    scale: str = typer.Option("full", help="quick | full | paper (paper: the paper-scale presets, for a GPU or a "
                              "cluster)"),
    root: Optional[Path] = typer.Option(None, help="output folder (default: findings, findings/quick or "
                                        "findings/paper)"),
    suite: Optional[Path] = typer.Option(None, help="a suite YAML of your own (default: the shipped one)"),
    setup: Optional[str] = typer.Option(None, help="only the findings of this setup: fast (our fast variant, "
                                        "minutes a run) or paper (the paper's training setup, hours a run on a "
                                        "CPU); default: every finding"),
    executor: str = typer.Option("local", help="local | slurm"),
    workers: Optional[int] = typer.Option(None, help="local: worker processes (default: CPU cores)"),
    threads: Optional[int] = typer.Option(None, help="torch threads per run (default: cores // workers)"),
    reuse: bool = typer.Option(True, help="reuse finished runs whose config and code versions match (--no-reuse: "
                               "every run fresh, in a new folder)"),
    yes: bool = typer.Option(False, "--yes", help="run a paper-scale suite on a CPU after its predicted wall time"),
    markdown: Optional[Path] = typer.Option(None, help="also write the Markdown here, figures beside it in "
                                            "figures/<its name>/ (e.g. docs/findings.md: docs/figures/findings/)"),
    readme: Optional[Path] = typer.Option(None, help="also rewrite this README's generated findings table (between "
                                          "its two markers) from the evaluation, e.g. README.md"),
    adopt: Optional[list[Path]] = typer.Option(None, "--adopt", help="a folder holding finished runs made outside "
                                               "the suite (e.g. by conceptlab sweep run): each planned run not "
                                               "finished here takes a copy of the run with its run id; repeatable"),
    train_from: Optional[list[Path]] = typer.Option(
        None, "--train-from", help="a folder of runs whose finished training a planned run reuses when it is the "
        "same training (same data, model, diffusion and train sections and training code; e.g. a rerun that changes "
        "only the evaluation): that run is only evaluated; repeatable (--no-reuse: none)"),
    list_: bool = typer.Option(False, "--list", help="list the suite's findings and exit"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the run sets and their run counts and exit"),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="run only these report seeds (comma-separated; the "
                                        "others are left for a later invocation or another machine): every "
                                        "finding is still evaluated on all its report seeds"),
    evaluate_only: bool = typer.Option(False, "--evaluate-only", help="run nothing: evaluate the runs already "
                                       "finished (report seeds without one: 'no run', verdicts 'incomplete' "
                                       "where they could still change)"),
    record: Optional[Path] = typer.Option(None, "--record", help="keep a record of every finished run, as "
                                          "it finishes (its summary, config and tables, no weights) under this "
                                          "folder, e.g. "
                                          "results, and run only the runs not recorded there yet (gathers a suite "
                                          "over sessions and machines; --evaluate-only --root reads it)"),
    progress: bool = typer.Option(True, help="show progress bars"),
) -> None:
    """Regenerate every finding with its controls: run the suite's run sets (resumable; a run is reused only when
    its config and the code's analysis versions match), evaluate each pass criterion over the report seeds and
    write `findings.md`, `report.html` and `findings.json` (verdict per finding, per-seed values beside the binding
    control, the command, machine, precision and time). `--evaluate-only` reads a suite that is still running or
    was run piecewise (e.g. hours-long paper-setup runs over several sessions) without starting anything."""
    import time as _time

    from conceptlab.experiments.executors import ExecutorError, ExecutorOptions, make_executor
    from conceptlab.experiments.findings import evaluate_suite, plan, run_plan, write_findings
    from conceptlab.experiments.findings_spec import load_suite

    if quick:
        if scale not in ("full", "quick"):
            _fail("--quick and --scale paper contradict each other")
        scale = "quick"
    if scale not in ("quick", "full", "paper"):
        _fail(f"--scale must be quick, full or paper, got {shown(scale)}")
    if executor not in ("local", "slurm"):
        _fail(f"unknown executor {shown(executor)}; choose local or slurm")
    for label, value in (("--workers", workers), ("--threads", threads)):
        if value is not None and not 1 <= value <= MAX_WORKERS:
            _fail(f"{label} must be between 1 and {MAX_WORKERS}, got {value}")
    try:
        spec = load_suite(None if suite is None else str(suite))
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    if setup is not None:
        if setup not in ("fast", "paper"):
            _fail(f"--setup must be fast or paper, got {shown(setup)}")
        by_name = {f.name: f for f in spec.findings}
        other = [n for n in names or [] if n in by_name and by_name[n].setup != setup]
        if other:
            _fail(f"--setup {setup}: {', '.join(other)} is not a {setup}-setup finding (drop it or --setup)")
        if not names:  # named findings are all of this setup now (an unknown name meets plan's clear error)
            names = [f.name for f in spec.findings if f.setup == setup]
            if not names:
                _fail(f"--setup {setup}: the suite has no {setup}-setup finding")
    if list_:
        from conceptlab.report.findings import control_label

        table = Table("finding", "paper", "setup", "binding control", box=None)
        table.columns[0].no_wrap = True  # the name is what one types: never cut
        for f in spec.findings:
            if names and f.name not in names:
                continue
            table.add_row(f.name, f.paper, f.setup or f.status, control_label(f.model_dump()))
        console.print(table)
        return
    out = root or Path("findings" if scale == "full" else f"findings/{scale}")
    runs_folder = "runs" if reuse else "runs-" + _time.strftime("%Y%m%d-%H%M%S")
    try:
        from conceptlab.experiments.runner import check_runs_dir

        check_runs_dir(out, "--root")
        p = plan(spec, list(names or []), scale, out, runs_folder, write=not dry_run)
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    chosen_seeds: set[int] | None = None
    if seeds is not None:
        from conceptlab.experiments.findings import check_seeds

        try:
            chosen_seeds = {int(x) for x in seeds.split(",") if x.strip()}
        except ValueError:
            chosen_seeds = set()
        if not chosen_seeds:
            _fail(f"--seeds must be report seeds separated by commas, got {shown(seeds)}")
        try:
            check_seeds(p, chosen_seeds)
        except ConfigError as err:
            _fail(str(err))
        if evaluate_only:
            _fail("--seeds chooses what to run; --evaluate-only runs nothing")
        if not reuse:
            _fail("--seeds leaves the other seeds to a later invocation in the same root, but --no-reuse starts a "
                  "new run folder each time, where they would never be found: use one or the other")
    if adopt and not reuse:
        _fail("--adopt fills this root's run folders with finished runs, but --no-reuse runs every run fresh in a new "
              "folder: use one or the other")
    if train_from and (not reuse or evaluate_only):
        _fail("--train-from lends finished training to runs about to run; --no-reuse trains every run and "
              "--evaluate-only runs nothing: use one or the other")
    for folder in train_from or []:
        if not folder.is_dir():
            _fail(f"--train-from {shown(str(folder))}: no such folder")
    if readme is not None:  # before anything runs: a README without the table's markers is a usage error
        from conceptlab.report.readme import ReadmeError, table_in

        try:
            table_in(readme.read_text())
        except (OSError, ReadmeError) as err:
            _fail(f"--readme {readme}: {one_line(str(getattr(err, 'strerror', None) or err))}")
    if record is not None and record.resolve() == out.resolve():
        _fail(f"--record {record} is the findings root itself; name another folder (e.g. results)")
    if evaluate_only and not reuse:
        _fail("--evaluate-only reads finished runs: it cannot be combined with --no-reuse")
    table = Table(Column("run set", no_wrap=True, min_width=max((len(n) for n in p.sets), default=7)), "runs",
                  "seeds", box=None)
    for s in p.sets.values():
        table.add_row(s.name, "analytic" if s.sweep is None else str(len(s.sweep.runs)),
                      ", ".join(map(str, s.seeds)))
    console.print(table)
    console.print(f"each run set's folder: {out / runs_folder}/<run set>", markup=False, soft_wrap=True)
    for name, why in p.skipped.items():
        console.print(f"not run: {name} ({why})", markup=False)
    if not evaluate_only:  # --no-reuse runs everything in a new folder: records time it but do not shorten it
        _print_run_costs(p, record, chosen_seeds, reuse, workers, local=executor == "local",
                         train_from=list(train_from or []))
    if dry_run:
        return
    if adopt and reuse:  # runs made elsewhere under the same run ids (config and analysis versions)
        from conceptlab.experiments.findings import adopt_runs

        try:
            adopted = adopt_runs(p, adopt)
        except ConfigError as err:
            _fail(str(err))
        for source, n in adopted.items():
            console.print(f"{n} runs adopted from {source} (their run ids match planned runs not finished here)",
                          markup=False)
    if record is not None and reuse:  # --no-reuse asks for every run fresh: records are kept, not read
        from conceptlab.experiments.findings import restore_records

        restored = restore_records(p, record)
        if restored:
            console.print(f"{restored} runs not finished here are recorded in {record}/runs: their records are "
                          "read instead of running them again", markup=False)
    if evaluate_only:
        from conceptlab.experiments.findings import finished_counts

        result = finished_counts(p)
        _print_unfinished(p)
    elif scale == "paper" and not yes:
        import torch

        if not torch.cuda.is_available() and executor == "local":
            console.print("--scale paper on a CPU: predicting its wall time from the performance bench "
                          "(a few timed steps per run set)…", markup=False)
            seconds = _predict_paper_scale(p, console)
            if seconds is None:
                console.print("no bench/predict_run_time.py in this checkout: the wall time is not predicted",
                              markup=False)
            else:
                console.print(f"predicted wall time on this CPU: {seconds / 3600:.1f} h (one run at a time)",
                              markup=False)
            console.print("rerun with --yes to run it here", markup=False)
            raise typer.Exit(code=0)
    began = _time.perf_counter()
    if not evaluate_only:
        options = ExecutorOptions(kind=executor, workers=workers, threads=threads)
        try:
            runner_ = make_executor(executor, out, options, workers=workers)
        except ExecutorError as err:
            _fail(str(err))
        try:  # with --record each run is recorded as it finishes, whatever happens after
            result = run_plan(p, runner_, progress=progress, console=console, seeds=chosen_seeds, record=record,
                              reuse_training=reuse, train_from=list(train_from or []))
        except ExecutorError as err:
            _fail(str(err))
    kept = None
    if record is not None:  # twins and analytic sets too, before an evaluation that could fail
        from conceptlab.experiments.findings import record_plan

        try:
            kept = record_plan(p, record)
        except (ConfigError, OSError) as err:
            _fail(f"cannot record the runs in {record}: {one_line(str(err))}", code=1)
        now = result.get("recorded", 0)  # recorded by run_plan as they finished: record_plan found them there
        kept = {**kept, "recorded": kept["recorded"] + now, "already": kept["already"] - now}
    evaluated = evaluate_suite(p)
    for line in evaluated.get("unreadable", []):
        console.print(f"warning: {line}", markup=False, soft_wrap=True)
    evaluated["runs"] = {"total": result["runs"], "reused": result["skipped"], "done": result["done"],
                         **({"not_finished": result["not_finished"]} if evaluate_only else {}),
                         **({"deferred": result["deferred"]} if result.get("deferred") else {}),
                         **({"copied": result["copied"]} if result.get("copied") else {}),
                         **({"trained_elsewhere": result["trained_elsewhere"]} if result.get("trained_elsewhere")
                            else {})}
    wall = _time.perf_counter() - began
    from conceptlab.report.readme import ReadmeError

    try:
        write_findings(evaluated, out, wall, markdown, readme)
    except ReadmeError as err:
        _fail(f"{readme}: {err}")
    except OSError as err:
        _fail(f"cannot write the report: {one_line(str(err))}", code=1)
    verdicts = Table("finding", "setup", "verdict", "seeds passing", "run time", box=None)
    from conceptlab.report.findings import VERDICT_MARK, hms, passing

    for f in evaluated["findings"]:
        verdicts.add_row(f["name"], f.get("setup") or "—", VERDICT_MARK[f["verdict"]], passing(f),
                         hms(f.get("run_seconds")))
    console.print(verdicts)
    if evaluate_only:
        console.print(f"{result['runs']} runs: {result['skipped']} finished and read, {result['not_finished']} not "
                      f"finished (nothing run: --evaluate-only)", markup=False)
    else:
        later = f", {result['deferred']} left for later (--seeds)" if result.get("deferred") else ""
        shared = (f", {result['copied']} copied from a finished twin in another run set (same run id)"
                  if result.get("copied") else "")
        queued = (f", {result['queued']} queued or waiting for a twin (a later invocation reads them)"
                  if result.get("queued") else "")
        busy = f", {result['busy']} left to the process already running them" if result.get("busy") else ""
        elsewhere = (f" ({result['trained_elsewhere']} of them evaluating another run's training)"
                     if result.get("trained_elsewhere") else "")
        console.print(f"{result['runs']} runs: {result['skipped']} reused, {result['done']} done now{elsewhere}"
                      f"{shared}, "
                      f"{len(result['failed'])} failed{queued}{busy}{later}; wall time {wall / 60:.1f} min",
                      markup=False)
    console.print(f"report: {out / 'report.html'}; {out / 'findings.md'}", markup=False)
    if kept is not None:
        first = (" (the first record of a run id is kept: a fresh run of a recorded id is not "
                 "recorded over it)" if not reuse and kept["already"] else "")
        live = f" ({result['recorded']} as they finished)" if result.get("recorded") else ""
        drift = (f", {kept['code_drift']} made while code they depend on differed from its recorded version (not "
                 "recorded: record or bump the versions with scripts/code_versions.py, then run them again with "
                 "--no-reuse)" if kept.get("code_drift") else "")
        console.print(f"records in {record}/runs: {kept['recorded']} runs recorded now{live}, {kept['already']} "
                      f"recorded earlier{first}, {kept['not_finished']} not finished (not recorded){drift}",
                      markup=False)
    if result["failed"]:
        for run_id, error in result["failed"].items():
            console.print(f"failed {run_id}: {one_line(str(error))}", markup=False, soft_wrap=True)
        raise typer.Exit(code=1)


@app.command("findings-compare")
def findings_compare(
    root_a: Path = typer.Argument(..., help="a findings root (or its findings.json), e.g. results"),
    root_b: Path = typer.Argument(..., help="the other, e.g. a fresh rerun's --root"),
    runs: bool = typer.Option(True, help="also compare the runs both roots hold under one run id: every summary "
                              "field and every run-level table (--no-runs: the evaluations alone)"),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="also leave out these summary fields or "
                                               "table columns (fnmatch on the dotted path, e.g. 'probe.*'; "
                                               "repeatable); timings, provenance, bytes on disk, invocations and "
                                               "a classifier's source are always left out"),
    rtol: float = typer.Option(0.0, help="numbers within atol + rtol·|b| count as the same (default: exactly equal)"),
    atol: float = typer.Option(0.0, help="see --rtol"),
    details: int = typer.Option(5, help="differing summary fields shown per run"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the whole comparison here"),
    check: bool = typer.Option(False, "--check", help="exit 1 when anything both hold differs (a verdict, a count, a "
                               "seed's value or the run ids it was read from, a run's field or table)"),
) -> None:
    """Compare two evaluations of the findings suite — the run records against a fresh rerun, or two machines' runs:
    each finding's verdict and per-criterion counts, each report seed's value, control and pass, and (with --runs)
    the runs both made, field by field and table by table. Each root must have been evaluated (its findings.json)."""
    from conceptlab.experiments.findings_compare import (
        IGNORED, CompareError, Tolerance, as_json, compare_evaluations, compare_runs, evaluation_ids, load_evaluation,
    )
    from conceptlab.report.findings import hms

    if details < 0:
        _fail(f"--details must be ≥ 0, got {details}")
    try:
        tol = Tolerance(rtol, atol)
        a, b = load_evaluation(root_a), load_evaluation(root_b)
    except (CompareError, ValueError, OSError) as err:
        _fail(one_line(str(err)))
    for label, root, ev in (("a", root_a, a), ("b", root_b, b)):
        code = (ev.get("code") or {}).get("git_commit") or "?"
        machine = (ev.get("machine") or {}).get("cpu") or "?"
        console.print(f"{label}: {root} — evaluated {ev.get('created', '?')} at {code[:10]} on {machine}; "
                      f"{(ev.get('runs') or {}).get('total', '?')} runs", markup=False, soft_wrap=True)
    pairs = compare_evaluations(a, b, tol)
    headers = ["finding", "verdict a → b", "seeds passing a → b", "seeds equal", "run time a / b"]
    rows = []
    for f in pairs:
        if f.only_in:
            rows.append([f.name, f"only in {f.only_in}", "", "", ""])
            continue
        verdict = f.verdict[0] if f.verdict[0] == f.verdict[1] else f"{f.verdict[0]} → {f.verdict[1]}"
        counts_a = ", ".join(c.passed[0] or "—" for c in f.criteria)
        counts_b = ", ".join(c.passed[1] or "—" for c in f.criteria)
        seeds = [s for c in f.criteria for s in c.seeds]
        rows.append([("" if f.same else "≠ ") + f.name, str(verdict),
                     counts_a if counts_a == counts_b else f"{counts_a} → {counts_b}",
                     f"{sum(s.same for s in seeds)}/{len(seeds)}",
                     f"{hms(f.run_seconds[0])} / {hms(f.run_seconds[1])}"])
    import pandas as pd

    _print_frame(pd.DataFrame(rows, columns=headers))
    both = [f for f in pairs if not f.only_in]
    seeds = [s for f in both for c in f.criteria for s in c.seeds]
    console.print(f"{len(both)} findings in both: {sum(f.verdict[0] == f.verdict[1] for f in both)} with the same "
                  f"verdict, {sum(f.same for f in both)} the same in every count and seed; {sum(s.same for s in seeds)} "
                  f"of {len(seeds)} criterion-seeds equal, {sum(not s.same_runs for s in seeds)} read from different "
                  "run ids (another config or analysis version)", markup=False, soft_wrap=True)
    for f in both:
        for c in f.criteria:
            for s in c.seeds:
                if not s.same:
                    va, vb = (tuple(x.get(k) for k in ("value", "control", "passed")) for x in (s.a, s.b))
                    console.print(f"  {f.name} / {c.name} seed {s.seed}: value, control, passed {va} → {vb}",
                                  markup=False, soft_wrap=True)
    run_pairs, only = None, None
    patterns = IGNORED + tuple(ignore or ())
    if runs:
        run_pairs, only = compare_runs(root_a, root_b, patterns, tol, ids=evaluation_ids(a) | evaluation_ids(b))
        same = sum(r.same for r in run_pairs)
        console.print(f"{len(run_pairs)} runs in both under one run id: {same} identical in every summary field and "
                      f"table, {len(run_pairs) - same} differ (left out: {', '.join(patterns)}); only in a: "
                      f"{len(only['a'])}, only in b: {len(only['b'])}", markup=False, soft_wrap=True)
        for r in run_pairs:
            if r.same:
                continue
            shown_fields = "; ".join(f"{p} {va!r} → {vb!r}" for p, va, vb in r.differing[:details])
            more = f" (+{len(r.differing) - details} more)" if len(r.differing) > details else ""
            tables = "; ".join(f"{t}: {w}" for t, w in r.differing_tables.items())
            console.print(f"  {r.run_set}/{r.run_id}: {len(r.differing)} of {r.fields} fields differ"
                          + (f" — {shown_fields}{more}" if shown_fields else "")
                          + (f"; tables: {tables}" if tables else ""), markup=False, soft_wrap=True)
    if json_out is not None:
        try:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(as_json(pairs, run_pairs, only), indent=1) + "\n")
        except OSError as err:
            _fail(f"cannot write {json_out}: {one_line(str(err))}", code=1)
    differs = (any(not f.same for f in both) or any(not s.same_runs for s in seeds)
               or any(not r.same for r in run_pairs or []))
    if check and differs:
        raise typer.Exit(code=1)


# ---------------------------------------------------------------- sweeps and the results store

runs_app = typer.Typer(no_args_is_help=True, help="The runs under a root: list, query (SQL), show one, migrate.")
app.add_typer(runs_app, name="runs")


class _SweepGroup(TyperGroup):
    """`conceptlab sweep`: its subcommands, and for one release the old `conceptlab sweep SPEC` (no subcommand),
    read as `sweep run SPEC` with a deprecation line."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            _deprecated(f"sweep {args[0]}", f"sweep run {args[0]}")
            return "run", self.commands["run"], args
        return super().resolve_command(ctx, args)


sweep_app = typer.Typer(cls=_SweepGroup, no_args_is_help=True,
                        help="Sweeps: run one (resumable), see its runs' states, list the shipped specs.")
app.add_typer(sweep_app, name="sweep")


@sweep_app.command("run")
def sweep(
    spec: str = typer.Argument(..., help="sweep spec: a shipped sweep name (see `conceptlab sweep ls`), a YAML file or a sweep folder"),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides applied to every run; the sweep "
                                                    "folder records them, and a rerun from it applies them again"),
    executor: Optional[str] = typer.Option(None, help="local | slurm (default: the spec's executor.kind)"),
    workers: Optional[int] = typer.Option(None, help="local: worker processes (default: spec, else CPU cores)"),
    root: Optional[Path] = typer.Option(None, help="sweep folder (default: spec root, else RUNS_DIR/SWEEP_NAME)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the manifest (run ids, axis values, and whether "
                                 "each run trains, is complete, or is borrowed: evaluates another run's training) "
                                 "and exit"),
    wait: bool = typer.Option(True, help="slurm: wait for the job array to finish"),
    slurm: Optional[list[str]] = typer.Option(
        None, "--slurm", help="slurm option key=value overriding the spec (partition, time_min, gpus_per_task, "
        "cpus_per_task, mem_gb, array_parallelism, max_requeue, account, qos); repeatable"
    ),
    progress: bool = typer.Option(True, help="show progress bars"),
    train_from: Optional[list[Path]] = typer.Option(
        None, "--train-from", help="a folder of runs (a sweep root, a findings root) whose finished training a run "
        "of this sweep reuses when it is the same training (data, model, diffusion and train sections, and the same "
        "training code): that run is only evaluated; repeatable"),
    reuse_training: bool = typer.Option(True, help="runs that share a training train it once (the sweep's own and "
                                        "--train-from's); --no-reuse-training trains every run itself"),
) -> None:
    """Run a sweep: expand the spec into runs with stable ids, skip complete runs, run the rest; then write the
    sweep's report.html (`conceptlab report SWEEP` adds the tables across its runs; a run whose summary does not
    read is a row saying so, and the exit status is the runs'). Runs that differ only in their
    evaluation train once: the others evaluate that training's checkpoints (their training.json says where from).
    Rerun from its folder, a sweep gets the base and overrides it was run with; other overrides are refused there."""
    from conceptlab.experiments.executors import ExecutorError, make_executor, with_slurm_options
    from conceptlab.experiments.runner import check_cache, check_runs_dir
    from conceptlab.experiments.sweep import check_root, check_sweep_memory, expand, run_sweep

    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        _fail(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}")
    if train_from and not reuse_training:
        _fail("--train-from names runs to reuse the training of; --no-reuse-training reuses none")
    for folder in train_from or []:
        if not folder.is_dir():
            _fail(f"--train-from {shown(str(folder))}: no such folder")
    try:
        plan = expand(spec, list(overrides or []), root)
        executor_options = with_slurm_options(plan.spec.executor, list(slurm or []))
        check_runs_dir(plan.root, "--root" if root is not None else "the sweep root")  # writes nothing
        check_root(plan)  # a run folder, another sweep's folder, or this one's under other overrides: refused
        check_sweep_memory(plan)
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    kind = executor or plan.spec.executor.kind
    if kind not in ("local", "slurm"):
        _fail(f"unknown executor {shown(kind)}; choose local or slurm")
    if slurm and kind != "slurm":
        _fail(f"--slurm options set the slurm executor's job; this sweep runs on the {kind} executor (add "
              "--executor slurm, or leave --slurm out)")
    if kind == "local":  # the local pool trains a shared probe in this process before its workers start: check first
        todo = {r.config.data.kind: r.config for r in plan.runs
                if not (r.directory(plan.root) / "summary.json").is_file()}
        try:
            for run_config in todo.values():  # one run still to do of each data kind
                check_cache(run_config)
        except ConfigError as err:
            _fail(str(err))
    if dry_run:
        import pandas as pd

        from conceptlab.experiments.sweep import training_roles

        roles = training_roles(plan, list(train_from or []), reuse_training)
        _print_frame(pd.DataFrame([{"run_id": r.run_id, **r.values, "training": roles[r.run_id]}
                                   for r in plan.runs]))
        console.print(f"{len(plan.runs)} runs → {plan.root}", markup=False)
        return
    try:
        runner_ = make_executor(kind, plan.root, executor_options, workers=workers, wait=wait)
    except ExecutorError as err:
        _fail(str(err))
    console.print(f"[bold]sweep {escape(plan.spec.name)}[/]: {len(plan.runs)} runs → {escape(str(plan.root))} "
                  f"({kind} executor)")
    try:
        result = run_sweep(plan, runner_, progress=progress, console=console, train_from=list(train_from or []),
                           reuse_training=reuse_training)
    except (ExecutorError, ConfigError) as err:
        _fail(str(err))
    except KeyboardInterrupt:  # Ctrl-C: finished runs are kept, the others resume from their last saved state
        root_text = escape(shlex.quote(str(plan.root)))
        if kind == "slurm":  # only the waiting stopped: the job array is SLURM's
            err_console.print(f"interrupted: stopped waiting; any jobs it submitted keep running (`conceptlab sweep "
                              f"status {root_text}` follows them, `scancel` stops them)", highlight=False,
                              soft_wrap=True)
        else:
            err_console.print(f"interrupted: {escape(str(plan.root))} keeps every finished run and each other run's "
                              "last saved state; run the same command again to continue", highlight=False,
                              soft_wrap=True)
        raise typer.Exit(code=130) from None
    console.print(
        f"{result['runs']} runs: {result['skipped']} already complete, {result['done']} done now"
        + (f" ({result['reused']} of them evaluating another run's training)" if result.get("reused") else "")
        + f", {len(result['failed'])} failed" + (f", {result['queued']} queued" if result["queued"] else "")
        + (f", {len(result['busy'])} left to the process already running them" if result.get("busy") else "")
    )
    for run_id, error in result["failed"].items():
        console.print(f"[red]failed[/] {run_id}: {escape(one_line(str(error)))}", highlight=False, soft_wrap=True)
    if result["failed"]:
        console.print("rerun the same command to resume the failed runs")
        raise typer.Exit(code=1)


@sweep_app.command("ls")
def sweep_ls() -> None:
    """List the shipped sweep specs with their descriptions."""
    from conceptlab.experiments.sweep import parse_spec, sweep_names

    table = Table("sweep", "description", box=None)
    for name in sweep_names():
        table.add_row(name, parse_spec(name).description)
    console.print(table)


@app.command(hidden=True)
def sweeps() -> None:
    """Deprecated: `conceptlab sweep ls`."""
    _deprecated("sweeps", "sweep ls")
    sweep_ls()


@app.command("sweep-status", hidden=True)
def sweep_status_deprecated(
    target: str = typer.Argument(..., help="a sweep folder, sweep spec file or shipped sweep name"),
) -> None:
    """Deprecated: `conceptlab sweep status`."""
    _deprecated("sweep-status", "sweep status")
    sweep_status_cmd(target)


def _sweep_root(target: str) -> Path:
    """The sweep folder of a sweep folder, spec file or shipped sweep name; a folder with a manifest without
    importing the sweep machinery (so `sweep status` of a running sweep starts without torch)."""
    from conceptlab.experiments.sweep_state import is_sweep_folder

    if is_sweep_folder(target):
        return Path(target)
    from conceptlab.experiments.sweep import sweep_root_of

    return sweep_root_of(target)


@sweep_app.command("status")
def sweep_status_cmd(
    target: str = typer.Argument(..., help="a sweep folder, sweep spec file or shipped sweep name"),
) -> None:
    """Show each run of a sweep as done / running / queued / failed (with its last error line) / interrupted / done
    (summary unreadable) / pending, and how far an unfinished run got (its training step and the time left at its
    own rate, or the checkpoints evaluated)."""
    from conceptlab.experiments.sweep_state import sweep_status

    try:
        root = _sweep_root(target)
        rows = sweep_status(root)
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(rows[0]) if rows else ["run_id", "state", "error"])
    _print_frame(frame.rename(columns={"error": "last error"}))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    console.print(f"{root}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), markup=False)


@app.command("sweep-report", hidden=True)
def sweep_report_deprecated(
    target: str = typer.Argument(..., help="a sweep folder, sweep spec file or shipped sweep name"),
    figure: Optional[Path] = typer.Option(None, help="where to save the figure (default: SWEEP/figures/concept_signal.png)"),
    axis: str = typer.Option("data.color_separation", help="the swept config key on the x axis"),
    split: str = typer.Option("train", help="learning times of this split: train or held_out"),
) -> None:
    """Deprecated: `conceptlab report`."""
    _deprecated("sweep-report", "report")
    sweep_report_cmd(target, figure, axis, split)


def sweep_report_cmd(target: str, figure: Optional[Path] = None, axis: str = "data.color_separation",
                     split: str = "train") -> None:
    """What the sweep's runs measured, across the sweep: learning time per concept vs the swept key and vs concept
    signal (mean ± spread over seeds, with its figure); for hidden-emergence runs the cross-seed emergence report
    (emergence step per intervention, capability vs behavior); for bump-world runs the final generation accuracy
    per region and swept setting (composition vs interpolation)."""
    from conceptlab.experiments.runner import check_runs_dir
    from conceptlab.experiments.sweep import sweep_root_of

    if split not in ("train", "held_out"):
        _fail(f"--split must be train or held_out, got {shown(split)}")
    try:
        root = sweep_root_of(target)
        if figure is not None:
            check_runs_dir(figure.parent, "--figure's folder")
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    has_learning = any(root.rglob("learning_times.parquet"))
    has_emergence = any(root.rglob("emergence.parquet"))
    has_composition = any(root.rglob("composition.parquet"))
    if not (has_learning or has_emergence or has_composition):
        _fail(f"{root}: no finished concept-space, hidden-emergence or bump-world runs to report (run the sweep first)")
    if has_learning:
        _learning_time_report(root, figure, axis, split)
    if has_emergence:
        emergence_report_cmd(root)
    if has_composition:
        _region_accuracy_report(root, figure)
        _data_efficiency_report(root, figure)


def _data_efficiency_report(root: Path, figure: Optional[Path], target: float = 0.6) -> None:
    """Bump-world sweeps over λ: training images needed to reach `target` accuracy per (family, N), its scaling."""
    import pandas as pd

    from conceptlab.analysis.data_efficiency import data_efficiency_runs, scaling_fit, size_to_reach
    from conceptlab.report.save import save_figure
    from conceptlab.report.sweep_figures import plot_data_efficiency
    from conceptlab.store.files import write_parquet
    from conceptlab.store.index import StoreError, open_store

    try:
        with open_store(root) as store:
            _warn(store.warnings)
            runs = store.runs()
            if "data.fraction" not in runs.columns or runs["data.fraction"].nunique() < 2:
                return  # not a data-efficiency sweep
            table = data_efficiency_runs(runs, store.table("composition"))
    except (StoreError, ValueError) as err:
        _fail(str(err))
    sizes = size_to_reach(table, target)
    fits = scaling_fit(sizes)
    out = Table("family", "N", f"images to reach {target:.0%}", box=None)
    for r in sizes.itertuples():
        text = "never" if pd.isna(r.size_to_reach) else f"{r.size_to_reach:.0f}" + (" (≤, smallest size)" if r.censored else "")
        if r.training_limited:
            text += f" — training-limited ({r.fit_fraction:.0%} of runs reach {target:.0%} on their training labels)"
        out.add_row(r.family, str(r.N), text)
    console.print(out)
    if sizes["training_limited"].any():
        console.print("training-limited: the model did not fit its own training labels in most runs, so the size "
                      "there measures the training budget, not data efficiency; left out of the fits")
    for r in fits.itertuples():
        fit = "too few uncensored N" if pd.isna(r.exponent) else f"∝ N^{r.exponent:.2f} (R² {r.r2:.2f})"
        console.print(f"{r.family}: images to reach {target:.0%} {fit}")
    write_parquet(root / "data_efficiency.parquet", sizes)
    path = (figure.with_name(figure.stem + "_data_efficiency.png") if figure else root / "figures" / "data_efficiency.png")
    save_figure(plot_data_efficiency(table, sizes, target), path)
    console.print(f"table: {root / 'data_efficiency.parquet'}; figure: {path}")


def _region_accuracy_report(root: Path, figure: Optional[Path]) -> None:
    """Bump-world sweeps: final generation accuracy per region and setting of the swept keys, mean ± sd over seeds."""
    import pandas as pd

    from conceptlab.analysis.region_accuracy import final_region_accuracy, region_accuracy_by_axis
    from conceptlab.report.save import save_figure
    from conceptlab.report.sweep_figures import plot_region_accuracy
    from conceptlab.store.files import write_parquet
    from conceptlab.store.index import StoreError, open_store

    try:
        with open_store(root) as store:
            _warn(store.warnings)
            final = final_region_accuracy(store.runs(), store.table("composition"))
    except (StoreError, ValueError) as err:
        _fail(str(err))
    summary = region_accuracy_by_axis(final)
    axes = [c for c in summary.columns if c not in ("region", "runs") and not c.endswith(("_mean", "_std"))]
    table = Table(*axes, "region", "x", "y", "joint", "runs", box=None)
    for r in summary.to_dict("records"):
        cells = [f"{r[m + '_mean']:.2f}" + ("" if pd.isna(r[m + "_std"]) else f" ± {r[m + '_std']:.2f}")
                 for m in ("x", "y", "joint")]
        table.add_row(*[str(r[a]) for a in axes], r["region"], *cells, str(r["runs"]))
    console.print(table)
    write_parquet(root / "region_accuracy.parquet", summary)
    path = (figure.with_name(figure.stem + "_regions.png") if figure else root / "figures" / "region_accuracy.png")
    save_figure(plot_region_accuracy(summary), path)
    console.print(f"table: {root / 'region_accuracy.parquet'}; figure: {path}")


def _learning_time_report(root: Path, figure: Optional[Path], axis: str, split: str) -> None:
    from conceptlab.analysis.concept_signal import learning_time_by_axis, learning_time_table
    from conceptlab.report.save import save_figure
    from conceptlab.report.sweep_figures import plot_learning_time_vs_signal
    from conceptlab.store.index import StoreError, open_store

    try:
        with open_store(root) as store:
            _warn(store.warnings)
            long = learning_time_table(store.runs(), store.table("learning_times"), axis, split)
    except (ConfigError, StoreError, ValueError) as err:
        _fail(str(err))
    summary = learning_time_by_axis(long)
    table = Table(axis, "concept", "concept signal", "learning time", "learned / runs", box=None,
                  caption="learning time: the median over every run (a run that never learned counts as later), then "
                  "in brackets the mean ± sd over the runs that learned")
    for r in summary.itertuples():
        median = "not by the end" if r.median_censored else f"{r.learning_time_median:.0f}"
        sd = "" if math.isnan(r.learning_time_std) else f" ± {r.learning_time_std:.0f}"
        lt = "not learned" if r.n_learned == 0 else f"{median} ({r.learning_time_mean:.0f}{sd})"
        table.add_row(f"{r.axis_value:g}", r.concept, f"{r.concept_signal_mean:.2f}", lt, f"{r.n_learned}/{r.n_runs}")
    console.print(table)
    path = save_figure(plot_learning_time_vs_signal(long, summary, axis), figure or root / "figures" / "concept_signal.png")
    console.print(f"figure: {path}")


@runs_app.command("ls")
def runs_ls(
    old_root: Optional[Path] = typer.Argument(None, metavar="ROOT", help="deprecated: use --root", hidden=True),
    root: Path = typer.Option(RUNS_ROOT, help="folder holding run folders (searched recursively)"),
    all_columns: bool = typer.Option(False, "--all", help="print every column of the runs table"),
) -> None:
    """List every run under --root: id, status, the config keys that differ between runs, learning times."""
    from conceptlab.store.index import StoreError, open_store

    if old_root is not None:
        _deprecated(f"runs ls {old_root}", f"runs ls --root {old_root}")
        root = old_root

    try:
        with open_store(root) as store:
            _warn(store.warnings)
            runs = store.runs()
    except StoreError as err:
        _fail(str(err))
    if runs.empty:
        console.print(f"no runs under {root}", markup=False)
        return
    if all_columns:
        columns = list(runs.columns)
    else:
        config = [c for c in runs.columns if c.split(".")[0] in ("data", "model", "diffusion", "train", "eval") and "." in c]
        varying = [c for c in config if runs[c].astype(str).nunique(dropna=False) > 1]  # set in some, absent in others
        times = [c for c in runs.columns if c.startswith("learning_time_")]
        columns = ["run_id", "status", "name", *varying[:SHOWN_KEYS], *times]
        columns = [c for c in columns if c in runs.columns]
    _print_frame(runs[columns])
    console.print(f"{len(runs)} runs under {root}", markup=False, soft_wrap=True)  # one line, whatever the width
    if not all_columns and len(varying) > SHOWN_KEYS:
        err_console.print(f"{len(varying)} config keys differ between these runs; shown: the first {SHOWN_KEYS} "
                          f"(--all shows every column; not shown: {', '.join(varying[SHOWN_KEYS:])})",
                          markup=False, soft_wrap=True, highlight=False)  # on stderr: stdout is the table


SHOWN_KEYS = 8  # config keys `runs ls` shows beside each run (those that differ between the runs)


@runs_app.command("show")
def runs_show(
    run_dir: Path = typer.Argument(..., help="a run folder (`latest`: the newest under ./runs)"),
    as_json: bool = typer.Option(False, "--json", help="print the raw summary.json"),
) -> None:
    """Print a finished run's summary: its headline numbers, timings, disk use and figures."""
    show(run_dir, as_json)


@runs_app.command("migrate")
def runs_migrate(
    root: Path = typer.Argument(..., help="a run folder, or a folder holding run folders (searched recursively)"),
) -> None:
    """Upgrade run folders of an older format (content hashes for checkpoints, the current layout, a provenance
    record) so every command reads them; a migrated folder is not resumed (its code version is unknown)."""
    from conceptlab.experiments.migrate import MigrationError, migrate_run
    from conceptlab.store.index import find_run_dirs

    if not root.is_dir():
        _fail(f"{root} is not a folder")
    runs = find_run_dirs(root)
    if not runs:
        _fail(f"no run folders under {root}")
    failed = 0
    for run_dir in runs:
        try:
            done = migrate_run(run_dir)
        except (MigrationError, RuntimeError) as err:
            failed += 1
            console.print(f"[red]cannot migrate[/] {err}", highlight=False, soft_wrap=True)
            continue
        console.print(f"{run_dir}: " + ("; ".join(done) if done else "already current"), highlight=False,
                      soft_wrap=True)
    if failed:
        raise typer.Exit(code=1)


@runs_app.command("query")
def runs_query(
    sql: str = typer.Argument(..., help="SQL over runs and the views concept_space, learning_times, interventions, "
                              "emergence, matched_naive, composition, geometry, geometry_controls, abstractions, "
                              "commitment, eval_steps (and a plug-in's tables)"),
    root: Path = typer.Option(Path("runs"), help="folder holding run folders (searched recursively)"),
    csv: bool = typer.Option(False, "--csv", help="print CSV instead of a table"),
) -> None:
    """Run one SQL query over every run under --root (DuckDB), e.g. mean learning time per Δc."""
    from conceptlab.store.index import MAX_ROWS, StoreError, open_store

    try:
        with open_store(root) as store:
            _warn(store.warnings)
            result = store.query(sql, max_rows=MAX_ROWS)
    except StoreError as err:
        _fail(str(err))
    if csv:
        console.print(result.to_csv(index=False), end="", highlight=False, soft_wrap=True, markup=False)
    else:
        _print_frame(result)


@runs_app.command("noise")
def runs_noise(
    run_dir: Path = typer.Argument(..., help="a finished concept-space run folder (`latest`: the newest under ./runs)"),
    from_step: float = typer.Option(0.0, "--from-step", help="read checkpoints at this step and later (e.g. the "
                                    "converged tail, where the trajectories are flat)"),
    max_lag: int = typer.Option(8, "--max-lag", min=1, help="longest lag, in checkpoints"),
    share: float = typer.Option(0.9, help="persistence: the first lag where γ reaches this share of its plateau"),
    figure: Optional[Path] = typer.Option(None, help="also save γ against the lag as a figure (.png, .pdf, .svg)"),
    window: Optional[int] = typer.Option(None, min=1, help="also: the spread of the held-out naive score read as the "
                                         "median of this many checkpoints (a criterion's step: {last: N}) against "
                                         "single checkpoints"),
    window_spacing: float = typer.Option(1000.0, "--spacing", help="with --window: steps between the window's "
                                         "checkpoints"),
) -> None:
    """Checkpoint-to-checkpoint noise of a run's concept-space trajectories: each one's semivariogram over the lags
    and for how many checkpoints its noise persists (1: independent from one checkpoint to the next)."""
    from conceptlab.experiments.checkpoint_noise import (
        NoiseInputError, held_out_targets, measure_run, noise_frame, window_spread,
    )

    run_dir = _run_folder(run_dir)
    if not run_dir.is_dir():
        _fail(f"{run_dir}: no such run folder")
    if not 0 < share <= 1:
        _fail(f"--share must be in (0, 1], got {share}")
    try:
        results = measure_run(run_dir, from_step=from_step, max_lag=max_lag, share=share)
    except NoiseInputError as err:
        _fail(str(err))
    if not results:
        _fail(f"{run_dir}: no concept-space trajectory at steps ≥ {from_step:g}")
    frame = noise_frame(results)
    wide = frame.pivot_table(index="trajectory", columns="lag", values="gamma", sort=False)
    wide.columns = [f"γ({lag})" for lag in wide.columns]
    first = frame.drop_duplicates("trajectory").set_index("trajectory")
    table = first[["split", "checkpoints"]].join(wide)
    table["persists"] = [f"{int(p)} ({s:,.0f} steps)" for p, s in zip(first["persistence"], first["persistence_steps"])]
    _print_frame(table.reset_index())
    spacing = results[0].spacing
    console.print(f"lags in checkpoints {spacing:,.0f} steps apart, from step {results[0].steps[0]:,.0f} to "
                  f"{results[0].steps[-1]:,.0f}; γ: half the mean squared change over the lag, summed over concepts",
                  markup=False)
    for target in held_out_targets(run_dir) if window is not None else []:
        try:
            spread = window_spread(run_dir, target, window, window_spacing, from_step)
        except NoiseInputError as err:
            _fail(str(err))
        console.print(f"naive score on {target} from step {from_step:,.0f}: single checkpoints "
                      f"{spread.single.describe()}; median of {window} checkpoints {window_spacing:,.0f} steps apart "
                      f"{spread.medians.describe()} (single checkpoints at the same ends: sd "
                      f"{spread.single_at_ends.sd:.3f})", markup=False, soft_wrap=True)
    if figure is not None:
        from conceptlab.report.figures import plot_checkpoint_noise
        from conceptlab.report.save import save_figure

        saved = save_figure(plot_checkpoint_noise(frame, title=f"{run_dir.name}: checkpoint noise from step "
                                                              f"{from_step:,.0f}"), figure)
        console.print(f"figure: {saved}", markup=False)


def _print_frame(frame) -> None:
    cells = [[escape(_cell(v)) for v in row] for row in frame.itertuples(index=False)]
    headers = [escape(str(c)) for c in frame.columns]
    table = Table(*headers, box=None)
    for row in cells:
        table.add_row(*row)
    natural = sum(max([len(h), *(len(r[i]) for r in cells)]) + 2 for i, h in enumerate(headers))
    wide = console if natural <= console.width else Console(width=natural, highlight=False)
    wide.print(table)


def _cell(value) -> str:
    if value is None or value is _pd_na() or (isinstance(value, float) and value != value):  # NULL of any type
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _pd_na():
    import pandas as pd

    return pd.NA


@app.command("controls-report", hidden=True)
def controls_report_deprecated(
    root: Path = typer.Argument(..., help="a sweep folder whose spec declares a controls block"),
) -> None:
    """Deprecated: `conceptlab report`."""
    _deprecated("controls-report", "report")
    controls_report_cmd(root)


def controls_report_cmd(root: Path) -> None:
    """A finding beside its controls across report seeds: the table and each claim's verdict against its control."""
    from conceptlab.experiments.controls_report import CLAIMS, FIGURE, MARKDOWN, controls_report

    if not root.is_dir():
        _fail(f"{root} is not a folder")
    try:
        report = controls_report(root)
    except (FileNotFoundError, ValueError, ConfigError) as err:
        _fail(str(err))
    console.print(f"[bold]{report['sweep']}[/] over report seeds {report['seeds']} "
                  f"(settings chosen on {report['settings_seeds'] or 'undeclared seeds'})", highlight=False)
    if report["missing_runs"]:
        _warn([f"{len(report['missing_runs'])} runs of the manifest are not finished: "
               f"{', '.join(report['missing_runs'])}"])
    table = Table(box=None)
    table.add_column("claim", overflow="fold", min_width=20)  # long claim names fold onto more lines, never cut
    table.add_column("control", overflow="fold")
    table.add_column("criterion", overflow="fold", max_width=12)
    table.add_column("verdict", overflow="fold", max_width=16)
    table.add_column("per seed", no_wrap=True, min_width=9)
    for c in report["claims"]:
        crit = "true" if c["direction"] == "holds" else f"{'>' if c['direction'] == 'greater' else '<'} by ≥ {c['margin']:g}"
        seeds = "\n".join(("✓" if s["passed"] else "✗") + (f"{s['difference']:+.3g}" if s["difference"] is not None
                                                          else "") for s in c["seeds"])
        table.add_row(c["name"], c["control"] or "—", crit, f"{c['verdict']} ({c['passed']}/{c['of']})", seeds)
    console.print(table)
    console.print(f"tables: {root / MARKDOWN}, {root / CLAIMS}; figure: {root / FIGURE}", highlight=False)


@app.command()
def report(
    target: str = typer.Argument(..., help="a run folder (`latest`: the newest under ./runs), a sweep folder, a "
                                 "sweep spec or shipped sweep name, or a folder holding runs"),
    figure: Optional[Path] = typer.Option(None, help="sweeps: where to save the learning-time figure (default: "
                                          "SWEEP/figures/concept_signal.png; other figures are named beside it)"),
    axis: Optional[str] = typer.Option(None, help="sweeps: the swept config key on the learning-time figure's x "
                                       "axis (default data.color_separation; giving it asks for that table)"),
    split: str = typer.Option("train", help="sweeps: learning times of this split: train or held_out"),
) -> None:
    """Report a run or a sweep: print its tables and write its self-contained report.html (no server, no network).

    A run: its summary and report.html. A sweep or a folder of runs, by what its runs measured: learning time per
    concept vs the swept key and concept signal; the hidden-emergence report across seeds; generation accuracy per
    region and data efficiency for bump worlds; each claim's verdict against its controls where the spec declares a
    controls block; then report.html with a table of its runs linking to their own reports."""
    path = _run_folder(Path(target))
    if not path.exists() and ("/" in target or target.endswith((".yaml", ".yml"))):  # a path, not a sweep's name
        _fail(f"{shown(target)}: no such file or folder (report takes a run folder, a sweep folder, a folder "
              "holding runs, a sweep spec or a shipped sweep's name)")
    if path.is_dir() and (path / "config.yaml").is_file() and not (path / "manifest.json").is_file():
        return _report_run(path)
    from conceptlab.experiments.sweep import sweep_root_of
    from conceptlab.experiments.sweep_state import MANIFEST

    if split not in ("train", "held_out"):
        _fail(f"--split must be train or held_out, got {shown(split)}")
    if path.is_dir() and not (path / MANIFEST).is_file() and not (path / "sweep.yaml").is_file():
        root = path  # a folder of runs, not a sweep: the tables across them, no sweep page
        if not any(True for _ in root.rglob("summary.json")):
            _fail(f"{shown(target)} holds no finished run and is not a sweep folder")
        sections = _report_sections(root, figure, axis, split)
        if not sections:
            _fail(f"{shown(target)}: no finished concept-space, hidden-emergence or bump-world runs to tabulate")
        return
    from conceptlab.experiments.sweep_state import read_manifest

    try:
        root = sweep_root_of(target)
        if not (root / MANIFEST).is_file():
            _fail(f"{shown(str(root))}: the sweep has not run there yet (no {MANIFEST}; `conceptlab sweep run "
                  f"{target}` runs it)")
        read_manifest(root)  # a manifest the report can read, or one line saying what is wrong with it
    except (ConfigError, ValueError) as err:
        _fail(str(err))
    sections = _report_sections(root, figure, axis, split)
    if _declares_controls(root):
        console.print()
        controls_report_cmd(root)
        sections.append("controls")
    from conceptlab.report.html import write_sweep_report

    try:
        page = write_sweep_report(root)
    except (OSError, ValueError, KeyError) as err:
        _fail(f"{root}: report.html not written ({type(err).__name__}: {err})", code=1)
    if not sections:
        console.print(f"{root}: no finished run to tabulate yet (`conceptlab sweep status {root}`)", markup=False)
    console.print(f"report: {page}", highlight=False, markup=False, soft_wrap=True)


def _report_run(run_dir: Path) -> None:
    from conceptlab.report.html import write_run_report

    show(run_dir)
    try:
        page = write_run_report(run_dir)
    except (OSError, ValueError, KeyError) as err:
        _fail(f"{run_dir}: report.html not written ({type(err).__name__}: {err})", code=1)
    console.print(f"report: {page}", highlight=False, markup=False, soft_wrap=True)


def _report_sections(root: Path, figure: Optional[Path], axis: Optional[str], split: str) -> list[str]:
    """The cross-run tables of `report` for the kinds of run under root; returns the sections printed. The
    learning-time table is for concept-space sweeps (a hidden-emergence sweep gets its own report instead, unless
    --axis asks for it)."""
    from conceptlab.experiments.runner import check_runs_dir

    if figure is not None:
        try:
            check_runs_dir(figure.parent, "--figure's folder")
        except (ConfigError, ValueError) as err:
            _fail(str(err))
    sections = []
    has_emergence = any(root.rglob("emergence.parquet"))
    if any(root.rglob("learning_times.parquet")) and (axis is not None or not has_emergence):
        _learning_time_report(root, figure, axis or "data.color_separation", split)
        sections.append("learning times")
    if has_emergence:
        emergence_report_cmd(root)
        sections.append("emergence")
    if any(root.rglob("composition.parquet")):
        _region_accuracy_report(root, figure)
        _data_efficiency_report(root, figure)
        sections.append("composition")
    return sections


def _declares_controls(root: Path) -> bool:
    from conceptlab.experiments.sweep import parse_spec

    try:
        return parse_spec(str(root)).controls is not None
    except (ConfigError, ValueError, OSError):
        return False


def main() -> None:
    # the command line draws to files only (Agg), set where matplotlib reads it when a command first imports it, so a
    # command that draws nothing does not import it; importing the package never switches backends
    os.environ["MPLBACKEND"] = "Agg"
    app()


if __name__ == "__main__":
    main()
