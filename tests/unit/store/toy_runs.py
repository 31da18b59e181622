"""Toy run folders with the run driver's file layout (no training): config, summary, Parquet tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import config_to_yaml
from conceptlab.store.files import write_json, write_parquet, write_text

CLASSES = {"00": "train", "01": "train", "10": "train", "11": "held_out"}
CONCEPTS = ["color", "size"]


def write_toy_run(root: Path, run_id: str, color_separation: float, seed: int, steps: list[int],
                  finished: bool = True) -> Path:
    """A run folder whose accuracy for color rises at a step set by Δc; one eval file per step."""
    run_dir = Path(root) / run_id
    cfg = RunConfig()
    cfg.data.color_separation = color_separation
    cfg.data.data_seed = seed
    cfg.train.train_seed = seed
    cfg.name = "toy"
    write_text(run_dir / "config.yaml", config_to_yaml(cfg))
    learned_at = {"color": round(1000 * (1 - color_separation)), "size": 500}
    parts = []
    for step in steps:
        rows = [
            {"step": step, "class": code, "split": split, "concept": concept,
             "accuracy": 1.0 if step >= learned_at[concept] else 0.0, "p_one": 0.5, "valid_fraction": 1.0}
            for code, split in CLASSES.items() for concept in CONCEPTS
        ]
        part = pd.DataFrame(rows)
        write_parquet(run_dir / "eval" / f"step_{step:07d}.parquet", part)
        parts.append(part)
    if not finished:
        return run_dir
    table = pd.concat(parts, ignore_index=True)
    table.insert(0, "run", run_id)
    write_parquet(run_dir / "concept_space.parquet", table)
    times = pd.DataFrame([{"split": s, "concept": c, "learning_time": float(learned_at[c])}
                          for s in ("held_out", "train") for c in CONCEPTS])
    write_parquet(run_dir / "learning_times.parquet", times)
    write_json(run_dir / "summary.json", {
        "run": run_id, "name": "toy", "final_step": max(steps), "checkpoints": len(steps),
        "concept_signal": {"color": 20 * color_separation, "size": 5.0},
        "learning_time": {f"{s}/{c}": learned_at[c] for s in ("held_out", "train") for c in CONCEPTS},
        "mean_accuracy": {f"{s}/{c}": 0.5 for s in ("held_out", "train") for c in CONCEPTS},
        "seconds": {"total": 1.0},
    })
    return run_dir
