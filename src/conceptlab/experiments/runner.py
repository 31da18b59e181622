"""The run driver: config → data → model → train (checkpoints) → evaluate → store → report, in one run folder.

Training and evaluation also log to TensorBoard under `<run>/tensorboard/` (`train.tensorboard`, on by default),
and a finished run gets its self-contained `report.html` (`report.html.write_run_report`).

`run_experiment(cfg, run_dir)` is the whole sequence, kept explicit here; `prepare_run(cfg)` is its first part, every
check made before training (memory estimate, data, model, the study's check), which `--dry-run` runs alone. What
depends on the kind of data comes from the run's study (`studies.study_for(cfg.data.kind)`): its data-generating
process, its pre-training check, its per-checkpoint measurements and its summary. The driver owns the one resumable loop over checkpoints
(`measure_checkpoints`): each checkpoint is loaded once, its config hash checked, and every measurement due there
and not yet on disk runs and is written at once. The folder layout is `store.run_folder.RunFolder`'s.

Rerunning on an existing folder resumes: training continues from the last saved state and checkpoints already
measured are not measured again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import torch
from rich.console import Console
from rich.markup import escape

from conceptlab.analysis.vlb_terms import has_vlb_terms, reconstruction_phase
from conceptlab.experiments.code_versions import drift_for
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import ConfigError, config_to_yaml, load_config
from conceptlab.experiments.progress import progress_bar
from conceptlab.experiments.provenance import (
    MEASURED,
    TRAINED,
    analysis_versions,
    invocation,
    invocation_precision,
    run_code_drift,
    run_precision,
)
from conceptlab.experiments.resources import MemoryEstimate, check_memory, study_memory
from conceptlab.experiments.training_reuse import TRAINED_IN, lent_invocations, trained_in
from conceptlab.messages import one_line, shown
from conceptlab.models.diffusion_model import DiffusionModel, build_model
from conceptlab.models.unet import use_fused_attention
from conceptlab.report.figures import plot_loss, plot_vlb_terms
from conceptlab.report.save import figures_wanted, save_figures, vector_formats
from conceptlab.store.files import (
    SymlinkRefused,
    append_text,
    cache_root,
    read_json,
    read_jsonl,
    read_tensors,
    remove_stale_temps,
    write_json,
    write_parquet,
    write_tensors,
    write_text,
)
from conceptlab.store.run_folder import FORMAT, RunFolder
from conceptlab.studies import Measurement, StepResult, run_due_checkpoints, study_for
from conceptlab.train.checkpoints import (
    CheckpointIntegrityError,
    checkpoint_schedule,
    load_checkpoint,
    training_state_meta,
)
from conceptlab.train.precision import resolve_bf16, resolve_device
from conceptlab.train.trainer import TrainingData, iter_training, load_weights

_RUN_DIR = re.compile(r"^(\d{4,})-")


def new_run_dir(runs_dir: Path, name: str) -> Path:
    """A fresh numbered folder `NNNN-name` under runs_dir (never reuses or deletes one).

    Numbers are reserved atomically (an exclusive mkdir under `runs_dir/.run-numbers/`), so runs
    started at the same moment by different processes never share a number.
    """
    runs_dir = Path(runs_dir)
    reserved = runs_dir / ".run-numbers"
    reserved.mkdir(parents=True, exist_ok=True)
    taken = [int(m.group(1)) for p in runs_dir.iterdir() if (m := _RUN_DIR.match(p.name))]
    taken += [int(p.name) for p in reserved.iterdir() if p.name.isdigit()]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    start = max(taken, default=0) + 1
    for number in range(start, start + 10000):
        try:
            (reserved / f"{number:04d}").mkdir()
        except FileExistsError:
            continue
        path = runs_dir / f"{number:04d}-{safe}"
        path.mkdir()
        return path
    raise RuntimeError(f"could not create a run folder under {runs_dir}")


def check_runs_dir(runs_dir: Path, what: str = "runs_dir") -> None:
    """ConfigError (one line naming `what` and the path) unless `runs_dir` is, or can be made, a writable folder:
    neither it nor a parent may be a file, and the nearest existing folder must be writable."""
    path = Path(runs_dir)
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                where = "is" if part == path else f"is inside {shown(str(part))}, which is"
                raise ConfigError(f"{what} {shown(str(path))} {where} not a folder")
            if not os.access(part, os.W_OK | os.X_OK):
                raise ConfigError(f"{what} {shown(str(path))}: cannot write in {shown(str(part))}")
            return


@dataclass
class PreparedRun:
    """What `prepare_run` built and checked: the data-generating process, the model, its memory estimate."""

    dgp: Any
    model: DiffusionModel
    memory: MemoryEstimate


def check_cache(cfg: RunConfig) -> None:
    """ConfigError (one line) when the run's study keeps a trained probe or classifier in the per-machine cache
    (`uses_cache`) and that folder cannot be written: found now, not once the model is trained."""
    if getattr(study_for(cfg.data.kind), "uses_cache", False):
        check_runs_dir(cache_root(), "the cache folder ($CONCEPTLAB_CACHE, else ~/.cache/conceptlab: trained probes)")


def prepare_run(cfg: RunConfig) -> PreparedRun:
    """Every check a run makes before training, in order, each before what it guards is allocated: the figures'
    settings (`CONCEPTLAB_VECTOR_FIGURES`, `CONCEPTLAB_FIGURES`), the cache folder (writable), the memory the
    study's data and evaluation need (from the config alone), the data-generating process, the whole memory estimate (the network sized on the meta device), the model
    (seeded as a run seeds it) and the study's own check. ConfigError (one line) on the first failure; the study's
    warnings (`config_warnings`) printed on stderr; `--dry-run` runs exactly this."""
    try:  # the figures' settings (environment variables), checked before the hours of training, not at their end
        vector_formats()
        figures_wanted()
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_cache(cfg)
    study = study_for(cfg.data.kind)
    needs = study_memory(cfg)
    check_memory(cfg, needs=needs)
    dgp = study.build_data(cfg.data)
    memory = check_memory(cfg, dgp, needs)
    torch.manual_seed(cfg.train.train_seed)
    device = resolve_device(cfg.train.device)
    model = build_run_model(cfg, dgp).to(device)
    study.check(cfg, dgp, model)
    warnings = getattr(study, "config_warnings", None)  # optional (a plug-in study may lack it)
    for line in warnings(cfg) if warnings else []:
        Console(stderr=True).print(f"[yellow]warning:[/] {escape(one_line(line))}", highlight=False, soft_wrap=True)
    return PreparedRun(dgp, model, memory)


WHERE = {"runs_dir"}  # config fields that say where a run is stored, not what it is (the run id leaves them out too)


def same_run_config(a: RunConfig, b: RunConfig) -> bool:
    """Whether two configs describe the same run: equal but for where it is stored (`WHERE`), so a run saved with
    `runs_dir: runs` is the run that `--runs-dir /abs/runs` names."""
    return a.model_dump(exclude=WHERE) == b.model_dump(exclude=WHERE)


def find_unfinished_run(runs_dir: Path, cfg: RunConfig, console: Console | None = None) -> Path | None:
    """The newest run folder under runs_dir with the same resolved config (`same_run_config`) and no summary yet.
    A folder whose config no longer loads (a removed key, a file that does not parse) is skipped with a one-line
    warning naming it (on `console`, else stderr)."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return None
    for path in sorted((p for p in runs_dir.iterdir() if _RUN_DIR.match(p.name)), reverse=True):
        folder = RunFolder(path)
        if folder.config.is_file() and not folder.is_complete():
            try:
                saved = load_config(str(folder.config))
            except (ValueError, OSError) as err:  # ConfigError among them
                why = one_line(f"{shown(str(path))} skipped: its config does not load ({err})")
                (console or Console(stderr=True)).print(f"[yellow]warning:[/] {escape(why)}", highlight=False,
                                                        soft_wrap=True)
                continue
            if same_run_config(saved, cfg):
                return path
    return None


def _truncate_log(path: Path, after_step: int, console: Console) -> None:
    """Drop log lines past the resumed step (and a torn last line, said on the console), so a resumed run's log has
    no duplicates."""
    if not path.is_file():
        return
    records, torn = read_jsonl(path)
    if torn:
        console.print(f"[yellow]warning:[/] {torn}", highlight=False, soft_wrap=True)
    kept = [r for r in records if r["step"] <= after_step]
    write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def train_stage(cfg: RunConfig, run: RunFolder, dgp, model, console: Console, progress: bool,
                checkpointed: Callable[[float], None] | None = None) -> float:
    """Train (or resume training) and return the seconds spent; `checkpointed(seconds so far)` after every
    checkpoint (how the run driver keeps an interrupted invocation's training time)."""
    state_step = run.trained_step()  # a finished training whose state retention removed (or a reused one) is done
    _truncate_log(run.train_log, state_step, console)
    if state_step >= cfg.train.steps:
        return 0.0
    if state_step:
        console.print(f"resuming training from step {state_step} ({len(run.list_checkpoints())} checkpoints on disk)")
    dataset = dgp.training_set()
    data = TrainingData(dataset.images, dataset.prompts, cfg.data.null_value)
    began = time.perf_counter()
    board = tensorboard_log(cfg, run, purge_step=state_step + 1 if state_step else None)
    records = iter_training(
        model,
        data,
        cfg.train,
        run.checkpoints,
        run.train_state,
        cfg_dropout=cfg.diffusion.cfg_dropout,
        config_hash=cfg.training_hash(),
    )
    with progress_bar(console, progress) as bar, append_text(run.train_log) as log, board:
        if board:
            board.config(config_to_yaml(cfg))
        task = bar.add_task("train", total=cfg.train.steps, completed=state_step, info="")
        for rec in records:
            if rec.step % cfg.train.log_every == 0 or rec.checkpoint is not None or rec.step == cfg.train.steps:
                log.write(json.dumps({"step": rec.step, "loss": rec.loss, **rec.metrics, "seconds": rec.seconds}) + "\n")
                log.flush()  # before the trainer saves the state marking a checkpoint step done
                if board:
                    board.train(rec.step, rec.loss, rec.metrics, rec.extra.get("lr"), rec.seconds)
            bar.update(task, completed=rec.step, info=f"loss {rec.loss:.4f}")
            if rec.checkpoint is not None and checkpointed is not None:
                checkpointed(time.perf_counter() - began)
    return time.perf_counter() - began


def tensorboard_log(cfg: RunConfig, run: RunFolder, purge_step: int | None = None):
    """The run's TensorBoard writer (`train.tensorboard`), or a null context (falsy) when it is switched off."""
    if not cfg.train.tensorboard:
        return _NoLog()
    from conceptlab.train.tensorboard import TensorBoardLog

    return TensorBoardLog(run.root, purge_step)


class _NoLog(contextlib.nullcontext):
    def __bool__(self) -> bool:
        return False


def _record(run: RunFolder, measurement: Measurement, step: int, result: StepResult) -> None:
    """Write one measurement's result at one checkpoint: tensors, then kept samples, then the step file (whose
    existence marks the checkpoint measured, so a crash in between repeats the measurement, never skips it)."""
    if result.tensors is not None:
        write_tensors(run.step_tensors(measurement.folder, step, measurement.piece), result.tensors)
    if result.samples and measurement.samples_file:
        path = run.file(measurement.samples_file)
        old = read_tensors(path) if path.is_file() else {}
        write_tensors(path, {**old, **result.samples})
    target = run.step_file(measurement.folder, step, measurement.piece, measurement.suffix)
    if isinstance(result.rows, pd.DataFrame):
        write_parquet(target, result.rows)
    else:
        write_json(target, result.rows)


class RunFolderError(ValueError):
    """A run folder this code must not continue (older format, other analysis versions, missing checkpoints)."""


def check_checkpoints_complete(cfg: RunConfig, run: RunFolder) -> None:
    """Every checkpoint the schedule has up to the step training reached must be on disk, weights and sidecar
    (unless retention pruned it): a lost checkpoint is an error naming it, not a shorter run."""
    trained = run.trained_step()
    pruned = run.pruned_steps()
    listed = {s for s, _ in run.list_checkpoints()}
    missing = [s for s in checkpoint_schedule(cfg.train) if s <= trained and s not in listed and s not in pruned]
    if missing:
        raise CheckpointIntegrityError(
            f"{run.checkpoints}: checkpoints of step(s) {missing[:5]} are missing or incomplete (no weights or no "
            f"sidecar) although training reached step {trained}"
        )


def measure_checkpoints(
    cfg: RunConfig, run: RunFolder, model, measurements: list[Measurement], console: Console, progress: bool
) -> dict[str, float]:
    """The one resumable loop: every measurement at every checkpoint it is due at (`studies.run_due_checkpoints`:
    the every-k-th rule over every checkpoint written, pruned ones too) and has no file for yet. Each checkpoint is
    loaded once — refused if it is damaged (content hash) or its config hash is not this run's — and its weights (EMA
    or not, per measurement) set before each measurement. The network is put in evaluation mode, and in
    channels-last format or on fused attention where `eval` asks. Returns the seconds per measurement."""
    check_checkpoints_complete(cfg, run)
    checkpoints = run.list_checkpoints()
    due = {m.name: {s for s, _ in run_due_checkpoints(run, m.every)} for m in measurements}
    todo = []
    for step, path in checkpoints:
        pending = [m for m in measurements if step in due[m.name]
                   and not run.step_file(m.folder, step, m.piece, m.suffix).is_file()]
        if pending:
            todo.append((step, path, pending))
    seconds = {m.name: 0.0 for m in measurements}
    if not todo:
        return seconds
    total = sum(len(due[m.name]) for m in measurements)
    expected = cfg.training_hash()
    model.eval()
    if cfg.eval.channels_last:  # loading a checkpoint copies into these tensors, so the format stays
        model.to(memory_format=torch.channels_last)
    if cfg.eval.fused_attention:
        use_fused_attention(model)
    with progress_bar(console, progress) as bar, tensorboard_log(cfg, run) as board:
        task = bar.add_task("evaluate", total=total, completed=total - sum(len(p) for _, _, p in todo), info="")
        for step, path, pending in todo:
            tensors, _ = load_checkpoint(path, expected)
            loaded = None
            for m in pending:
                if loaded != m.use_ema:
                    load_weights(model, tensors, use_ema=m.use_ema)
                    model.eval()
                    loaded = m.use_ema
                began = time.perf_counter()
                result = m.measure(step)
                _record(run, m, step, result)
                if board:
                    board.scalars(m.name, step, result.scalars)
                    board.samples(m.name, step, result.samples)
                seconds[m.name] += time.perf_counter() - began
                bar.update(task, advance=1, info=f"step {step} {m.name}: {result.info}".rstrip(": "))
    return seconds


def build_run_model(cfg: RunConfig, dgp) -> DiffusionModel:
    """The model a run trains, shaped by its data (prompt width, channels, attribute blocks, null label)."""
    return build_model(
        cfg.model, cfg.diffusion, dgp.prompt_dim, dgp.image_size, dgp.channels, dgp.attribute_sizes, dgp.null_label
    )


def evaluate_run(cfg: RunConfig, run_dir: Path, dgp, model, console: Console | None = None,
                 progress: bool = True) -> tuple[dict[str, Any], dict[str, float]]:
    """The evaluation half of a run on a folder whose checkpoints exist: the study's measurements (resumably), then
    its summary; writes the run-level tables, files and figures and returns (summary fields, seconds per part)."""
    console = console or Console(quiet=not progress)
    run = RunFolder(run_dir)
    study = study_for(cfg.data.kind)
    evaluation = study.evaluation(cfg, dgp, model, run, console, progress)
    seconds = dict(evaluation.setup_seconds)
    seconds.update(measure_checkpoints(cfg, run, model, evaluation.measurements, console, progress))
    began = time.perf_counter()
    summary = evaluation.summarize()
    for name, table in summary.tables.items():
        write_parquet(run.table(name), table)
    for name, obj in summary.files.items():
        write_json(run.file(name), obj)
    figures = dict(summary.figures)
    log = _read_train_log(run)
    extra: dict[str, Any] = {}
    draw = figures_wanted()  # CONCEPTLAB_FIGURES=none: no figure drawn
    if log is not None:
        if draw:
            figures["loss.png"] = plot_loss(log)
        if has_vlb_terms(log):  # a VDM: when its reconstruction term stopped dominating the loss
            extra["reconstruction_phase"] = reconstruction_phase(log)
            if draw:
                figures["vlb_terms.png"] = plot_vlb_terms(log, extra["reconstruction_phase"]["end"])
    paths = save_figures(figures, run.figures)
    seconds.update(summary.seconds)
    seconds["summarize"] = time.perf_counter() - began - sum(summary.seconds.values())
    fields = {**summary.fields, **extra, "figures": [str(p.relative_to(run.root)) for p in paths]}
    return fields, seconds


def _read_train_log(run: RunFolder) -> pd.DataFrame | None:
    if not run.train_log.is_file():
        return None
    records, _ = read_jsonl(run.train_log)
    return pd.DataFrame(records) if records else None


def check_folder(cfg: RunConfig, run: RunFolder) -> list[dict[str, Any]]:
    """Refuse a folder this code must not continue; returns its earlier invocations. A folder of the older format
    (results but no provenance record) needs `conceptlab runs migrate`; one whose results older analysis versions
    made is not continued (its per-checkpoint files would be mixed with new ones): start a new run."""
    if run.format_version() < FORMAT:
        if run.summary.is_file() or run.checkpoints.is_dir():
            raise RunFolderError(f"{run.root} is a run folder of format {run.format_version()} (before provenance "
                                 f"records); run `conceptlab runs migrate {run.root}` first")
        return []
    record = read_json(run.provenance)
    earlier = record.get("invocations", [])
    versions = analysis_versions(cfg)
    made_by = record.get("versions", versions)
    if made_by != versions:
        by = "code of unknown version (a migrated folder)" if made_by is None else f"analysis versions {made_by}"
        raise RunFolderError(f"{run.root} was made by {by}; this code has {versions}: start a new run (its "
                             "results would mix both)")
    try:  # refused here, before "resuming training from step …" is said
        state = training_state_meta(run.train_state)
    except CheckpointIntegrityError:  # a damaged state: the training stage says so, once this invocation is recorded
        state = None
    if state is not None and state.get("config_hash") != cfg.training_hash():
        raise RunFolderError(f"{run.train_state} was saved under another training config than {run.config.name} "
                             "gives now (was it edited?): put the training keys back, or start a new run with them")
    return earlier


def run_experiment(cfg: RunConfig, run_dir: Path, progress: bool = True, console: Console | None = None,
                   prepared: PreparedRun | None = None) -> dict:
    """Run (or resume) the whole pipeline in `run_dir`, holding the folder's lock; returns the summary dict.
    `prepared`: what `prepare_run(cfg)` returned, when the caller ran the checks already (else they run here, before
    anything is written: a refused config leaves no folder)."""
    run = RunFolder(run_dir)
    _same_config(cfg, run)
    prepared = prepared or prepare_run(cfg)
    with run.lock():
        return _run_locked(cfg, run, progress, console or Console(), prepared)


def _same_config(cfg: RunConfig, run: RunFolder) -> None:
    if run.config.is_file():
        saved = load_config(str(run.config))
        if not same_run_config(saved, cfg):
            raise ValueError(f"{run.root} holds a run with a different config; start a new run folder instead")


def _run_locked(cfg: RunConfig, run: RunFolder, progress: bool, console: Console, prepared: PreparedRun) -> dict:
    _same_config(cfg, run)  # again under the lock: another process may have written it meanwhile
    earlier = check_folder(cfg, run)
    began = time.perf_counter()
    prepared = prepared or prepare_run(cfg)
    study, dgp, model = study_for(cfg.data.kind), prepared.dgp, prepared.model
    device = resolve_device(cfg.train.device)
    run.root.mkdir(parents=True, exist_ok=True)
    # under the lock no write of this run's own is in flight; but its status.json (a sweep's executor), report.html
    # (`conceptlab report`) and config.yaml (a sweep's manifest) are written by others without the lock: kept
    stale = remove_stale_temps(run.root, keep=(run.status.name, "report.html", run.config.name))
    if stale:
        console.print(f"removed {stale} temporary file{'s' * (stale > 1)} an earlier invocation left mid-write",
                      highlight=False, markup=False)
    if not run.config.is_file():
        write_text(run.config, config_to_yaml(cfg))
    data_summary = dgp.describe()
    bf16 = resolve_bf16(cfg.train.bf16, device)
    this = invocation(cfg, device, bf16, drift_for(cfg.data.kind))

    def record_invocation() -> None:  # again once this invocation has trained and once it has measured
        write_json(run.provenance, {"format": FORMAT, "versions": this["versions"], "invocations": [*earlier, this]})

    record_invocation()
    trained_from: int | None = None  # where training stood, once read
    measured_before: dict[int, float] | None = None  # the measurement files' times, once measuring begins
    try:
        _warn_mixed_precision(run, earlier, this, console)
        _warn_code_drift(this, console)
        write_json(run.data, data_summary)
        n_params = sum(p.numel() for p in model.parameters())
        console.print(f"[bold]{cfg.name}[/] → {run.root}  ({n_params / 1e6:.2f} M parameters, "
                      f"{study.headline(cfg, dgp)})")
        key = f"{this['started']} pid {os.getpid()}"  # this invocation's entry in timings.jsonl

        def so_far(train_seconds: float) -> None:  # kept at every checkpoint and after training: a crash loses less
            record_timing(run, {"train": round(train_seconds, 2), "total": round(time.perf_counter() - began, 2)},
                          invocation=key, finished=False)

        trained_from = run.trained_step()
        train_seconds = train_stage(cfg, run, dgp, model, console, progress, so_far)
        so_far(train_seconds)
        this[TRAINED] = [trained_from, run.trained_step()] if run.trained_step() > trained_from else None
        record_invocation()
        if not run.training.is_file() or read_json(run.training).get("step") != run.trained_step():
            write_json(run.training, {"step": run.trained_step(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
        reused = read_json(run.training).get(TRAINED_IN)  # training done by another run (experiments.training_reuse)
        measured_before = run.measurement_times()
        fields, seconds = evaluate_run(cfg, run.root, dgp, model, console, progress)
        this[MEASURED] = sum(t != measured_before.get(s) for s, t in run.measurement_times().items())
        record_invocation()
        summary = {
            "run": run.name,
            "name": cfg.name,
            "kind": cfg.data.kind,
            "config_hash": cfg.training_hash(),
            **({"training_images": data_summary["training_images"]} if "training_images" in data_summary else {}),
            **fields,
            "parameters": n_params,
            "device": str(device),
            "bf16": bf16,
            "precision": run_precision([*earlier, this], lent_invocations(reused)),
            "threads": torch.get_num_threads(),
            "provenance": {**{k: this[k] for k in ("conceptlab", "git_commit", "git_dirty", "versions")},
                           "code_drift": run_code_drift([*earlier, this]),  # any invocation's, not only the last
                           **{k: this[k] for k in ("torch", "cpu", "gpu", "host")},
                           **({TRAINED_IN: reused} if reused else {})},
            "seconds": {
                "train": round(train_seconds, 2),
                **{k: round(v, 2) for k, v in seconds.items()},
                "total": round(time.perf_counter() - began, 2),
            },
        }
        summary.update(record_timing(run, summary["seconds"], invocation=key))
        apply_retention(cfg, run)
        summary["disk_bytes"] = run.disk_bytes()
        write_json(run.summary, summary)
        write_report(run, console)
        return summary
    except BaseException:  # an error, a refusal, Ctrl-C: record what this invocation did, then let it go on
        _record_work_done(run, this, trained_from, measured_before)
        with contextlib.suppress(Exception):  # the error itself may be that provenance.json cannot be written
            record_invocation()
        raise


def _record_work_done(run: RunFolder, this: dict, trained_from: int | None,
                      measured_before: dict[int, float] | None) -> None:
    """Set in `this`, the record of an invocation an error ended, what it did that it has not recorded: `trained`
    from the training state (null when training had not begun or saved nothing), `measured` from the measurement
    files (0 when measuring had not begun) — so a refused invocation records no work. What cannot be read stays
    unrecorded: such an invocation counts as having done both (`experiments.provenance`), as a killed one does."""
    if TRAINED not in this:
        with contextlib.suppress(Exception):
            reached = run.trained_step() if trained_from is not None else None
            this[TRAINED] = [trained_from, reached] if reached is not None and reached > trained_from else None
    if MEASURED not in this:
        with contextlib.suppress(Exception):
            this[MEASURED] = 0 if measured_before is None else sum(
                t != measured_before.get(s) for s, t in run.measurement_times().items())


def _warn_mixed_precision(run: RunFolder, earlier: list[dict], this: dict, console: Console) -> None:
    """Say so when the earlier work on this run (its earlier invocations, or the run whose training it reuses) ran in
    another precision than this invocation: with `train.bf16: null` the precision follows the machine, and the run's
    numbers will mix both (its summary's `precision` says `mixed: …`)."""
    before, now = run_precision(earlier, lent_invocations(trained_in(run.root))), invocation_precision(this)
    if before is not None and before != now:
        console.print(f"[yellow]warning:[/] {shown(str(run.root))}: earlier work on this run ran in {before}, this "
                      f"invocation runs in {now} (train.bf16: null follows the machine): its numbers will mix both, "
                      "and its summary's precision will say so. To keep one precision, continue it on a machine like "
                      "the first, or start a new run.", highlight=False, soft_wrap=True)


def _warn_code_drift(this: dict, console: Console) -> None:
    """Say so when the code this run depends on changed since its version numbers were recorded
    (`experiments.code_versions`): the run id then names versions whose recorded code is not the code that runs."""
    if this.get("code_drift"):
        console.print(f"[yellow]warning:[/] code changed since its version number was recorded: "
                      f"{', '.join(this['code_drift'])} (`scripts/code_versions.py check` names the modules). This "
                      "run's id carries the recorded versions, its numbers may be another code's: bump or record them; "
                      "its provenance says so (code_drift).", highlight=False, soft_wrap=True)


def write_report(run: RunFolder, console: Console) -> Path | None:
    """The run's self-contained `report.html` (`report.html.write_run_report`), written once its summary is. The
    run is complete without it: a failure is said on the console (rewrite it with that function), not raised."""
    from conceptlab.report.html import write_run_report

    try:
        return write_run_report(run.root)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        console.print(f"[yellow]warning:[/] {run.root}: report.html not written ({type(err).__name__}: {err})",
                      highlight=False, soft_wrap=True)
        return None


def apply_retention(cfg: RunConfig, run: RunFolder) -> None:
    """Once a run is evaluated: drop the training state (`train.keep_training_state: false`) and the checkpoints no
    measurement used (`train.keep_checkpoints: evaluated`), recording both in `training.json` first."""
    keep_state, keep = cfg.train.keep_training_state, cfg.train.keep_checkpoints
    if keep_state and keep == "all":
        return
    record = read_json(run.training)
    drop: list[tuple[int, Path]] = []
    if keep == "evaluated":
        used = run.measured_steps()
        drop = [(s, p) for s, p in run.list_checkpoints() if s not in used]
    record["pruned"] = sorted(set(record.get("pruned", [])) | {s for s, _ in drop})
    record["training_state_removed"] = record.get("training_state_removed", False) or not keep_state
    write_json(run.training, record)
    for _, path in drop:
        path.unlink(missing_ok=True)
        path.with_suffix(".json").unlink(missing_ok=True)
    if not keep_state:
        run.train_state.unlink(missing_ok=True)


def record_timing(run: RunFolder, seconds: dict[str, float], invocation: str | None = None,
                  finished: bool = True) -> dict[str, Any]:
    """Record this invocation's seconds in the run's `timings.jsonl`, one entry per invocation (a resumed run keeps
    the seconds of the earlier ones); returns `invocations` and `seconds_all_invocations` (per part, summed).
    With `invocation` (a key naming this invocation) its earlier entry is replaced: the run driver records the
    training seconds at every checkpoint (`finished=False`, the entry marked `interrupted` until the invocation's
    last record), so an invocation that crashed or was killed still counts the training it did."""
    if run.timings.is_symlink():  # it would read (and replace) whatever the link points at
        raise SymlinkRefused(f"refusing to rewrite {run.timings}: it is a symbolic link")
    ledger, _ = read_jsonl(run.timings) if run.timings.is_file() else ([], None)  # a torn last line is dropped
    entry: dict[str, Any] = {"finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": seconds}
    if invocation is not None:
        entry["invocation"] = invocation
        ledger = [e for e in ledger if e.get("invocation") != invocation]
    if not finished:
        entry["interrupted"] = True  # until this invocation records its end
    ledger.append(entry)
    write_text(run.timings, "".join(json.dumps(entry) + "\n" for entry in ledger))
    total: dict[str, float] = {}
    for entry in ledger:
        for k, v in entry["seconds"].items():
            total[k] = round(total.get(k, 0.0) + float(v), 2)
    return {"invocations": len(ledger), "seconds_all_invocations": total}


def read_summary(run_dir: Path) -> dict:
    return RunFolder(run_dir).read_summary()
