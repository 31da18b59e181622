"""The run driver: config → data → model → train (checkpoints) → evaluate → store → report, in one run folder.

Run folder layout (the only place this layout is defined):

    runs/0003-concept-space-tiny/
      config.yaml              resolved config
      data.json                DGP summary, incl. the concept signals
      train_log.jsonl          one JSON line per logged step
      train_state.safetensors  resumable state (model, EMA, optimizer, RNG)
      checkpoints/step_*.safetensors + .json
      eval/step_*.parquet      per-checkpoint evaluation rows
      concept_space.parquet    all evaluation rows (run × checkpoint × class × concept)
      learning_times.parquet
      summary.json
      figures/*.png

Rerunning on an existing folder resumes: training continues from the last
saved state and checkpoints already evaluated are not evaluated again.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from rich.console import Console
from torch import nn

from conceptlab.analysis.concept_space import evaluate_generations, generation_prompts, learning_times
from conceptlab.data import build_dgp
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.emergence_stage import (
    check_sites,
    collect_interventions,
    intervention_stage,
    save_emergence_figures,
    summarize_emergence,
)
from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.experiments.progress import progress_bar
from conceptlab.models.diffusion_model import DiffusionModel, build_model
from conceptlab.probes.concept_classifier import load_or_train_probe
from conceptlab.report.figures import plot_accuracy, plot_concept_space, plot_loss, plot_samples
from conceptlab.store.files import read_json, read_tensors, write_json, write_parquet, write_tensors, write_text
from conceptlab.train.checkpoints import list_checkpoints, load_checkpoint, training_state_step
from conceptlab.train.precision import autocast, resolve_bf16, resolve_device
from conceptlab.train.trainer import TrainingData, iter_training, load_weights

_RUN_DIR = re.compile(r"^(\d{4,})-")


class RunFolder:
    """Paths inside one run folder."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.config = self.root / "config.yaml"
        self.data = self.root / "data.json"
        self.train_log = self.root / "train_log.jsonl"
        self.train_state = self.root / "train_state.safetensors"
        self.checkpoints = self.root / "checkpoints"
        self.eval = self.root / "eval"
        self.table = self.root / "concept_space.parquet"
        self.learning_times = self.root / "learning_times.parquet"
        self.summary = self.root / "summary.json"
        self.figures = self.root / "figures"
        self.samples = self.root / "samples.safetensors"
        self.timings = self.root / "timings.jsonl"


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


def find_unfinished_run(runs_dir: Path, cfg: RunConfig) -> Path | None:
    """The newest run folder under runs_dir with the same resolved config and no summary yet."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return None
    for path in sorted((p for p in runs_dir.iterdir() if _RUN_DIR.match(p.name)), reverse=True):
        folder = RunFolder(path)
        if folder.config.is_file() and not folder.summary.is_file():
            if load_config(str(folder.config)).model_dump() == cfg.model_dump():
                return path
    return None


def _truncate_log(path: Path, after_step: int) -> None:
    """Drop log lines past the resumed step, so a resumed run's log has no duplicates."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= after_step]
    write_text(path, "".join(line + "\n" for line in kept))


def train_stage(cfg: RunConfig, folder: RunFolder, dgp, model, console: Console, progress: bool) -> float:
    """Train (or resume training) and return the seconds spent."""
    state_step = training_state_step(folder.train_state)
    _truncate_log(folder.train_log, state_step)
    if state_step >= cfg.train.steps:
        return 0.0
    if state_step:
        done = len(list_checkpoints(folder.checkpoints))
        console.print(f"resuming training from step {state_step} ({done} checkpoints on disk)")
    dataset = dgp.training_set()
    data = TrainingData(dataset.images, dataset.prompts, cfg.data.null_value)
    began = time.perf_counter()
    records = iter_training(
        model,
        data,
        cfg.train,
        folder.checkpoints,
        folder.train_state,
        cfg_dropout=cfg.diffusion.cfg_dropout,
        config_hash=cfg.training_hash(),
    )
    with progress_bar(console, progress) as bar, folder.train_log.open("a") as log:
        task = bar.add_task("train", total=cfg.train.steps, completed=state_step, info="")
        for rec in records:
            if rec.step % cfg.train.log_every == 0 or rec.checkpoint is not None or rec.step == cfg.train.steps:
                log.write(json.dumps({"step": rec.step, "loss": rec.loss, **rec.metrics, "seconds": rec.seconds}) + "\n")
                log.flush()
            bar.update(task, completed=rec.step, info=f"loss {rec.loss:.4f}")
    return time.perf_counter() - began


def evaluate_stage(cfg: RunConfig, folder: RunFolder, dgp, model, probe, console: Console, progress: bool) -> float:
    """Generate and read samples at every checkpoint not yet evaluated; returns seconds spent."""
    checkpoints = list_checkpoints(folder.checkpoints)
    todo = [(s, p) for s, p in checkpoints if not (folder.eval / f"step_{s:07d}.parquet").is_file()]
    if not todo:
        return 0.0
    classes = list(dgp.classes)
    splits = {c: ("train" if c in dgp.train_classes else "held_out") for c in classes}
    n = cfg.eval.samples_per_class
    device = next(model.parameters()).device
    prompts = generation_prompts(torch.stack([dgp.class_prompt(c) for c in classes]), n).to(device)
    null_prompt = torch.full_like(prompts[:1], cfg.data.null_value)
    steps = cfg.eval.sample_steps or cfg.diffusion.sample_steps
    began = time.perf_counter()
    model.eval()
    samples: dict[str, torch.Tensor] = {}
    with progress_bar(console, progress) as bar:
        task = bar.add_task("evaluate", total=len(checkpoints), completed=len(checkpoints) - len(todo), info="")
        for step, path in todo:
            tensors, _ = load_checkpoint(path)
            load_weights(model, tensors, use_ema=cfg.eval.use_ema)
            generator = torch.Generator(device=prompts.device).manual_seed(cfg.eval.eval_seed)
            with autocast(resolve_bf16(cfg.train.bf16, device), device):
                images = model.sample(prompts, steps, generator, cfg.diffusion.guidance_scale, null_prompt)
            images = images.float().cpu()
            table = evaluate_generations(images, classes, splits, dgp.concepts, probe, step)
            write_parquet(folder.eval / f"step_{step:07d}.parquet", table)
            samples[f"step_{step:07d}"] = images[::n].clone()  # first generation of each class
            mean_acc = table.groupby("split")["accuracy"].mean().to_dict()
            bar.update(task, advance=1, info=" ".join(f"{k} {v:.2f}" for k, v in mean_acc.items()))
    if samples:
        old = read_tensors(folder.samples) if folder.samples.is_file() else {}
        write_tensors(folder.samples, {**old, **samples})
    return time.perf_counter() - began


def build_run_model(cfg: RunConfig, dgp) -> DiffusionModel:
    """The model a run trains, shaped by its data (prompt width, channels, attribute blocks, null value)."""
    null_value = None if cfg.data.kind == "shapes" else cfg.data.null_value
    return build_model(
        cfg.model, cfg.diffusion, dgp.prompt_dim, dgp.image_size, dgp.channels, dgp.attribute_sizes, null_value
    )


@dataclass(frozen=True)
class Evaluation:
    """One data kind's evaluation, as the runner calls it.

    `check(cfg, model)` fails fast (before training) on what would only break later, e.g. an unknown hook point;
    `run(cfg, run_dir, dgp, model, console, progress)` evaluates the run's checkpoints (resumably) and returns
    (summary fields, seconds per stage).
    """

    check: Callable[[RunConfig, nn.Module], None]
    run: Callable[..., tuple[dict[str, Any], dict[str, float]]]


def evaluation_for(kind: str) -> Evaluation:
    """The evaluation of data kind `kind`: concept space (shapes), composition + geometry (bumps), abstractions
    (shapes3d)."""
    if kind == "shapes":
        return Evaluation(check_sites, concept_space_evaluation)
    if kind == "bumps":
        from conceptlab.experiments import composition_stage

        return Evaluation(composition_stage.check, composition_stage.evaluate)
    if kind == "shapes3d":
        from conceptlab.experiments import abstractions_stage

        return Evaluation(abstractions_stage.check, abstractions_stage.evaluate)
    raise ValueError(f"no evaluation for data kind {kind!r}")


def _headline(cfg: RunConfig, dgp, data_summary: dict) -> str:
    if cfg.data.kind == "shapes":
        return f"{len(dgp.train_classes)} training classes, held out {dgp.held_out_classes}"
    return f"{data_summary.get('training_images', '?')} training images"


def run_experiment(cfg: RunConfig, run_dir: Path, progress: bool = True, console: Console | None = None) -> dict:
    """Run (or resume) the whole pipeline in `run_dir`; returns the summary dict."""
    console = console or Console()
    folder = RunFolder(run_dir)
    folder.root.mkdir(parents=True, exist_ok=True)
    if folder.config.is_file():
        saved = load_config(str(folder.config))
        if saved.model_dump() != cfg.model_dump():
            raise ValueError(f"{run_dir} holds a run with a different config; start a new run folder instead")
    else:
        write_text(folder.config, config_to_yaml(cfg))
    began = time.perf_counter()
    dgp = build_dgp(cfg.data)
    data_summary = dgp.describe()
    write_json(folder.data, data_summary)
    torch.manual_seed(cfg.train.train_seed)
    device = resolve_device(cfg.train.device)
    model = build_run_model(cfg, dgp).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    console.print(f"[bold]{cfg.name}[/] → {folder.root}  ({n_params / 1e6:.2f} M parameters, {_headline(cfg, dgp, data_summary)})")
    evaluation = evaluation_for(cfg.data.kind)
    evaluation.check(cfg, model)
    train_seconds = train_stage(cfg, folder, dgp, model, console, progress)
    summary, seconds = evaluation.run(cfg, folder.root, dgp, model, console, progress)
    summary = {
        "run": folder.root.name,
        "name": cfg.name,
        "kind": cfg.data.kind,
        "config_hash": cfg.training_hash(),
        **({"training_images": data_summary["training_images"]} if "training_images" in data_summary else {}),
        **summary,
        "parameters": n_params,
        "device": str(device),
        "bf16": resolve_bf16(cfg.train.bf16, device),
        "threads": torch.get_num_threads(),
        "seconds": {
            "train": round(train_seconds, 2),
            **{k: round(v, 2) for k, v in seconds.items()},
            "total": round(time.perf_counter() - began, 2),
        },
    }
    summary.update(record_timing(folder, summary["seconds"]))
    write_json(folder.summary, summary)
    return summary


def record_timing(folder: RunFolder, seconds: dict[str, float]) -> dict[str, Any]:
    """Append this invocation's seconds to the run's `timings.jsonl` (a resumed run keeps the seconds of the earlier
    invocations that finished); returns `invocations` and `seconds_all_invocations` (per part, summed)."""
    with folder.timings.open("a") as f:
        f.write(json.dumps({"finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": seconds}) + "\n")
    ledger = [json.loads(line) for line in folder.timings.read_text().splitlines() if line.strip()]
    total: dict[str, float] = {}
    for entry in ledger:
        for k, v in entry["seconds"].items():
            total[k] = round(total.get(k, 0.0) + float(v), 2)
    return {"invocations": len(ledger), "seconds_all_invocations": total}


def concept_space_evaluation(
    cfg: RunConfig, run_dir: Path, dgp, model, console: Console, progress: bool
) -> tuple[dict[str, Any], dict[str, float]]:
    """`shapes` data: probe, concept-space evaluation of every checkpoint, interventions if configured."""
    folder = RunFolder(run_dir)
    probe_began = time.perf_counter()
    probe, probe_report = load_or_train_probe(cfg.eval.probe, list(dgp.concepts), cfg.data.image_size, progress=progress)
    probe_seconds = time.perf_counter() - probe_began
    eval_seconds = evaluate_stage(cfg, folder, dgp, model, probe, console, progress)
    intervention_seconds = intervention_stage(cfg, folder.root, dgp, model, probe, console, progress)
    summary = finalize(cfg, folder, read_json(folder.data), probe_report)  # written by run_experiment
    seconds = {"probe": probe_seconds, "evaluate": eval_seconds, "interventions": intervention_seconds}
    return summary, seconds


def finalize(cfg: RunConfig, folder: RunFolder, data_summary: dict, probe_report: dict) -> dict[str, Any]:
    """Collect per-checkpoint tables, compute learning times, draw figures; returns the summary."""
    parts = sorted(folder.eval.glob("step_*.parquet"))
    table = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True) if parts else pd.DataFrame()
    if table.empty:
        raise RuntimeError(f"no evaluated checkpoints in {folder.eval}")
    table.insert(0, "run", folder.root.name)
    write_parquet(folder.table, table)
    times = learning_times(table, cfg.eval.accuracy_threshold, cfg.eval.smoothing, cfg.eval.stay)
    write_parquet(folder.learning_times, times)
    final_step = table["step"].max()
    final = table[table["step"] == final_step]
    figures = save_run_figures(folder, table, cfg)
    emergence = None
    if cfg.eval.interventions is not None:
        best = collect_interventions(cfg, folder.root)
        if best is not None:
            emergence = summarize_emergence(cfg, best, table)
            figures += save_emergence_figures(cfg, folder.root, best, table, emergence)
    summary = {
        "concepts": list(data_summary.get("concepts", [])),
        "concept_signal": data_summary.get("concept_signal", {}),
        "train_classes": data_summary.get("train_classes"),
        "held_out_classes": data_summary.get("held_out_classes"),
        "checkpoints": int(table["step"].nunique()),
        "final_step": int(final_step),
        "learning_time": {
            f"{r.split}/{r.concept}": (None if pd.isna(r.learning_time) else int(r.learning_time))
            for r in times.itertuples()
        },
        "mean_accuracy": {f"{r.split}/{r.concept}": round(r.mean_accuracy, 4) for r in times.itertuples()},
        "final_accuracy": {
            f"{r['class']}/{r['concept']}": round(float(r["accuracy"]), 4) for _, r in final.iterrows()
        },
        "final_valid_fraction": {
            c: round(float(g["valid_fraction"].iloc[0]), 4) for c, g in final.groupby("class")
        },
        "probe": probe_report,
        "figures": [str(p.relative_to(folder.root)) for p in figures],
    }
    if emergence is not None:
        summary["emergence"] = emergence
    return summary


def save_run_figures(folder: RunFolder, table: pd.DataFrame, cfg: RunConfig) -> list[Path]:
    """Draw the run's figures from its tables and write them as PNG under figures/."""
    import matplotlib.pyplot as plt

    folder.figures.mkdir(exist_ok=True)
    classes = list(dict.fromkeys(table.sort_values("class")["class"]))
    concepts = list(dict.fromkeys(table["concept"]))
    samples = read_tensors(folder.samples) if folder.samples.is_file() else {}
    by_step = {int(k.split("_")[1]): v.permute(0, 2, 3, 1).float().numpy() for k, v in samples.items()}
    figures = {"accuracy.png": plot_accuracy(table, cfg.eval.accuracy_threshold)}
    if len(concepts) >= 2:
        last = by_step[max(by_step)] if by_step else None
        thumbs = {c: last[i] for i, c in enumerate(classes)} if last is not None and len(last) == len(classes) else None
        figures["concept_space.png"] = plot_concept_space(table, concepts, thumbs)
    if folder.train_log.is_file():
        log = pd.read_json(folder.train_log, lines=True)
        if not log.empty:
            figures["loss.png"] = plot_loss(log)
    if by_step:
        keep = sorted(by_step)
        keep = [keep[round(i)] for i in np.linspace(0, len(keep) - 1, min(8, len(keep)))]
        figures["samples.png"] = plot_samples({s: by_step[s] for s in dict.fromkeys(keep)}, classes)
    paths = []
    for name, fig in figures.items():
        path = folder.figures / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def read_summary(run_dir: Path) -> dict:
    folder = RunFolder(run_dir)
    if not folder.summary.is_file():
        raise FileNotFoundError(f"{run_dir} has no summary.json (run unfinished? resume it with conceptlab resume)")
    return read_json(folder.summary)
