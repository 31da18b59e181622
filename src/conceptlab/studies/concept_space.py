"""The `shapes` study (Park et al. 2024): concept-space trajectories, learning times and hidden emergence.

Its one job: turn a concept-space run's checkpoints into the concept-space measurements. The concept probe (one
head per concept plus a validity head; cached per machine) reads the generations. Per checkpoint (resumable through
the run driver):

- **concept space** (`eval/step_*.parquet`): `samples_per_class` generations of every class prompt, read into a
  concept-space point and a per-concept accuracy (`analysis.concept_space.evaluate_generations`); the first
  generation of each class goes to `samples.safetensors`;
- **interventions** (with `eval.interventions`; `studies.emergence`): every intervention on every target class.

At the end: `concept_space.parquet` (run × checkpoint × class × concept), `learning_times.parquet` (the first
checkpoint where the smoothed accuracy crosses `accuracy_threshold` and stays `stay` checkpoints), the summary's
learning times and accuracies, the hidden-emergence block and tables (`interventions.parquet`,
`emergence.parquet`), and the figures.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
import torch
from pydantic import Field

from conceptlab.analysis.concept_space import evaluate_generations, generation_prompts, learning_times
from conceptlab.data.shapes import RENDER_PEAK, ShapesDataConfig, ShapesDGP, check_class_code, code_as_string
from conceptlab.interventions.config import InterventionsConfig
from conceptlab.probes.concept_classifier import MAX_JITTER as PROBE_MAX_JITTER
from conceptlab.probes.concept_classifier import ProbeConfig, load_or_train_probe, probe_memory
from conceptlab.store.files import read_tensors
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies.base import (
    Evaluation,
    Measurement,
    MemoryNeeds,
    StepResult,
    StudyBase,
    Summary,
    eval_noise_seed,
    read_step_tables,
)
from conceptlab.studies.emergence import (
    check_prompt_variants,
    check_sites,
    collect_interventions,
    emergence_figures,
    intervention_measurement,
    summarize_emergence,
)
from conceptlab.train.precision import autocast, resolve_bf16

DIRECTORY = "eval"  # per checkpoint: eval/step_XXXXXXX.parquet
SAMPLES_FILE = "samples.safetensors"


def _check_interventions(cfg) -> None:
    """Interventions name concepts and classes of the data, and CFG needs a model trained with label dropout."""
    iv = cfg.eval.interventions
    if iv is None:
        return
    concepts = cfg.data.concepts
    named = {
        "over_prompting.concepts": iv.over_prompting.concepts if iv.over_prompting else [],
        "linear.boost": iv.linear.boost if iv.linear else [],
        "linear.suppress": iv.linear.suppress if iv.linear else [],
        "embedding_shift.boost": iv.embedding_shift.boost if iv.embedding_shift else [],
        "embedding_shift.suppress": iv.embedding_shift.suppress if iv.embedding_shift else [],
    }
    for where, values in named.items():
        for c in values:
            if c not in concepts:
                raise ValueError(f"eval.interventions.{where} names {c!r}, not one of data.concepts {concepts}")
    if iv.targets is not None:  # an int (YAML's reading of an unquoted 11) padded, a string taken as written
        padded = [code_as_string(c, len(concepts)) for c in iv.targets]
        if padded != iv.targets:
            iv.targets = padded
        for code in iv.targets:
            check_class_code("eval.interventions.targets", code, concepts)
    if iv.targets is None and not cfg.data.resolved_held_out_classes():
        raise ValueError("eval.interventions has no targets: no class is held out; set eval.interventions.targets")
    if iv.cfg is not None and cfg.diffusion.cfg_dropout <= 0:
        raise ValueError("eval.interventions.cfg needs a model trained with label dropout: diffusion.cfg_dropout > 0")
    if not (iv.naive or iv.over_prompting or iv.linear or iv.embedding_shift or iv.patching or iv.cfg or iv.custom):
        raise ValueError("eval.interventions enables no intervention")


def probe_range_warnings(cfg) -> list[str]:
    """One line for each way the run's data lie outside what the concept probe was trained on: a concept's
    separation outside [eval.probe.separation_min, separation_max], or data.jitter above the probe's 1. Its readings
    there are extrapolations (at Δ near 0 a class's exact mean may read as either value); a warning, not an error:
    shipped sweeps go there on purpose (concept-signal-sweep-paper's Δc 0.05 and 0.85–1)."""
    d, probe = cfg.data, cfg.eval.probe
    lo, hi = probe.separation_min, probe.separation_max
    out = []
    for concept in d.concepts:
        key = f"{concept}_separation"
        value = getattr(d, key, None)  # shape has no separation
        if value is not None and not lo <= value <= hi:
            out.append(f"data.{key}={value} lies outside [{lo}, {hi}], the separations the concept probe was "
                       f"trained on (eval.probe.separation_min/max): its {concept} readings there are extrapolated")
    if d.jitter > PROBE_MAX_JITTER:
        out.append(f"data.jitter={d.jitter} is above {PROBE_MAX_JITTER}, the largest jitter the concept probe was "
                   "trained on: generations near the class boundary may be misread")
    return out


def run_figures(cfg, run: RunFolder, table: pd.DataFrame, times: pd.DataFrame | None = None,
                value_names: dict | None = None) -> dict[str, Any]:
    """Accuracy over training (learning times marked where the rule puts them), concept space (with the last
    generations as thumbnails) and samples by checkpoint (columns named by class); none under
    `CONCEPTLAB_FIGURES=none`."""
    from conceptlab.report.figures import plot_accuracy, plot_concept_space, plot_samples
    from conceptlab.report.names import class_label, class_names_of
    from conceptlab.report.save import figures_wanted

    if not figures_wanted():
        return {}
    classes = list(dict.fromkeys(table.sort_values("class")["class"]))
    concepts = list(dict.fromkeys(table["concept"]))
    samples_path = run.file(SAMPLES_FILE)
    samples = read_tensors(samples_path) if samples_path.is_file() else {}
    by_step = {int(k.split("_")[1]): v.permute(0, 2, 3, 1).float().numpy() for k, v in samples.items()}
    figures = {"accuracy.png": plot_accuracy(table, cfg.eval.accuracy_threshold, times, cfg.eval.smoothing,
                                             cfg.eval.stay)}
    if len(concepts) >= 2:
        last = by_step[max(by_step)] if by_step else None
        thumbs = {c: last[i] for i, c in enumerate(classes)} if last is not None and len(last) == len(classes) else None
        figures["concept_space.png"] = plot_concept_space(table, concepts, thumbs, value_names)
    if by_step:
        keep = sorted(by_step)
        keep = [keep[round(i)] for i in np.linspace(0, len(keep) - 1, min(8, len(keep)))]
        names = class_names_of(table)
        figures["samples.png"] = plot_samples({s: by_step[s] for s in dict.fromkeys(keep)},
                                              [class_label(c, names) for c in classes])
    return figures


def summarize(cfg, run: RunFolder, data_summary: dict, probe_report: dict) -> Summary:
    """Run-level tables, learning times, the emergence block (with interventions) and the figures."""
    table = read_step_tables(run, DIRECTORY)
    table.insert(0, "run", run.name)
    times = learning_times(table, cfg.eval.accuracy_threshold, cfg.eval.smoothing, cfg.eval.stay)
    final_step = table["step"].max()
    final = table[table["step"] == final_step]
    tables = {"concept_space": table, "learning_times": times}
    figures = run_figures(cfg, run, table, times, data_summary.get("value_names"))
    emergence = None
    if cfg.eval.interventions is not None:
        collected = collect_interventions(run)
        if collected is not None:
            interventions, best = collected
            tables.update(interventions=interventions, emergence=best)
            emergence, matched = summarize_emergence(cfg, best, table, interventions)
            names = data_summary.get("class_names", {})
            for code, entry in emergence["targets"].items():
                entry["name"] = names.get(code, code)
                if entry.get("memorization"):
                    entry["memorization"]["read_as_name"] = names.get(entry["memorization"]["read_as"])
            if not matched.empty:
                matched.insert(0, "run", run.name)
                tables["matched_naive"] = matched
            shown = best[best["intervention"] != "naive_repeats"]  # the baseline's batches, not an intervention
            figures.update(emergence_figures(cfg, run, interventions, shown, table, emergence))
    fields = {
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
    }
    if emergence is not None:
        fields["emergence"] = emergence
    return Summary(fields, tables=tables, figures=figures)


class ConceptSpaceStudy(StudyBase):
    """`data.kind: shapes` — concept-space learning dynamics and hidden capabilities."""

    uses_cache = True  # its concept probe is trained once per machine and cached (CelebA: also its decoded faces)
    kind = "shapes"
    version = 3  # 1: before versions entered run ids (2026-12-01); 2: 2026-12-01; 3: plain (non-CFG) intervention
    summary_sections = frozenset({"concepts", "concept_signal", "train_classes", "held_out_classes", "learning_time",
                                  "mean_accuracy", "final_accuracy", "final_valid_fraction", "probe", "emergence"})
    run_tables = {
        "concept_space": ("run", "step", "class", "split", "concept", "target", "p_one", "accuracy", "valid_fraction",
                          "n", "class_name"),
        "learning_times": ("split", "concept", "learning_time", "final_accuracy", "mean_accuracy", "threshold"),
        "interventions": ("run", "step", "target", "intervention", "variant", "guidance_scale", "stream", "n", "score",
                          "hit_rate", "valid_fraction", "p_<concept>", "image_scores", "target_name"),
        "emergence": ("run", "target", "intervention", "step", "variant", "score", "hit_rate", "valid_fraction", "n"),
        "matched_naive": ("run", "step", "score", "n", "stream", "target", "k"),
    }
    # variants sample the conditional model under every guidance convention (under `diffusers` they had sampled the
    # unconditional one: scale 0)
    order = 0
    data_config = ShapesDataConfig
    # The concept-space reading's settings sit at the top of `eval` (and are saved for every data kind), as they
    # did before studies existed, so saved configs and run ids stay as they were.
    eval_fields = {
        "samples_per_class": (int, Field(32, ge=1)),
        "sample_steps": (int | None, Field(None, ge=1, description="override diffusion.sample_steps for evaluation")),
        "use_ema": (bool, Field(True)),
        "accuracy_threshold": (float, Field(0.9, gt=0.0, le=1.0)),
        "smoothing": (int, Field(3, ge=1, description="moving-average window over checkpoints")),
        "stay": (int, Field(3, ge=1, description="checkpoints the smoothed accuracy must stay above threshold")),
        "eval_seed": (int, Field(0, ge=0)),
        "probe": (ProbeConfig, Field(default_factory=ProbeConfig)),
        "interventions": (
            InterventionsConfig | None,
            Field(None, description="hidden-capability evaluation (None: concept-space evaluation only)"),
        ),
    }
    exclusive_sections = frozenset({"interventions"})

    def complete_config(self, cfg) -> None:
        _check_interventions(cfg)

    def build_data(self, cfg: ShapesDataConfig) -> ShapesDGP:
        return ShapesDGP(cfg)

    def check(self, cfg, dgp, model) -> None:
        """The intervention sites and prompt variants."""
        check_sites(cfg, model)
        check_prompt_variants(cfg, dgp, model)

    def config_warnings(self, cfg) -> list[str]:
        """Where the run's data lie outside what its probe was trained on (`probe_range_warnings`)."""
        return probe_range_warnings(cfg)

    def sample_step_settings(self, cfg) -> dict[str, int]:
        """The evaluation's sampler step count, where it overrides the diffusion section's."""
        return {"eval.sample_steps": cfg.eval.sample_steps} if cfg.eval.sample_steps else {}

    def headline(self, cfg, dgp: ShapesDGP) -> str:
        held = ", ".join(f"{c} ({dgp.class_name(c)})" for c in dgp.held_out_classes) or "none"
        return f"{len(dgp.train_classes)} training classes ({', '.join(dgp.train_classes)}), held out {held}"

    def memory_needs(self, cfg) -> MemoryNeeds:
        """The training data (`data_bytes`) and the probe (`probe_bytes`), counted whether or not it is cached
        already; the generations of a checkpoint: every class's samples, and every intervention variant's images.
        The largest pass (`eval_batch`) is the intervention pass as the run's device takes it (`images_per_pass`),
        doubled where a pass is guided (a nonzero guidance offset, or classifier-free guidance variants)."""
        from conceptlab.models.processes import guidance_offset
        from conceptlab.studies.emergence import images_per_pass

        d, e = cfg.data, cfg.eval
        image = 3 * d.image_size**2 * 4
        iv = e.interventions
        offset = guidance_offset(cfg.diffusion.guidance_scale, cfg.diffusion.guidance_convention)
        guided = 2 if offset != 0.0 or (iv is not None and iv.cfg is not None) else 1
        batch = e.samples_per_class * 2 ** len(d.concepts)
        generated = batch * image
        if iv is not None:
            cuda = cfg.train.device != "cpu" and torch.cuda.is_available()  # as `resolve_device` picks it
            targets = len(iv.targets or d.resolved_held_out_classes())
            generated += _variant_count(iv) * targets * iv.samples * image
            batch = max(batch, max(images_per_pass(iv, torch.device("cuda" if cuda else "cpu")), iv.samples))
        return MemoryNeeds(
            data=self.data_bytes(cfg), evaluation=max(self.probe_bytes(cfg), 2 * generated), eval_batch=batch * guided,
            data_keys="data.images_per_class, data.image_size",
            eval_keys="eval.samples_per_class, eval.probe.images_per_class, data.image_size" + (
                ", eval.interventions.samples, eval.interventions.max_batch" if iv is not None else ""),
        )

    def data_bytes(self, cfg) -> int:
        """Training renders: `RENDER_PEAK` × the float images."""
        d = cfg.data
        return len(d.resolved_train_classes()) * d.images_per_class * 3 * d.image_size**2 * 4 * RENDER_PEAK

    def probe_bytes(self, cfg) -> int:
        """The concept probe's training and evaluation renders and its passes (measured on the meta device)."""
        return probe_memory(cfg.eval.probe, list(cfg.data.concepts), cfg.data.image_size)

    def probe(self, cfg, dgp=None, progress: bool = False):
        """(the probe that reads this study's generations, its report): the concept probe trained on renders,
        cached per machine (`dgp` is not needed: the renders come from the config)."""
        return load_or_train_probe(cfg.eval.probe, list(cfg.data.concepts), cfg.data.image_size, progress=progress)

    def prepare_shared(self, cfg, progress: bool = False) -> None:
        """Train (or find cached) the probe once, before sweep workers start and all load it."""
        self.probe(cfg, progress=progress)

    def evaluation(self, cfg, dgp: ShapesDGP, model, run: RunFolder, console, progress) -> Evaluation:
        began = time.perf_counter()
        probe, probe_report = self.probe(cfg, dgp, progress)
        setup = {"probe": time.perf_counter() - began}
        measurements = [concept_space_measurement(cfg, dgp, model, probe)]
        if cfg.eval.interventions is not None:
            measurements.append(intervention_measurement(cfg, dgp, model, probe, run.list_checkpoints()))
        return Evaluation(measurements, lambda: summarize(cfg, run, dgp.describe(), probe_report), setup)


def concept_space_measurement(cfg, dgp: ShapesDGP, model, probe) -> Measurement:
    """The per-checkpoint concept-space reading: `samples_per_class` generations of every class prompt in one
    sampling pass (bf16 autocast where native), read by `probe` into the class × concept table."""
    classes = list(dgp.classes)
    splits = {c: ("train" if c in dgp.train_classes else "held_out") for c in classes}
    n = cfg.eval.samples_per_class
    device = next(model.parameters()).device
    prompts = generation_prompts(torch.stack([dgp.class_prompt(c) for c in classes]), n).to(device)
    null_prompt = torch.full_like(prompts[:1], cfg.data.null_value)
    steps = cfg.eval.sample_steps or cfg.diffusion.sample_steps
    bf16 = resolve_bf16(cfg.train.bf16, device)

    def concept_space(step: int) -> StepResult:
        generator = torch.Generator(device=prompts.device).manual_seed(eval_noise_seed(cfg.eval.eval_seed, cfg))
        with autocast(bf16, device):
            images = model.sample(prompts, steps, generator, cfg.diffusion.guidance_scale, null_prompt)
        images = images.float().cpu()
        table = evaluate_generations(images, classes, splits, dgp.concepts, probe, step)
        table["class_name"] = table["class"].map(dgp.class_name)
        mean_acc = table.groupby("split")["accuracy"].mean().to_dict()
        scalars = {f"accuracy/{split}": v for split, v in mean_acc.items()}
        scalars.update({f"accuracy/{r.class_name}/{r.concept}": r.accuracy for r in table.itertuples()})
        scalars.update({f"valid_fraction/{r.class_name}": r.valid_fraction
                        for r in table.drop_duplicates("class").itertuples()})
        return StepResult(table, samples={f"step_{step:07d}": images[::n].clone()},  # first generation per class
                          info=" ".join(f"{k} {v:.2f}" for k, v in mean_acc.items()), scalars=scalars)

    return Measurement("concept_space", concept_space, every=1, use_ema=cfg.eval.use_ema, directory=DIRECTORY,
                       samples_file=SAMPLES_FILE)


def _variant_count(iv: InterventionsConfig) -> int:
    """Variants an interventions section samples per target (each of `iv.samples` images), naive repeats included."""
    counts = [1 if iv.naive else 0]
    if iv.over_prompting is not None:
        counts.append(len(iv.over_prompting.scales))
    for section in (iv.linear, iv.embedding_shift):
        if section is not None:
            counts.append(len(section.alphas) * len(section.betas))
    counts.append(1 if iv.patching is not None else 0)
    counts.append(len(iv.cfg.scales) if iv.cfg is not None else 0)
    counts.extend(4 for _ in iv.custom)  # a plug-in's variants are unknown before it runs: a few each
    repeats = max(counts) - 1 if iv.matched_naive and iv.naive else 0
    return sum(counts) + repeats


STUDY = ConceptSpaceStudy()
