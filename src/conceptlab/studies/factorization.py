"""The `bumps` study (Liang et al. 2024): generation accuracy per label region and representation geometry.

Its one job: turn a bump-world run's checkpoints into the composition / interpolation and factorization
measurements. Per checkpoint (every k-th and the last; resumable through the run driver), two measurements:

- **composition** (`composition/step_*.parquet`): each region of `dgp.regions()` (2D `train` labels, 2D `held_out`
  labels) is subsampled to at most `eval.composition.labels_per_region` labels (seeded), one image is generated per
  label (all regions in one sampling pass, `max_batch` images at a time), located with `probes.locator.locate` and
  scored with `generation_accuracy` (x, y, joint within `tolerance` px; wrapped on a torus); a few generations per
  region go to `composition_samples.safetensors`;
- **geometry** (`geometry/step_*.parquet`): besides the items below, the factorization measure
  (`analysis.factorization`: additive share, its chance level, x/y subspace overlap); activations at `eval.geometry.hook` and time `t` for a sub-lattice of
  `dgp.grid_labels()` (refined `geometry.label_density`× per axis first, `refine_grid`; then at most
  `geometry.labels` labels, still a full grid), one forward pass on the noised ground-truth images (or the shared
  noise, `input: noise`), pooled; effective dimension (participation ratio), explained variance of the top 4 PCs
  and the top 15 eigenvalues; with `geometry.homology_over_training`, also the Betti numbers and the 3 longest H1
  and H2 bars (`betti_0..2`, `h1_bar_1..3`, `h2_bar_1..3`), so the run summary has `betti_by_step`. The final
  checkpoint's cloud is kept (`geometry/step_*.safetensors`: points, labels).

At the final checkpoint, **controls** (`geometry_controls/`, table `geometry_controls.parquet`, summary `controls`):
the trained representation and each of `geometry.controls` — the network at initialisation (`untrained`; its
zero-initialised layers keep the label out of every residual block's output), the same architecture with random
weights in every layer (`random_init`), its
input at t (`pixels`: the noised ground-truth images), the label encoding (`encoding`) and a random untrained layer
on it (`encoding_map`, drawn per run from `geometry.seed` and the run's train_seed) — through the same analyses
(effective dimension, factorization measure, chord tests, Betti numbers, `torus` = 1 where they are (1, 2, 1), and
the longest bars), one row each and on the same noised inputs, so every claim can name the control it beats and the
comparison is paired. Figure `controls.png`.

At the end: persistent homology (Betti numbers) of the final cloud and the chord (orthogonality / parallelism)
tests on the grid, next to the same tests on ideal 3D-torus and Clifford-torus references (`homology.json`); the
run-level tables `composition.parquet` and `geometry.parquet` (all checkpoints, run id first) and the figures.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator

from conceptlab.analysis.geometry import (
    as_grid,
    chord_tests,
    clifford_torus,
    participation_ratio,
    persistent_homology,
    torus_3d,
)
from conceptlab.analysis.factorization import factorization
from conceptlab.analysis.representation import (
    check_hook,
    collect_representations,
    encoding_cloud,
    encoding_map_cloud,
    input_cloud,
)
from conceptlab.config_base import StrictConfig
from conceptlab.data.bump_world import BumpsDataConfig, BumpWorld
from conceptlab.models.unet import check_image_size
from conceptlab.probes.locator import count_peaks, generation_accuracy, locate, within_tolerance
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
    once_each,
    random_init_model,
    read_step_tables,
    untrained_model,
)
from conceptlab.train.precision import autocast, resolve_bf16

SAMPLES_KEPT = 6  # generations kept per region and checkpoint for the sample figure
EIGENVALUES = 15  # top PCA eigenvalues stored per checkpoint
SAMPLES_FILE = "composition_samples.safetensors"
RENDER_PEAK = 4  # rendering N bump images holds about 4× their bytes at its peak (measured 3.7×)


class CompositionEvalConfig(StrictConfig):
    """Generation accuracy on bump worlds (data.kind=bumps): generate at labels, locate, score per region.

    Regions: `train` (2D labels trained on) and `held_out` (2D labels of the held-out region), each
    subsampled to at most `labels_per_region` labels, one generation per label.
    """

    labels_per_region: int = Field(64, ge=1)
    tolerance: float = Field(1.0, gt=0.0, description="a coordinate is correct within this many pixels")
    sample_steps: int | None = Field(None, ge=1, description="override diffusion.sample_steps")
    guidance_scale: float | None = Field(None, ge=0.0, description="override diffusion.guidance_scale")
    every: int = Field(1, ge=1, description="evaluate every k-th checkpoint (the last one always)")
    max_batch: int = Field(512, ge=1, description="images per sampling pass (all regions are sampled together)")
    use_ema: bool = True
    seed: int = Field(0, ge=0)
    count_peaks: bool = Field(
        False, description="also count each generation's bumps (probes.locator.count_peaks): columns `single` (the "
        "fraction with exactly one bump, or one stripe per axis) and `joint_single` (jointly correct and single), "
        "so a generation with a second bump elsewhere no longer scores by its brightest one")

    added_fields: ClassVar[tuple[str, ...]] = ("count_peaks",)


class GeometryConfig(StrictConfig):
    """Representation geometry over the label grid (data.kind=bumps): one activation vector per 2D label."""

    added_fields: ClassVar[tuple[str, ...]] = ("homology_dims_rule", "homology_max_dims", "noise_per_run")

    hook: str = Field("mid.blocks.1.hook_out", description="hook point read (the paper's 'layer 4': after the bottleneck)")
    t: float = Field(0.5, gt=0.0, le=1.0, description="diffusion time of the forward pass (0 = data, 1 = noise)")
    pool: Literal["flatten", "mean"] = Field("mean", description="spatial activations: flatten or mean over space")
    input: Literal["data", "noise"] = Field(
        "data", description="data: the noised ground-truth image of each label; noise: one shared noise image"
    )
    labels: int = Field(1024, ge=16, description="at most this many 2D labels (a sub-lattice) per checkpoint")
    label_density: int = Field(
        1, ge=1, le=8,
        description="read the grid refined k× per axis (k − 1 labels between lattice neighbours, wrapping on a "
        "torus): a denser cloud for homology; a refined grid over `labels` is refused before training",
    )
    every: int = Field(1, ge=1, description="every k-th checkpoint (the last one always)")
    homology: bool = Field(True, description="persistent homology of the final checkpoint's cloud")
    homology_over_training: bool = Field(
        False, description="also Betti numbers and the longest bars at every geometry checkpoint (a few s each)"
    )
    homology_points: int = Field(400, ge=20)
    homology_dims: int = Field(6, ge=2, description="PCA dimensions kept before Vietoris–Rips (with "
                               "homology_dims_rule whole_eigenspaces: at least this many)")
    homology_dims_rule: Literal["fixed", "whole_eigenspaces"] = Field(
        "fixed", description="fixed: exactly homology_dims PCs; whole_eigenspaces: never cut between eigenvalues "
        "PCA cannot order (North's rule of thumb, λ_k − λ_{k+1} < λ_k √(2/n)): the cut moves down to the first "
        "separated gap, at most homology_max_dims (analysis.geometry.whole_eigenspaces)",
    )
    homology_max_dims: int = Field(32, ge=2, description="most PCs whole_eigenspaces keeps")
    homology_landmarks: int | None = Field(
        200, ge=20, description="ripser greedy landmarks (keeps H2 affordable); None: all homology_points"
    )
    persistence_threshold: float = Field(0.1, ge=0.0, description="bars shorter than this fraction of the diameter are noise")
    betti_rule: Literal["threshold", "gap", "hybrid"] = Field(
        "gap", description="threshold: every bar above the cut counts; gap: only those above the largest gap in "
        "lengths; hybrid: gap for H0, threshold for H1 and H2 (see analysis.geometry.persistent_homology)"
    )
    controls: list[Literal["untrained", "random_init", "pixels", "encoding", "encoding_map"]] = Field(
        default_factory=lambda: ["untrained", "pixels", "encoding", "encoding_map"],
        description="representations the final checkpoint's is compared with, by the same analyses: the network at "
        "initialisation (untrained: its zero-initialised layers keep the label out of the blocks' outputs), the same "
        "architecture with random weights in every layer (random_init), its input at t (noised ground-truth "
        "images), the label encoding, a random layer on it",
    )
    encoding_map_width: int = Field(256, ge=2, description="units of the encoding_map control's random layer (drawn "
                                    "from `seed` and the run's train_seed, so each run has its own)")
    use_ema: bool = True
    seed: int = Field(0, ge=0)
    noise_per_run: bool = Field(
        False, description="draw the forward pass's noise and the homology subsample from `seed` and the run's "
        "train_seed (`geometry_seed`), so replicate runs read their networks' clouds through their own draw; false: "
        "one draw per preset, shared by every run, unless `eval.noise_per_run` (which makes every evaluation draw "
        "the run's own) is on. (One ε is shared by every label, so the pixels control only "
        "moves as a whole: its geometry is the data's for any draw, up to rounding.)",
    )

    @field_validator("controls")
    @classmethod
    def _once_each(cls, v: list[str]) -> list[str]:
        return once_each(v)


def _sample_steps(cfg) -> int:
    return cfg.eval.composition.sample_steps or cfg.eval.sample_steps or cfg.diffusion.sample_steps


def _guidance(cfg) -> float:
    g = cfg.eval.composition.guidance_scale
    return cfg.diffusion.guidance_scale if g is None else g


# -- label sets ------------------------------------------------------------------------------------------------------
def region_labels(dgp, limit: int, seed: int) -> dict[str, torch.Tensor]:
    """Each region's 2D labels, at most `limit` of them (a seeded subsample, kept in lattice order)."""
    out = {}
    for k, (name, labels) in enumerate(dgp.regions().items()):
        if len(labels) > limit:
            idx = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed + k))[:limit]
            labels = labels[idx.sort().values]
        out[name] = labels
    return out


def grid_sublattice(labels: torch.Tensor, limit: int) -> torch.Tensor:
    """The labels of every s-th x value and every s-th y value, the smallest stride s giving at most `limit` labels.

    A full grid stays a full grid (needed by the chord tests); order is kept.
    """
    xs, ys = torch.unique(labels[:, 0]), torch.unique(labels[:, 1])
    stride = 1
    while len(labels) > limit and math.ceil(len(xs) / stride) * math.ceil(len(ys) / stride) > limit:
        stride += 1
    if stride == 1 and len(labels) <= limit:
        return labels
    keep = torch.isin(labels[:, 0], xs[::stride]) & torch.isin(labels[:, 1], ys[::stride])
    sub = labels[keep]
    if len(sub) > limit:  # not a grid: fall back to an even subsample
        sub = labels[torch.linspace(0, len(labels) - 1, limit).round().long()]
    return sub


def refine_grid(labels: torch.Tensor, factor: int, period: float | None = None) -> torch.Tensor:
    """The full grid of `labels`' x and y values with `factor` − 1 evenly spaced values inserted between neighbours.

    On a torus (`period` given) the last value's neighbour is the first + period, so the refined grid wraps
    (values taken mod period). Returned x-major, like `BumpWorld.grid_labels`. `factor` 1 returns `labels` as is.
    """
    if factor < 1:
        raise ValueError(f"label density must be ≥ 1, got {factor}")
    if factor == 1:
        return labels

    def axis(values: torch.Tensor) -> torch.Tensor:
        v = torch.unique(values.double())
        nxt = torch.cat([v[1:], v[:1] + period]) if period is not None else v[1:]
        steps = torch.arange(factor, dtype=torch.float64) / factor
        fine = (v[: len(nxt), None] + steps[None, :] * (nxt - v[: len(nxt)])[:, None]).reshape(-1)
        if period is None:
            fine = torch.cat([fine, v[-1:]])
        else:
            fine = torch.remainder(fine, period)
        return torch.unique(fine)

    xs, ys = axis(labels[:, 0]), axis(labels[:, 1])
    return torch.stack(torch.meshgrid(xs, ys, indexing="ij"), dim=-1).reshape(-1, 2).to(labels.dtype)


# -- per checkpoint --------------------------------------------------------------------------------------------------
def generate(cfg, model, labels: torch.Tensor, generator: torch.Generator, dgp) -> torch.Tensor:
    """One image `[M, 1, S, S]` in [0, 1] per label, `max_batch` at a time."""
    comp = cfg.eval.composition
    device = next(model.parameters()).device
    prompts = dgp.make_prompt(labels).to(device)
    null_prompt = torch.full_like(prompts[:1], cfg.data.null_value)
    images = []
    with autocast(resolve_bf16(cfg.train.bf16, device), device):
        for start in range(0, len(prompts), comp.max_batch):
            batch = prompts[start : start + comp.max_batch]
            images.append(model.sample(batch, _sample_steps(cfg), generator, _guidance(cfg), null_prompt).float().cpu())
    return torch.cat(images)


def accuracy_rows(cfg, dgp, regions: dict[str, torch.Tensor], images: torch.Tensor, step: int) -> pd.DataFrame:
    """Rows (step, region, x, y, joint, n, region_size, x_error, y_error, located; with `count_peaks` also single,
    joint_single) of generations `images` made at the concatenated regions (n labels scored out of the region's
    region_size)."""
    data = cfg.data
    kind = "bump" if data.image == "bump+stripes" else data.image  # the regions scored are 2D labels: bumps
    pred = locate(images, kind=kind, border=data.border, periodic=data.periodic)
    single = (count_peaks(images, kind=kind, periodic=data.periodic) == 1) if cfg.eval.composition.count_peaks else None
    sizes = {name: len(labels) for name, labels in dgp.regions().items()}
    rows, start = [], 0
    for name, labels in regions.items():
        p, t = pred[start : start + len(labels)], labels.to(pred.dtype)
        start += len(labels)
        acc = generation_accuracy(p, t, cfg.eval.composition.tolerance, period=dgp.period)
        err = p - t
        if dgp.period is not None:
            err = torch.remainder(err + dgp.period / 2, dgp.period) - dgp.period / 2
        med = err.abs().nanmedian(dim=0).values
        row = {"step": int(step), "region": name, **acc, "n": len(labels), "region_size": sizes.get(name),
               "x_error": float(med[0]), "y_error": float(med[1]),
               "located": float((~p.isnan()).all(dim=1).double().mean())}
        if single is not None:
            one = single[start - len(labels) : start]
            joint = within_tolerance(p, t, cfg.eval.composition.tolerance, period=dgp.period).all(dim=1)
            row |= {"single": float(one.double().mean()), "joint_single": float((joint & one).double().mean())}
        rows.append(row)
    return pd.DataFrame(rows)


def nearest_training_labels(dgp, labels: torch.Tensor) -> torch.Tensor:
    """Each label's nearest trained 2D label (Euclidean; wrapped on a torus; the first in lattice order on a tie)."""
    train = dgp.train_2d_labels.to(torch.float64)
    diff = labels.to(torch.float64)[:, None, :] - train[None, :, :]
    if dgp.period is not None:
        diff = torch.remainder(diff + dgp.period / 2, dgp.period) - dgp.period / 2
    return dgp.train_2d_labels[diff.pow(2).sum(dim=2).argmin(dim=1)]


def copying_accuracy(cfg, dgp) -> pd.DataFrame:
    """The composition table of a model that only copies its training data: at each evaluated label (the same
    regions, subsample and seed as the generations) the exact image of the nearest trained 2D label, located and
    scored like a generation (same locator and tolerance). No network. Its held-out accuracy is what the tolerance
    grants a model that never leaves the training lattice: the bias-matched floor of an interpolation claim."""
    comp = cfg.eval.composition
    regions = region_labels(dgp, comp.labels_per_region, eval_noise_seed(comp.seed, cfg))
    copied = nearest_training_labels(dgp, torch.cat(list(regions.values())))
    return accuracy_rows(cfg, dgp, regions, dgp.render(copied), step=0)


def run_geometry_seed(cfg) -> int:
    """A seed of the run's own for the geometry, from `geometry.seed` and `train.train_seed` (the encoding_map
    control's layer; with `geometry.noise_per_run` also the noise and homology subsample)."""
    return cfg.eval.geometry.seed * 1_000_003 + cfg.train.train_seed  # kept: the recorded runs were drawn with it


def geometry_seed(cfg) -> int:
    """The seed of the geometry's noise and homology subsample: `geometry.seed`; with `geometry.noise_per_run` the
    run's own by `run_geometry_seed` (its formula, kept for the runs recorded with it); else with `eval.noise_per_run`
    the run's own by `studies.base.eval_noise_seed`."""
    if cfg.eval.geometry.noise_per_run:
        return run_geometry_seed(cfg)
    return eval_noise_seed(cfg.eval.geometry.seed, cfg)


def representation_cloud(cfg, dgp, model, labels: torch.Tensor):
    """The activation cloud `[M, D]` at the geometry hook and time over `labels`."""
    geo = cfg.eval.geometry
    images = dgp.render(labels) if geo.input == "data" else None
    shape = None if images is not None else (dgp.channels, dgp.image_size, dgp.image_size)
    return collect_representations(
        model.net, model.process, labels, geo.hook, geo.t, image_shape=shape, images=images,
        prompts=dgp.make_prompt(labels), pool=geo.pool, seed=geometry_seed(cfg),
    )


def spectrum(points: torch.Tensor) -> np.ndarray:
    """PCA eigenvalues (descending) of a cloud `[M, D]`: `analysis.geometry.pca`'s, from torch's SVD (numpy's
    multithreaded SVD is ~20× slower on a shared CPU)."""
    a = points.double()
    return (torch.linalg.svdvals(a - a.mean(dim=0)) ** 2 / len(a)).numpy()


def geometry_row(cfg, points: torch.Tensor, step: int, labels: torch.Tensor | None = None) -> pd.DataFrame:
    """One row: step, hook, t, effective dimension, explained variance of the top 4 PCs, top 15 eigenvalues; with the
    grid's labels, the factorization measure too."""
    geo = cfg.eval.geometry
    lam = spectrum(points)
    eig = np.pad(lam[:EIGENVALUES], (0, max(0, EIGENVALUES - len(lam))))
    mean_square_norm = float((points.double() ** 2).sum(dim=1).mean())
    row = {"step": int(step), "hook": geo.hook, "t": geo.t,
           "effective_dimension": participation_ratio(lam, mean_square_norm),
           "explained_variance_top4": float(lam[:4].sum() / lam.sum()), "points": int(points.shape[0]),
           "features": int(points.shape[1])}
    row.update({f"eigenvalue_{i + 1}": float(v) for i, v in enumerate(eig)})
    if labels is not None:
        row.update(factorization_columns(points, labels))
    if geo.homology and geo.homology_over_training:
        row.update(homology_columns(homology(cfg, points)))
    return pd.DataFrame([row])


def factorization_columns(points: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """`analysis.factorization` of a grid cloud: additive share (and its chance level) and x/y subspace overlap."""
    try:
        f = factorization(as_grid(points, labels))
    except ValueError:  # not a full grid
        return {}
    return {"additive_share": f.additive_share, "additive_chance": f.chance_share, "subspace_overlap": f.overlap,
            "subspace_max_cosine": f.max_cosine}


def homology(cfg, points: torch.Tensor) -> dict[str, Any]:
    """`analysis.geometry.persistent_homology` of a cloud with the run's settings (dimensions 0–2)."""
    geo = cfg.eval.geometry
    return persistent_homology(points, max_dim=2, n_components=geo.homology_dims, n_points=geo.homology_points,
                               threshold=geo.persistence_threshold, seed=geometry_seed(cfg),
                               n_perm=geo.homology_landmarks, rule=geo.betti_rule, components_rule=geo.homology_dims_rule,
                               max_components=geo.homology_max_dims)


def longest_bars(diagram: np.ndarray, scale: float, k: int) -> list[float]:
    """The (at most) `k` longest finite bars of one diagram `[n, 2]` as fractions of `scale` (the cloud's diameter)."""
    diagram = np.asarray(diagram, dtype=float).reshape(-1, 2)
    finite = diagram[np.isfinite(diagram).all(axis=1)]
    return [float(v) for v in np.sort(finite[:, 1] - finite[:, 0])[::-1][:k] / scale] if len(finite) else []


def homology_columns(ph: dict[str, Any]) -> dict[str, float | int]:
    """Geometry-row columns of one homology result: betti_0..2, the 3 longest finite H1 and H2 bars
    (`h1_bar_1`, …, as fractions of the diameter), the PCs the cloud was reduced to (`homology_dims`) and whether
    that cut splits an eigenspace PCA cannot order (`homology_cut_split`, 0/1: the Betti numbers then read an
    arbitrary projection of it)."""
    out: dict[str, float | int] = {f"betti_{k}": int(b) for k, b in enumerate(ph["betti"])}
    if ph.get("components") is not None:
        out["homology_dims"] = int(ph["components"])
        out["homology_cut_split"] = int(bool(ph.get("cut_splits_eigenspace")))
    for dim in (1, 2):
        bars = longest_bars(ph["diagrams"][dim], ph["scale"], 3)
        out.update({f"h{dim}_bar_{i + 1}": v for i, v in enumerate(bars + [0.0] * (3 - len(bars)))})
    return out


# -- run level -------------------------------------------------------------------------------------------------------
def topology(cfg, points: torch.Tensor, labels: torch.Tensor, period: float | None) -> dict[str, Any]:
    """Betti numbers of the cloud (if enabled) and the chord tests on the grid, with the ideal tori's values."""
    geo = cfg.eval.geometry
    out: dict[str, Any] = {}
    if geo.homology:
        ph = homology(cfg, points)
        out["homology"] = {"betti": list(ph["betti"]), "scale": ph["scale"], "threshold": ph["threshold"],
                           "dims": ph["components"], "cut_splits_eigenspace": ph["cut_splits_eigenspace"],
                           "diagrams": [d[np.isfinite(d).all(axis=1)].tolist() for d in ph["diagrams"]],
                           "infinite_bars": [int((~np.isfinite(d).all(axis=1)).sum()) for d in ph["diagrams"]]}
    try:
        grid = as_grid(points, labels)
    except ValueError:
        return out
    periodic = bool(cfg.data.periodic)
    ref_period = period or float(cfg.data.drawn_size)
    out["chord_tests"] = chord_tests(grid, periodic=periodic)
    out["chord_reference"] = {
        "torus_3d": chord_tests(as_grid(torus_3d(labels, ref_period), labels), periodic=periodic),
        "clifford": chord_tests(as_grid(clifford_torus(labels, ref_period), labels), periodic=periodic),
    }
    return out


def _r(x: float, digits: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def summarize_fields(acc: pd.DataFrame, geo: pd.DataFrame, topo: dict[str, Any]) -> dict[str, Any]:
    """The summary fields of a bumps run (see the module docstring)."""
    final_step = int(acc["step"].max())
    final = acc[acc["step"] == final_step]
    ed = geo.sort_values("step")
    i_max = int(ed["effective_dimension"].to_numpy().argmax())
    eig_cols = [c for c in geo.columns if c.startswith("eigenvalue_")]
    summary: dict[str, Any] = {
        "checkpoints": int(acc["step"].nunique()),
        "final_step": final_step,
        "final_accuracy": {r.region: {"x": _r(r.x), "y": _r(r.y), "joint": _r(r.joint), "n": int(r.n),
                                      **({"single": _r(r.single), "joint_single": _r(r.joint_single)}
                                         if "single" in final.columns else {})}
                           for r in final.itertuples()},
        "accuracy_by_step": {region: {int(r.step): _r(r.joint, 3) for r in rows.itertuples()}
                             for region, rows in acc.groupby("region", sort=False)},
        "effective_dimension": {
            "first": _r(ed["effective_dimension"].iloc[0], 3),
            "first_step": int(ed["step"].iloc[0]),
            "final": _r(ed["effective_dimension"].iloc[-1], 3),
            "max": _r(ed["effective_dimension"].iloc[i_max], 3),
            "max_step": int(ed["step"].iloc[i_max]),
            "by_step": {int(r.step): _r(r.effective_dimension, 3) for r in ed.itertuples()},
        },
        "explained_variance_top4_final": _r(ed["explained_variance_top4"].iloc[-1]),
        "eigenvalues_final": [_r(v, 6) for v in ed[eig_cols].iloc[-1].to_numpy()],
    }
    if "homology" in topo:
        h = topo["homology"]
        summary["betti"] = h["betti"]
        if h["cut_splits_eigenspace"] is not None:  # the final cloud's PCA cut splits an eigenspace: betti arbitrary
            summary["betti_cut_splits_eigenspace"] = bool(h["cut_splits_eigenspace"])
        summary["persistence_top"] = {  # the longest finite bars per dimension, as fractions of the diameter
            f"H{k}": [_r(v, 3) for v in longest_bars(d, h["scale"], 4)] for k, d in enumerate(h["diagrams"])
        }
    if "betti_1" in geo.columns:  # homology over training
        rows = ed.dropna(subset=["betti_1"])
        summary["betti_by_step"] = {int(r.step): [int(r.betti_0), int(r.betti_1), int(r.betti_2)]
                                    for r in rows.itertuples()}
    for key in ("chord_tests", "chord_reference"):
        if key in topo:
            summary[key] = {k: ({kk: _r(vv) for kk, vv in v.items()} if isinstance(v, dict) else _r(v))
                            for k, v in topo[key].items()}
    return summary


def figures(cfg, acc: pd.DataFrame, geo: pd.DataFrame, cloud: dict[str, torch.Tensor], topo: dict[str, Any],
            samples: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The run's composition / geometry figures (file name → figure)."""
    from conceptlab.report import composition_figures as cf

    out = {"generation_accuracy.png": cf.plot_generation_accuracy(acc, cfg.eval.composition.tolerance),
           "effective_dimension.png": cf.plot_effective_dimension(geo, cfg.eval.geometry.persistence_threshold)}
    points = cloud["points"].double()
    if len(points) >= 4:
        centred = points - points.mean(dim=0)
        axes = torch.linalg.svd(centred, full_matrices=False).Vh[:3]
        out["pca_projection.png"] = cf.plot_pca_projection((centred @ axes.T).numpy(), cloud["labels"].numpy(),
                                                           cyclic=cfg.data.periodic)
    if "homology" in topo:
        h = topo["homology"]
        out["barcode.png"] = cf.plot_barcode([np.asarray(d).reshape(-1, 2) for d in h["diagrams"]],
                                             h["threshold"], h["betti"], h["infinite_bars"])
    if samples:
        out["generations.png"] = cf.plot_generations(samples)
    return out


# -- controls --------------------------------------------------------------------------------------------------------
CONTROL_MEASURES = ("effective_dimension", "explained_variance_top4", "additive_share", "additive_chance",
                    "subspace_overlap", "subspace_max_cosine", "orthogonality", "parallelism", "betti_0", "betti_1",
                    "betti_2", "torus", "h1_bar_1", "h1_bar_2", "h2_bar_1", "homology_dims")


def control_row(cfg, source: str, points: torch.Tensor, labels: torch.Tensor, step: int, period) -> dict:
    """One source's geometry through the trained representation's analyses: effective dimension, explained variance,
    the factorization measure, the chord tests and (with `geometry.homology`) Betti numbers and the longest bars."""
    geo = cfg.eval.geometry
    row = {"step": int(step), "source": source, "points": int(points.shape[0]), "features": int(points.shape[1])}
    lam = spectrum(points)
    total = float(lam.sum())
    row["effective_dimension"] = participation_ratio(lam, float((points.double() ** 2).sum(dim=1).mean()))
    row["explained_variance_top4"] = float(lam[:4].sum() / total) if total > 0 else math.nan
    row.update(factorization_columns(points, labels))
    try:
        row.update(chord_tests(as_grid(points, labels), periodic=bool(cfg.data.periodic)))
    except ValueError:
        pass
    if geo.homology and total > 0:
        row.update(homology_columns(homology(cfg, points)))
        row["torus"] = int((row["betti_0"], row["betti_1"], row["betti_2"]) == (1, 2, 1))
    return row


def control_fields(table: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """The summary's `controls` block: per source, the measures the torus and factorization claims read."""
    out = {}
    for r in table.to_dict("records"):
        out[r["source"]] = {k: (None if pd.isna(r.get(k)) else
                                (int(r[k]) if k.startswith("betti") or k == "torus" else _r(r[k])))
                            for k in CONTROL_MEASURES if k in r}
    return out


FIGURE_MEASURES = ("additive_share", "subspace_overlap", "orthogonality", "parallelism", "effective_dimension",
                   "betti_1", "betti_2", "h1_bar_2")


def controls_figure(table: pd.DataFrame, title: str):
    """The trained representation beside its controls, one panel per measure of `FIGURE_MEASURES`."""
    from conceptlab.report.control_figures import plot_controls

    measures = [m for m in FIGURE_MEASURES if m in table]
    long = table.melt(id_vars=["source"], value_vars=measures, var_name="measure", value_name="value")
    return plot_controls(long, list(dict.fromkeys(table["source"])), measures, title)


# -- the study -------------------------------------------------------------------------------------------------------
class FactorizationStudy(StudyBase):
    """`data.kind: bumps` — composition vs interpolation and the geometry of the label representation."""

    kind = "bumps"
    version = 4  # 1: before versions entered run ids; 2: 2026-12-01; 3: controls and the factorization measure;
    summary_sections = frozenset({"accuracy_by_step", "betti", "betti_by_step", "betti_cut_splits_eigenspace",
                                  "chord_reference", "chord_tests", "controls", "effective_dimension",
                                  "eigenvalues_final", "explained_variance_top4_final", "final_accuracy",
                                  "persistence_top"})
    run_tables = {
        "composition": ("run", "step", "region", "x", "y", "joint", "n", "region_size", "x_error", "y_error", "located",
                        "single", "joint_single"),  # the last two with eval.composition.count_peaks
        "geometry": ("run", "step", "hook", "t", "effective_dimension", "explained_variance_top4", "points", "features",
                     "eigenvalue_<k>", "additive_share", "additive_chance", "subspace_overlap", "subspace_max_cosine",
                     "betti_<d>", "homology_dims", "homology_cut_split", "h1_bar_<k>", "h2_bar_<k>"),
        "geometry_controls": ("run", "step", "source", "points", "features", "effective_dimension",
                              "explained_variance_top4", "additive_share", "additive_chance", "subspace_overlap",
                              "subspace_max_cosine", "orthogonality", "parallelism_x", "parallelism_y", "parallelism",
                              "betti_<d>", "homology_dims", "homology_cut_split", "h1_bar_<k>", "h2_bar_<k>",
                              "torus"),
    }
    # 4: the encoding_map control seeded by the run's train_seed
    order = 1
    data_config = BumpsDataConfig
    eval_fields = {
        "composition": (CompositionEvalConfig | None, Field(None, description="bumps: generation accuracy per region")),
        "geometry": (GeometryConfig | None,
                     Field(None, description="bumps: representation geometry (None with bumps: default)")),
    }
    exclusive_sections = frozenset(eval_fields)

    def complete_config(self, cfg) -> None:
        if cfg.eval.composition is None:
            cfg.eval.composition = CompositionEvalConfig()
        if cfg.eval.geometry is None:
            cfg.eval.geometry = GeometryConfig()
        check_image_size(cfg.data.image_size, cfg.model)

    def build_data(self, cfg: BumpsDataConfig) -> BumpWorld:
        return BumpWorld(cfg)

    def memory_needs(self, cfg) -> MemoryNeeds:
        """From the lattice size (drawn canvas / spacing, per axis): the training renders; at each checkpoint the
        region bookkeeping (every 2D label compared with every known one), the generations and the geometry cloud
        (one activation map per label at the hook: the bottleneck's size for a `mid.` hook, else the finest
        level's); at the summary the chord tests on the cloud's grid (unit chords for every start and step)."""
        d, comp, geo, m = cfg.data, cfg.eval.composition, cfg.eval.geometry, cfg.model
        image = d.image_size**2 * 4
        labels = math.prod(max(1, math.ceil(d.drawn_size / step)) for step in d.spacing)
        data = labels * d.fraction * d.copies * image * RENDER_PEAK + labels * 64
        regions = 3 * labels**2
        generated = 3 * comp.labels_per_region * image * 2
        cloud_labels = min(geo.labels, labels * geo.label_density**2)
        side = d.image_size // m.pixel_unshuffle
        if geo.hook.startswith("mid."):
            channels, side = m.widths[-1], max(1, side >> (len(m.widths) - 1))
        else:
            channels = m.widths[0]
        features = channels * side**2 if geo.pool == "flatten" else channels
        cloud = cloud_labels * features * 8
        grid_side = math.isqrt(cloud_labels)
        steps = grid_side // 2 if d.periodic else max(1, grid_side - 1)
        chords = 5 * grid_side**2 * steps * features * 8  # two chord stacks, their unit copies, one roll
        homology = 8 * geo.homology_points**2 * 4
        return MemoryNeeds(
            data=int(data), evaluation=int(cloud + max(regions + generated + homology, chords)),
            eval_batch=max(min(comp.max_batch, 3 * comp.labels_per_region) * 2, min(256, cloud_labels)),
            data_keys="data.spacing, data.image_size, data.border, data.copies",
            eval_keys="eval.geometry.labels, eval.geometry.label_density, eval.geometry.pool, data.spacing",
        )

    def check(self, cfg, dgp: BumpWorld, model) -> None:
        """Fail before training on an unknown geometry hook or a refined label grid the `labels` cap would thin back
        out (a sampler step count the DDPM chain cannot use is refused at load: `sample_step_settings`)."""
        geometry = cfg.eval.geometry
        check_hook(model.net, geometry.hook)
        if geometry.label_density > 1:
            n = len(refine_grid(dgp.grid_labels(), geometry.label_density, dgp.period))
            if n > geometry.labels:
                raise ValueError(f"eval.geometry.label_density={geometry.label_density} reads {n} labels, over "
                                 f"eval.geometry.labels={geometry.labels}, which would thin the grid back out; "
                                 f"set eval.geometry.labels={n} or lower the density")
        if _guidance(cfg) > 0 and cfg.diffusion.cfg_dropout <= 0:
            raise ValueError("guidance_scale > 0 needs a model trained with label dropout: diffusion.cfg_dropout > 0")

    def sample_step_settings(self, cfg) -> dict[str, int]:
        """The composition sampler's step count, by the key that sets it (`eval.composition.sample_steps`, else
        `eval.sample_steps`; the diffusion section checks its own)."""
        for key, steps in (("eval.composition.sample_steps", cfg.eval.composition.sample_steps),
                           ("eval.sample_steps", cfg.eval.sample_steps)):
            if steps:
                return {key: steps}
        return {}

    def evaluation(self, cfg, dgp: BumpWorld, model, run: RunFolder, console, progress) -> Evaluation:
        comp, geo = cfg.eval.composition, cfg.eval.geometry
        checkpoints = run.list_checkpoints()
        if not checkpoints:
            raise RuntimeError(f"no checkpoints in {run.checkpoints}")
        final_step = checkpoints[-1][0]
        comp_seed = eval_noise_seed(comp.seed, cfg)
        regions = region_labels(dgp, comp.labels_per_region, comp_seed)
        all_labels = torch.cat(list(regions.values()))
        grid = grid_sublattice(refine_grid(dgp.grid_labels(), geo.label_density, dgp.period), geo.labels)

        def composition(step: int) -> StepResult:
            generator = torch.Generator(device=next(model.parameters()).device).manual_seed(comp_seed)
            images = generate(cfg, model, all_labels, generator, dgp)
            table = accuracy_rows(cfg, dgp, regions, images, step)
            kept, start = {}, 0
            for name, labels in regions.items():
                kept[f"step_{step:07d}/{name}"] = (images[start : start + SAMPLES_KEPT] * 255).round().to(torch.uint8)
                start += len(labels)
            scalars = {f"accuracy/{r.region}/{key}": float(getattr(r, key)) for r in table.itertuples()
                       for key in ("x", "y", "joint")}
            return StepResult(table, samples=kept, info=" ".join(f"{r.region} {r.joint:.2f}" for r in table.itertuples()),
                              scalars=scalars)

        def geometry(step: int) -> StepResult:
            cloud = representation_cloud(cfg, dgp, model, grid)
            row = geometry_row(cfg, cloud.points, step, cloud.labels)
            tensors = None
            if step == final_step:
                tensors = {"points": cloud.points.contiguous(), "labels": cloud.labels.contiguous()}
            scalars = {c: float(row[c].iloc[0]) for c in ("effective_dimension", "explained_variance_top4")
                       if c in row.columns and pd.notna(row[c].iloc[0])}
            return StepResult(row, tensors=tensors, info=f"ED {row['effective_dimension'].iloc[0]:.2f}",
                              scalars=scalars)

        def controls(step: int) -> StepResult:
            """The final checkpoint's representation and its controls through the same analyses, one row each."""
            clouds = {"trained": representation_cloud(cfg, dgp, model, grid).points}
            if "untrained" in geo.controls:
                clouds["untrained"] = representation_cloud(cfg, dgp, untrained_model(cfg, dgp, model), grid).points
            if "random_init" in geo.controls:
                clouds["random_init"] = representation_cloud(cfg, dgp, random_init_model(cfg, dgp, model), grid).points
            if "pixels" in geo.controls:
                images = dgp.render(grid) if geo.input == "data" else torch.zeros(len(grid), *model.image_shape)
                clouds["pixels"] = input_cloud(model.process, images, geo.t, geometry_seed(cfg))
            device = next(model.parameters()).device
            encoding = (encoding_cloud(model.net, dgp.make_prompt(grid).to(device)).cpu()
                        if {"encoding", "encoding_map"} & set(geo.controls) else None)
            if "encoding" in geo.controls:
                clouds["encoding"] = encoding
            if "encoding_map" in geo.controls:
                # each run draws its own random layer (like its own untrained network): seeded by the run's seed
                clouds["encoding_map"] = encoding_map_cloud(encoding, geo.encoding_map_width, run_geometry_seed(cfg))
            rows = [control_row(cfg, source, points, grid, step, dgp.period) for source, points in clouds.items()]
            table = pd.DataFrame(rows)
            info = " ".join(f"{r.source} {r.additive_share:.2f}" for r in table.itertuples() if "additive_share" in table)
            return StepResult(table, info=info)

        def summarize() -> Summary:
            from conceptlab.report.save import figures_wanted

            acc = read_step_tables(run, "composition")
            acc.insert(0, "run", run.name)
            geo_table = read_step_tables(run, "geometry")
            geo_table.insert(0, "run", run.name)
            began = time.perf_counter()
            cloud = read_tensors(run.step_tensors("geometry", final_step))
            topo = topology(cfg, cloud["points"], cloud["labels"], dgp.period)
            topology_seconds = time.perf_counter() - began
            samples_path = run.file(SAMPLES_FILE)
            samples = read_tensors(samples_path) if samples_path.is_file() else {}
            fields = summarize_fields(acc, geo_table, topo)
            tables = {"composition": acc, "geometry": geo_table}
            if run.step_files("geometry_controls"):
                control_table = read_step_tables(run, "geometry_controls")
                control_table.insert(0, "run", run.name)
                tables["geometry_controls"] = control_table
                fields["controls"] = control_fields(control_table)
            draw = figures_wanted()  # CONCEPTLAB_FIGURES=none: none drawn
            figs = figures(cfg, acc, geo_table, cloud, topo, samples) if draw else {}
            if "controls" in fields and draw:
                figs["controls.png"] = controls_figure(control_table, f"{cfg.name} ({run.name}), step {final_step}")
            return Summary(
                fields=fields,
                tables=tables,
                files={"homology.json": topo},
                figures=figs,
                seconds={"topology": topology_seconds},
            )

        return Evaluation(
            measurements=[
                Measurement("composition", composition, every=comp.every, use_ema=comp.use_ema,
                            samples_file=SAMPLES_FILE),
                Measurement("geometry", geometry, every=geo.every, use_ema=geo.use_ema),
                Measurement("geometry_controls", controls, every=None, use_ema=geo.use_ema),
            ],
            summarize=summarize,
        )


STUDY = FactorizationStudy()
