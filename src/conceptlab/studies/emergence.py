"""Hidden emergence, the interventions part of the `shapes` study: interventions at every (k-th) checkpoint, then
emergence, turn and memorization. Used by `studies.concept_space` when the config has `eval.interventions`.

Files (run folder):

    interventions/step_*.parquet     per checkpoint: target × intervention × variant scores
    interventions.parquet            all of them, with the run id
    emergence.parquet                per target × intervention × checkpoint: the best variant's score
    intervention_samples.safetensors a few uint8 generations per variant and checkpoint

`summarize_emergence` turns those and the concept-space table into the summary's "emergence" block: emergence step
per intervention (Wilson lower bound over `samples` images crossing `threshold` and staying `stay` checkpoints),
capability gap, the held-out trajectory's sudden turn, the memorization phase, and the gated-flow fit of finding 6.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from conceptlab.analysis.emergence import capability_gap, emergence_step, memorization_phase, sudden_turn
from conceptlab.analysis.phenomenology import fit_gated_flow
from conceptlab.hooks import hook_points
from conceptlab.analysis.emergence_stats import (
    EmergenceRule,
    gap_interval,
    matched_baseline,
    variants_per_intervention,
)
from conceptlab.interventions import (
    InterventionContext,
    InterventionError,
    build_interventions,
    build_variants,
    concept_embeddings,
    evaluate_interventions,
)
from conceptlab.interventions.prompting import NaiveRepeats, OverPrompting
from conceptlab.store.files import read_parquet, read_tensors
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies.base import Measurement, StepResult, eval_noise_seed
from conceptlab.train.checkpoints import load_checkpoint
from conceptlab.train.precision import autocast, resolve_bf16
from conceptlab.train.trainer import load_weights

SAMPLES_KEPT = 2  # generations kept per variant and checkpoint for the figures
DIRECTORY = "interventions"
SAMPLES_FILE = "intervention_samples.safetensors"


def check_sites(cfg, model) -> None:
    """Fail before training when an intervention names a concept embedding site the network does not have."""
    iv = cfg.eval.interventions
    if iv is None:
        return
    sites = sorted(name for name in hook_points(model.net) if name.endswith("hook_concept"))
    for where, named in (("linear", iv.linear), ("embedding_shift", iv.embedding_shift), ("patching", iv.patching)):
        for site in (named.sites or []) if named is not None else []:
            if site not in sites:
                raise InterventionError(
                    f"eval.interventions.{where}.sites: no concept embedding site {site!r}; sites are {sites}"
                )


def check_prompt_variants(cfg, dgp, model) -> None:
    """Fail before training when over-prompting cannot build its variants for a target (the authors' colors for a
    target of the other color, a concept the data does not have): they depend on the data alone, so the error is
    known now, not after training at the first checkpoint's measurement."""
    iv = cfg.eval.interventions
    if iv is None or iv.over_prompting is None:
        return
    prompting = [i for i in build_interventions(iv, cfg.diffusion.guidance_convention) if isinstance(i, OverPrompting)]
    context = intervention_context(cfg, dgp, model)
    for target in iv.targets or dgp.held_out_classes:
        for intervention in prompting:
            intervention.variants(target, context)


def _reference_model(cfg, model, checkpoints: list[tuple[int, Path]]):
    iv = cfg.eval.interventions
    if iv is None or iv.patching is None:
        return None
    source = iv.patching.source
    by_step = dict(checkpoints)
    if source == "final":
        path = checkpoints[-1][1]
    elif source in by_step:
        path = by_step[source]
    else:
        raise ValueError(f"eval.interventions.patching.source: no checkpoint at step {source}; have {sorted(by_step)}")
    reference = copy.deepcopy(model)
    load_weights(reference, load_checkpoint(path, cfg.training_hash())[0], use_ema=cfg.eval.use_ema)
    return reference.eval()


def intervention_context(cfg, dgp, model, reference=None) -> InterventionContext:
    """What interventions may ask at a checkpoint: the data's classes and prompts, embeddings of `model`
    (whatever weights it holds when asked) and of `reference` (None: no patching possible)."""
    return InterventionContext(
        concepts=list(dgp.concepts),
        classes=list(dgp.classes),
        train_classes=list(dgp.train_classes),
        class_prompt=dgp.class_prompt,
        null_prompt=torch.full((dgp.prompt_dim,), cfg.data.null_value),
        embed=lambda prompts: concept_embeddings(model, prompts),
        embed_reference=(lambda prompts: concept_embeddings(reference, prompts)) if reference is not None else None,
        trained_with_null_prompt=cfg.diffusion.cfg_dropout > 0,
        canonical_prompt=getattr(dgp, "canonical_prompt", None),
        prompt_slices=dgp.prompt_slices() if hasattr(dgp, "prompt_slices") else None,
    )


def images_per_pass(iv, device: torch.device) -> int:
    """Images per sampling pass of the intervention evaluation: `max_batch`, at most `cpu_max_batch` (when set) on a
    CPU under per-variant noise (there the packing changes an image only by float rounding, so only the speed
    changes)."""
    if device.type == "cpu" and iv.noise == "per_variant" and iv.cpu_max_batch is not None:
        return min(iv.max_batch, iv.cpu_max_batch)
    return iv.max_batch


def intervention_measurement(cfg, dgp, model, probe, checkpoints: list[tuple[int, Path]]) -> Measurement:
    """The per-checkpoint measurement: every configured intervention on every target, scored with the probe."""
    iv = cfg.eval.interventions
    interventions = build_interventions(iv, cfg.diffusion.guidance_convention)
    targets = list(iv.targets or dgp.held_out_classes)
    device = next(model.parameters()).device
    steps = cfg.eval.sample_steps or cfg.diffusion.sample_steps
    bf16 = resolve_bf16(cfg.train.bf16, device)
    state: dict[str, InterventionContext] = {}

    def measure(step: int) -> StepResult:
        if "context" not in state:  # the patching reference is loaded once, when first needed
            state["context"] = intervention_context(cfg, dgp, model, _reference_model(cfg, model, checkpoints))
            state["interventions"] = (with_naive_repeats(interventions, targets, state["context"])
                                      if iv.matched_naive else interventions)
        seed = eval_noise_seed(iv.seed, cfg)
        generator = torch.Generator(device=device).manual_seed(seed)
        noise_seed = seed if iv.noise == "per_variant" else None
        with autocast(bf16, device):
            table, images = evaluate_interventions(
                model, state["interventions"], targets, state["context"], probe, iv.samples, steps, generator,
                images_per_pass(iv, device), noise_seed=noise_seed,
            )
        table.insert(0, "step", step)
        if hasattr(dgp, "class_name"):
            table["target_name"] = table["target"].map(dgp.class_name)
        n = iv.samples
        keep = torch.cat([images[k * n : k * n + min(SAMPLES_KEPT, n)] for k in range(len(table))])
        best = table.groupby("intervention", sort=False)["score"].max()
        by_target = table.groupby(["target", "intervention"], sort=False)["score"].max()
        names = dict(zip(table["target"], table["target_name"])) if "target_name" in table.columns else {}
        scalars = {f"score/{names.get(t, t)}/{i}": float(v) for (t, i), v in by_target.items()}
        return StepResult(table, samples={f"step_{step:07d}": (keep * 255).round().to(torch.uint8)},
                          info=" ".join(f"{k} {v:.2f}" for k, v in best.items()), scalars=scalars)

    return Measurement("interventions", measure, every=iv.every, use_ema=cfg.eval.use_ema, directory=DIRECTORY,
                       samples_file=SAMPLES_FILE)


def with_naive_repeats(interventions: list, targets: list[str], context: InterventionContext) -> list:
    """`interventions` plus naive prompting on streams 1..k−1 (`NaiveRepeats`), k the most variants any of them has
    for a target: what the bias-matched baseline of every intervention needs."""
    counts = Counter(v.intervention for _, v in build_variants(interventions, targets, context))
    k = max((c // len(targets) for name, c in counts.items() if name != "naive"), default=1)
    return [*interventions, NaiveRepeats(k - 1)] if k > 1 else list(interventions)


def best_over_variants(table: pd.DataFrame) -> pd.DataFrame:
    """Per target × intervention × step: the best variant's score (an intervention's score is its best variant)."""
    idx = table.groupby(["target", "intervention", "step"], sort=True)["score"].idxmax()
    best = table.loc[idx, ["target", "intervention", "step", "variant", "score", "hit_rate", "valid_fraction", "n"]]
    return best.reset_index(drop=True)


def collect_interventions(run: RunFolder) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(interventions table, emergence table = best variant per target × intervention × step), run id first; None
    when no checkpoint was evaluated."""
    if not run.step_files(DIRECTORY):
        return None
    table = pd.concat([read_parquet(p) for _, p in run.step_files(DIRECTORY)], ignore_index=True)
    table.insert(0, "run", run.name)
    best = best_over_variants(table)
    best.insert(0, "run", run.name)
    return table, best


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def _bound(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else float(x)


def matched_gaps(cfg, table: pd.DataFrame, target: str, steps_by: dict[str, float]) -> tuple[dict, pd.DataFrame]:
    """Per intervention with k variants: the bias-matched naive baseline (best of k naive streams), its emergence
    step and the censored gap baseline − intervention (`analysis.emergence_stats`); and the baselines' curves."""
    iv = cfg.eval.interventions
    rule = EmergenceRule(iv.threshold, iv.stay, iv.confidence)
    censor = rule.censor_step(table.loc[table["target"] == target, "step"].unique())
    counts = variants_per_intervention(table, target)
    streams = int(table[(table["target"] == target) & table["intervention"].isin(["naive", "naive_repeats"])]
                  ["stream"].nunique())
    out, curves, baselines = {}, [], {}
    for name, k in counts.items():
        if name in ("naive", "naive_repeats"):
            continue
        if k > streams:
            out[name] = {"k": k, "error": f"needs {k} naive streams, the run has {streams} (matched_naive off?)"}
            continue
        if k not in baselines:
            curve = matched_baseline(table, target, k)
            baselines[k] = (rule.step(curve["step"], curve["score"], curve["n"].to_numpy()), curve)
            curves.append(curve.assign(target=target, k=k))
        base_step, _ = baselines[k]
        lo, hi = gap_interval(steps_by[name], base_step, censor)
        out[name] = {"k": k, "step": _nan_to_none(steps_by[name]), "baseline_step": _nan_to_none(base_step),
                     "gap_low": _bound(lo), "gap_high": _bound(hi)}
    table_out = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return out, table_out


def summarize_emergence(
    cfg, best: pd.DataFrame, concept_table: pd.DataFrame, table: pd.DataFrame | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Emergence step per intervention, capability gap (the old statistic: earliest of the interventions against one
    naive curve), the bias-matched gap of each intervention (with `table`, the run's interventions table), sudden
    turn, memorization phase and ODE fit per target; and the matched baselines' curves."""
    iv = cfg.eval.interventions
    assert iv is not None
    out: dict[str, Any] = {"threshold": iv.threshold, "stay": iv.stay, "confidence": iv.confidence, "targets": {}}
    concepts = list(cfg.data.concepts)
    curves = []
    for target, group in best.groupby("target"):
        group = group[group["intervention"] != "naive_repeats"]
        steps_by = {}
        for name, curve in group.groupby("intervention", sort=False):
            curve = curve.sort_values("step")
            n = curve["n"].to_numpy() if iv.confidence else None
            steps_by[name] = emergence_step(curve["step"], curve["score"], iv.threshold, iv.stay, n)
        entry: dict[str, Any] = {
            "emergence_step": {k: _nan_to_none(v) for k, v in steps_by.items()},
            "final_score": {
                k: round(float(g.sort_values("step")["score"].iloc[-1]), 4) for k, g in group.groupby("intervention")
            },
        }
        if "naive" in steps_by and len(steps_by) > 1:
            entry["capability_gap"] = _nan_to_none(capability_gap(steps_by))
            others = [v for k, v in steps_by.items() if k != "naive" and not math.isnan(v)]
            entry["capability_first"] = bool(others) and (math.isnan(steps_by["naive"]) or min(others) < steps_by["naive"])
        if table is not None and "stream" in table.columns and "naive" in steps_by:
            entry["matched"], curve_table = matched_gaps(cfg, table, str(target), steps_by)
            curves.append(curve_table)
        entry.update(_trajectory_block(concept_table, str(target), concepts))
        out["targets"][str(target)] = entry
    matched = pd.concat([c for c in curves if not c.empty], ignore_index=True) if any(not c.empty for c in curves) \
        else pd.DataFrame()
    return out, matched


def oriented_trajectory(table: pd.DataFrame, target: str, concepts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, points [steps, concepts]) of the target's naive generations, each axis oriented so 1 = target value.

    Checkpoints where no generation was a valid image have no reading and are left out.
    """
    rows = table[table["class"] == target]
    traj = rows.pivot_table(index="step", columns="concept", values="p_one", dropna=False).reindex(columns=concepts)
    traj = traj.dropna()
    points = np.stack(
        [traj[c].to_numpy() if target[k] == "1" else 1 - traj[c].to_numpy() for k, c in enumerate(concepts)], 1
    )
    return traj.index.to_numpy().astype(float), points


def turns_toward_target(steps: np.ndarray, points: np.ndarray, turn_step: float, ahead: int = 2) -> bool:
    """After the turn, does the trajectory get closer to the target corner (all ones) over the next checkpoints?

    Tells a turn toward the held-out class (Park et al.'s sudden turn) from a turn into memorization.
    """
    i = int(np.flatnonzero(steps == turn_step)[0])
    distance = np.linalg.norm(1.0 - points, axis=1)
    later = distance[i + 1 : i + 1 + ahead]
    return bool(later.size and later.mean() < distance[i])


def _trajectory_block(table: pd.DataFrame, target: str, concepts: list[str]) -> dict[str, Any]:
    """Turn, memorization phase and gated-flow fit of the target's naive trajectory in the concept-space table."""
    steps, points = oriented_trajectory(table, target, concepts)
    if len(steps) == 0:
        return {}
    block: dict[str, Any] = {}
    if len(steps) >= 3:
        turn = sudden_turn(steps, points)
        block["turn"] = {"step": _nan_to_none(turn.step), "angle": _nan_to_none(round(turn.angle, 1))}
        if not math.isnan(turn.step):
            block["turn"]["toward_target"] = turns_toward_target(steps, points, turn.step)
    if "train" in set(table["split"]):
        phase = memorization_phase(table, target)
        block["memorization"] = (
            None if phase is None else {"start": phase.start, "end": phase.end, "read_as": phase.read_class}
        )
        turn_step = block.get("turn", {}).get("step")
        if phase is not None and turn_step is not None:
            block["memorization_precedes_turn"] = bool(phase.start < turn_step)
    if len(concepts) == 2 and len(steps) >= 5:
        try:
            fit = fit_gated_flow(steps, points)
            block["gated_flow_fit"] = {
                "a": round(fit.params.a, 4),
                "k": fit.params.k,
                "t0": round(fit.params.t0, 1),
                "eta": fit.params.eta,
                "rmse": round(fit.rmse, 4),
                "r2": round(fit.r2, 4),
            }
        except (ValueError, RuntimeError) as err:  # a degenerate trajectory: report why instead of failing the run
            block["gated_flow_fit"] = {"error": str(err)}
    return block


def emergence_figures(
    cfg, run: RunFolder, table: pd.DataFrame, best: pd.DataFrame, concept_table: pd.DataFrame,
    emergence: dict[str, Any],
) -> dict[str, Any]:
    """Scores vs step, trajectory with turn (+ ODE fit) per target, and samples per variant (file name → figure);
    none under `CONCEPTLAB_FIGURES=none`."""
    from conceptlab.analysis.phenomenology import GatedFlowParams, params_at_bounds, simulate
    from conceptlab.report.emergence_figures import plot_intervention_scores, plot_trajectory_turn
    from conceptlab.report.figures import plot_samples

    from conceptlab.report.names import intervention as intervention_name
    from conceptlab.report.save import figures_wanted
    from conceptlab.store.files import read_json

    if not figures_wanted():
        return {}
    targets = emergence["targets"]
    steps_by = {t: e["emergence_step"] for t, e in targets.items()}
    target_names = {t: e.get("name") or t for t, e in targets.items()}
    figures = {"intervention_scores.png": plot_intervention_scores(best, emergence["threshold"], steps_by, target_names)}
    concepts = list(cfg.data.concepts)
    value_names = read_json(run.data).get("value_names", {}) if run.data.is_file() else {}
    if len(concepts) == 2:
        for target, entry in targets.items():
            steps, points = oriented_trajectory(concept_table, target, concepts)
            if len(steps) < 2:
                continue
            fit = entry.get("gated_flow_fit") or {}
            fitted = None
            if "a" in fit:
                params = GatedFlowParams(fit["a"], fit["k"], fit["t0"], fit["eta"])
                dense = np.linspace(steps[0], steps[-1], 200)
                fitted = (dense, simulate(params, dense), fit["r2"], params_at_bounds(params, float(steps[-1])))
            phase = entry.get("memorization")
            values = [names[int(target[k])] if (names := value_names.get(c)) else f"{c} = {target[k]}"
                      for k, c in enumerate(concepts)]
            checkpoints = concept_table[concept_table["class"] == target]["step"].nunique()
            figures[f"trajectory_{target}.png"] = plot_trajectory_turn(
                steps, points, concepts, target, (entry.get("turn") or {}).get("step"),
                (phase["start"], phase["end"]) if phase else None, fitted, target_names.get(target), values,
                hidden=int(checkpoints - len(steps)),
            )
    samples_path = run.file(SAMPLES_FILE)
    if samples_path.is_file():
        samples = read_tensors(samples_path)
        by_step = {int(k.split("_")[1]): v for k, v in samples.items()}
        keep = sorted(by_step)
        keep = list(dict.fromkeys(keep[round(i)] for i in np.linspace(0, len(keep) - 1, min(6, len(keep)))))
        first = table[table["step"] == keep[0]]
        labels = [f"{target_names.get(str(r.target), r.target)}: {intervention_name(r.intervention)} {r.variant}"
                  for r in first.itertuples()]
        n_kept = min(SAMPLES_KEPT, cfg.eval.interventions.samples)
        grids = {s: by_step[s][::n_kept].permute(0, 2, 3, 1).float().numpy() / 255.0 for s in keep}
        if all(len(g) == len(labels) for g in grids.values()):
            figures["intervention_samples.png"] = plot_samples(grids, labels, column_width=0.62, rotate_labels=True)
    return figures
