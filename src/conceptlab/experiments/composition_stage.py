"""The evaluation of `bumps` runs: generation accuracy per label region and representation geometry per checkpoint.

Run by `experiments.runner` (via `evaluation_for("bumps")`) after training. Its one job: turn a bump-world run's
checkpoints into the composition / interpolation and factorization measurements of Liang et al. 2024. Files it
owns in the run folder:

    composition/step_*.parquet          per checkpoint: region × (x, y, joint) generation accuracy
    geometry/step_*.parquet             per checkpoint: effective dimension, explained variance, eigenvalues
                                        (and Betti numbers, longest bars: homology_over_training)
    geometry/cloud_step_*.safetensors   the final checkpoint's representation cloud (points, labels)
    composition_samples.safetensors     a few uint8 generations per region and checkpoint (for the figure)
    composition.parquet, geometry.parquet   all checkpoints, with the run id first
    figures/*.png

Per checkpoint (every k-th and the last, skipped when its parquet file exists, so a rerun resumes):

- **generation accuracy**: each region of `dgp.regions()` (2D `train` labels, 2D `held_out` labels) is subsampled
  to at most `eval.composition.labels_per_region` labels (seeded), one image is generated per label (all regions
  in one sampling pass, `max_batch` images at a time), located with `probes.locator.locate` and scored with
  `generation_accuracy` (x, y, joint within `tolerance` px; wrapped on a torus);
- **geometry**: activations at `eval.geometry.hook` and time `t` for a sub-lattice of `dgp.grid_labels()` (refined
  `geometry.label_density`× per axis first, `refine_grid`; then at most `geometry.labels` labels, still a full
  grid), one forward pass on the noised ground-truth images (or the shared noise, `input: noise`), pooled;
  effective dimension (participation ratio), explained variance of the top 4 PCs and the top 15 eigenvalues; with
  `geometry.homology_over_training`, also the Betti numbers and the 3 longest H1 and H2 bars (`betti_0..2`,
  `h1_bar_1..3`, `h2_bar_1..3`), so the run summary has `betti_by_step`.

At the final checkpoint: persistent homology (Betti numbers) of the cloud and the chord (orthogonality /
parallelism) tests on the grid, next to the same tests on ideal 3D-torus and Clifford-torus references.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from rich.console import Console

from conceptlab.analysis.geometry import (
    as_grid,
    chord_tests,
    clifford_torus,
    participation_ratio,
    persistent_homology,
    torus_3d,
)
from conceptlab.analysis.representation import check_hook, collect_representations
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.emergence_stage import chosen_checkpoints, load_checked
from conceptlab.experiments.progress import progress_bar
from conceptlab.probes.locator import generation_accuracy, locate
from conceptlab.store.files import read_tensors, write_json, write_parquet, write_tensors
from conceptlab.train.checkpoints import list_checkpoints
from conceptlab.train.precision import autocast, resolve_bf16
from conceptlab.train.trainer import load_weights

SAMPLES_KEPT = 6  # generations kept per region and checkpoint for the sample figure
EIGENVALUES = 15  # top PCA eigenvalues stored per checkpoint


class CompositionFolder:
    """Paths of the composition / geometry files inside a run folder."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.checkpoints = self.root / "checkpoints"
        self.composition = self.root / "composition"
        self.geometry = self.root / "geometry"
        self.composition_table = self.root / "composition.parquet"
        self.geometry_table = self.root / "geometry.parquet"
        self.samples = self.root / "composition_samples.safetensors"
        self.homology = self.root / "homology.json"
        self.figures = self.root / "figures"

    def step_file(self, folder: Path, step: int) -> Path:
        return folder / f"step_{step:07d}.parquet"

    def cloud_file(self, step: int) -> Path:
        return self.geometry / f"cloud_step_{step:07d}.safetensors"


# -- checks ----------------------------------------------------------------------------------------------------------
def _sample_steps(cfg: RunConfig) -> int:
    return cfg.eval.composition.sample_steps or cfg.eval.sample_steps or cfg.diffusion.sample_steps


def _guidance(cfg: RunConfig) -> float:
    g = cfg.eval.composition.guidance_scale
    return cfg.diffusion.guidance_scale if g is None else g


def check(cfg: RunConfig, model) -> None:
    """Fail before training on an unknown geometry hook, a refined label grid the `labels` cap would thin back out, or
    a sampler step count the DDPM chain cannot use."""
    geometry = cfg.eval.geometry
    if geometry is not None:
        check_hook(model.net, geometry.hook)
        if geometry.label_density > 1:
            from conceptlab.data import build_dgp

            dgp = build_dgp(cfg.data)
            n = len(refine_grid(dgp.grid_labels(), geometry.label_density, dgp.period))
            if n > geometry.labels:
                raise ValueError(f"eval.geometry.label_density={geometry.label_density} reads {n} labels, over "
                                 f"eval.geometry.labels={geometry.labels}, which would thin the grid back out; "
                                 f"set eval.geometry.labels={n} or lower the density")
    steps = _sample_steps(cfg)
    if cfg.diffusion.process == "ddpm" and cfg.diffusion.ddpm_steps % steps:
        raise ValueError(
            f"eval.composition.sample_steps ({steps}) must divide diffusion.ddpm_steps ({cfg.diffusion.ddpm_steps})"
        )
    if _guidance(cfg) > 0 and cfg.diffusion.cfg_dropout <= 0:
        raise ValueError("guidance_scale > 0 needs a model trained with label dropout: diffusion.cfg_dropout > 0")


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
def generate(cfg: RunConfig, model, labels: torch.Tensor, generator: torch.Generator, dgp) -> torch.Tensor:
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


def accuracy_rows(cfg: RunConfig, dgp, regions: dict[str, torch.Tensor], images: torch.Tensor, step: int) -> pd.DataFrame:
    """Rows (step, region, x, y, joint, n, region_size, x_error, y_error, located) of generations `images` made at
    the concatenated regions (n labels scored out of the region's region_size)."""
    data = cfg.data
    kind = "bump" if data.image == "bump+stripes" else data.image  # the regions scored are 2D labels: bumps
    pred = locate(images, kind=kind, border=data.border, periodic=data.periodic)
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
        rows.append({"step": int(step), "region": name, **acc, "n": len(labels), "region_size": sizes.get(name),
                     "x_error": float(med[0]), "y_error": float(med[1]),
                     "located": float((~p.isnan()).all(dim=1).double().mean())})
    return pd.DataFrame(rows)


def representation_cloud(cfg: RunConfig, dgp, model, labels: torch.Tensor):
    """The activation cloud `[M, D]` at the geometry hook and time over `labels`."""
    geo = cfg.eval.geometry
    images = dgp.render(labels) if geo.input == "data" else None
    shape = None if images is not None else (dgp.channels, dgp.image_size, dgp.image_size)
    return collect_representations(
        model.net, model.process, labels, geo.hook, geo.t, image_shape=shape, images=images,
        prompts=dgp.make_prompt(labels), pool=geo.pool, seed=geo.seed,
    )


def spectrum(points: torch.Tensor) -> np.ndarray:
    """PCA eigenvalues (descending) of a cloud `[M, D]`: `analysis.geometry.pca`'s, from torch's SVD (numpy's
    multithreaded SVD is ~20× slower on a shared CPU)."""
    a = points.double()
    return (torch.linalg.svdvals(a - a.mean(dim=0)) ** 2 / len(a)).numpy()


def geometry_row(cfg: RunConfig, points: torch.Tensor, step: int) -> pd.DataFrame:
    """One row: step, hook, t, effective dimension, explained variance of the top 4 PCs, top 15 eigenvalues."""
    geo = cfg.eval.geometry
    lam = spectrum(points)
    eig = np.pad(lam[:EIGENVALUES], (0, max(0, EIGENVALUES - len(lam))))
    mean_square_norm = float((points.double() ** 2).sum(dim=1).mean())
    row = {"step": int(step), "hook": geo.hook, "t": geo.t,
           "effective_dimension": participation_ratio(lam, mean_square_norm),
           "explained_variance_top4": float(lam[:4].sum() / lam.sum()), "points": int(points.shape[0]),
           "features": int(points.shape[1])}
    row.update({f"eigenvalue_{i + 1}": float(v) for i, v in enumerate(eig)})
    if geo.homology and geo.homology_over_training:
        row.update(homology_columns(homology(cfg, points)))
    return pd.DataFrame([row])


def homology(cfg: RunConfig, points: torch.Tensor) -> dict[str, Any]:
    """`analysis.geometry.persistent_homology` of a cloud with the run's settings (dimensions 0–2)."""
    geo = cfg.eval.geometry
    return persistent_homology(points, max_dim=2, n_components=geo.homology_dims, n_points=geo.homology_points,
                               threshold=geo.persistence_threshold, seed=geo.seed, n_perm=geo.homology_landmarks,
                               rule=geo.betti_rule)


def longest_bars(diagram: np.ndarray, scale: float, k: int) -> list[float]:
    """The (at most) `k` longest finite bars of one diagram `[n, 2]` as fractions of `scale` (the cloud's diameter)."""
    diagram = np.asarray(diagram, dtype=float).reshape(-1, 2)
    finite = diagram[np.isfinite(diagram).all(axis=1)]
    return [float(v) for v in np.sort(finite[:, 1] - finite[:, 0])[::-1][:k] / scale] if len(finite) else []


def homology_columns(ph: dict[str, Any]) -> dict[str, float | int]:
    """Geometry-row columns of one homology result: betti_0..2 and the 3 longest finite H1 and H2 bars
    (`h1_bar_1`, …, as fractions of the diameter)."""
    out: dict[str, float | int] = {f"betti_{k}": int(b) for k, b in enumerate(ph["betti"])}
    for dim in (1, 2):
        bars = longest_bars(ph["diagrams"][dim], ph["scale"], 3)
        out.update({f"h{dim}_bar_{i + 1}": v for i, v in enumerate(bars + [0.0] * (3 - len(bars)))})
    return out


def evaluate_checkpoints(cfg: RunConfig, folder: CompositionFolder, dgp, model, console: Console, progress: bool) -> dict[str, float]:
    """Accuracy and geometry at every chosen checkpoint not yet done; returns seconds per part."""
    comp, geo = cfg.eval.composition, cfg.eval.geometry
    checkpoints = list_checkpoints(folder.checkpoints)
    if not checkpoints:
        raise RuntimeError(f"no checkpoints in {folder.checkpoints}")
    final_step = checkpoints[-1][0]
    acc_steps = {s for s, _ in chosen_checkpoints(checkpoints, comp.every)}
    geo_steps = {s for s, _ in chosen_checkpoints(checkpoints, geo.every)}
    todo = []
    for step, path in checkpoints:
        need_acc = step in acc_steps and not folder.step_file(folder.composition, step).is_file()
        need_geo = step in geo_steps and not folder.step_file(folder.geometry, step).is_file()
        if step == final_step and not folder.cloud_file(step).is_file():
            need_geo = True
        if need_acc or need_geo:
            todo.append((step, path, need_acc, need_geo))
    seconds = {"composition": 0.0, "geometry": 0.0}
    if not todo:
        return seconds
    folder.composition.mkdir(parents=True, exist_ok=True)
    folder.geometry.mkdir(parents=True, exist_ok=True)
    regions = region_labels(dgp, comp.labels_per_region, comp.seed)
    all_labels = torch.cat(list(regions.values()))
    grid = grid_sublattice(refine_grid(dgp.grid_labels(), geo.label_density, dgp.period), geo.labels)
    kept: dict[str, torch.Tensor] = {}
    model.eval()
    with progress_bar(console, progress) as bar:
        task = bar.add_task("composition", total=len(todo), info="")
        for step, path, need_acc, need_geo in todo:
            tensors = load_checked(path, cfg)  # read once, for accuracy and geometry
            load_weights(model, tensors, use_ema=comp.use_ema)
            info = []
            if need_acc:
                began = time.perf_counter()
                generator = torch.Generator(device=next(model.parameters()).device).manual_seed(comp.seed)
                images = generate(cfg, model, all_labels, generator, dgp)
                table = accuracy_rows(cfg, dgp, regions, images, step)
                write_parquet(folder.step_file(folder.composition, step), table)
                start = 0
                for name, labels in regions.items():
                    kept[f"step_{step:07d}/{name}"] = (images[start : start + SAMPLES_KEPT] * 255).round().to(torch.uint8)
                    start += len(labels)
                info += [f"{r.region} {r.joint:.2f}" for r in table.itertuples()]
                seconds["composition"] += time.perf_counter() - began
            if need_geo:
                began = time.perf_counter()
                if geo.use_ema != comp.use_ema:  # the weights loaded above are the wrong set
                    load_weights(model, tensors, use_ema=geo.use_ema)
                cloud = representation_cloud(cfg, dgp, model, grid)
                row = geometry_row(cfg, cloud.points, step)
                write_parquet(folder.step_file(folder.geometry, step), row)
                if step == final_step:
                    write_tensors(folder.cloud_file(step), {"points": cloud.points.contiguous(),
                                                            "labels": cloud.labels.contiguous()})
                info.append(f"ED {row['effective_dimension'].iloc[0]:.2f}")
                seconds["geometry"] += time.perf_counter() - began
            bar.update(task, advance=1, info=" ".join(info))
    if kept:
        old = read_tensors(folder.samples) if folder.samples.is_file() else {}
        write_tensors(folder.samples, {**old, **kept})
    return seconds


# -- run level -------------------------------------------------------------------------------------------------------
def _collect(folder: Path, table: Path, run: str) -> pd.DataFrame:
    parts = sorted(folder.glob("step_*.parquet"))
    if not parts:
        raise RuntimeError(f"no evaluated checkpoints in {folder}")
    out = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True).sort_values("step", kind="stable")
    out = out.reset_index(drop=True)
    out.insert(0, "run", run)
    write_parquet(table, out)
    return out


def topology(cfg: RunConfig, points: torch.Tensor, labels: torch.Tensor, period: float | None) -> dict[str, Any]:
    """Betti numbers of the cloud (if enabled) and the chord tests on the grid, with the ideal tori's values."""
    geo = cfg.eval.geometry
    out: dict[str, Any] = {}
    if geo.homology:
        ph = homology(cfg, points)
        out["homology"] = {"betti": list(ph["betti"]), "scale": ph["scale"], "threshold": ph["threshold"],
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


def summarize(acc: pd.DataFrame, geo: pd.DataFrame, topo: dict[str, Any]) -> dict[str, Any]:
    """The summary fields of a bumps run (see the module docstring)."""
    final_step = int(acc["step"].max())
    final = acc[acc["step"] == final_step]
    ed = geo.sort_values("step")
    i_max = int(ed["effective_dimension"].to_numpy().argmax())
    eig_cols = [c for c in geo.columns if c.startswith("eigenvalue_")]
    summary: dict[str, Any] = {
        "checkpoints": int(acc["step"].nunique()),
        "final_step": final_step,
        "final_accuracy": {r.region: {"x": _r(r.x), "y": _r(r.y), "joint": _r(r.joint), "n": int(r.n)}
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


def save_figures(cfg: RunConfig, folder: CompositionFolder, acc: pd.DataFrame, geo: pd.DataFrame,
                 cloud: dict[str, torch.Tensor], topo: dict[str, Any]) -> list[Path]:
    """Draw the run's composition / geometry figures and write them as PNG under figures/."""
    import matplotlib.pyplot as plt

    from conceptlab.report import composition_figures as cf

    folder.figures.mkdir(exist_ok=True)
    figures = {"generation_accuracy.png": cf.plot_generation_accuracy(acc, cfg.eval.composition.tolerance),
               "effective_dimension.png": cf.plot_effective_dimension(geo, cfg.eval.geometry.persistence_threshold)}
    points = cloud["points"].double()
    if len(points) >= 4:
        centred = points - points.mean(dim=0)
        axes = torch.linalg.svd(centred, full_matrices=False).Vh[:3]
        figures["pca_projection.png"] = cf.plot_pca_projection((centred @ axes.T).numpy(), cloud["labels"].numpy(),
                                                               cyclic=cfg.data.periodic)
    if "homology" in topo:
        h = topo["homology"]
        figures["barcode.png"] = cf.plot_barcode([np.asarray(d).reshape(-1, 2) for d in h["diagrams"]],
                                                 h["threshold"], h["betti"], h["infinite_bars"])
    samples = read_tensors(folder.samples) if folder.samples.is_file() else {}
    if samples:
        figures["generations.png"] = cf.plot_generations(samples)
    log = folder.root / "train_log.jsonl"
    if log.is_file():
        table = pd.read_json(log, lines=True)
        if not table.empty:
            from conceptlab.report.figures import plot_loss

            figures["loss.png"] = plot_loss(table)
    paths = []
    for name, fig in figures.items():
        path = folder.figures / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def evaluate(cfg: RunConfig, run_dir: Path, dgp, model, console: Console, progress: bool = True
             ) -> tuple[dict[str, Any], dict[str, float]]:
    """`bumps` data: accuracy and geometry at every chosen checkpoint, run-level tables, topology, figures."""
    folder = CompositionFolder(run_dir)
    seconds = evaluate_checkpoints(cfg, folder, dgp, model, console, progress)
    run = folder.root.name
    acc = _collect(folder.composition, folder.composition_table, run)
    geo = _collect(folder.geometry, folder.geometry_table, run)
    began = time.perf_counter()
    final_step = list_checkpoints(folder.checkpoints)[-1][0]
    cloud = read_tensors(folder.cloud_file(final_step))
    topo = topology(cfg, cloud["points"], cloud["labels"], dgp.period)
    write_json(folder.homology, topo)
    seconds["topology"] = time.perf_counter() - began
    summary = summarize(acc, geo, topo)
    began = time.perf_counter()
    summary["figures"] = [str(p.relative_to(folder.root)) for p in save_figures(cfg, folder, acc, geo, cloud, topo)]
    seconds["figures"] = time.perf_counter() - began
    return summary, seconds
