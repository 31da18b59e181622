"""The `shapes3d` study (Franzese et al. 2024): when along generation a VE model commits to each attribute.

Generation time τ runs from 0 (pure noise, σ_max) to 1 (data, σ_min). At the final checkpoint (and every `every`-th
one if set) of a run trained on `data.kind: shapes3d`, three measurements, all per attribute V:

  mutual_information  I(V; Y_0..τ) by the denoiser-difference estimator (conditional denoiser given V alone vs the
                      unconditional one, both the same network under attribute-label dropout), midpoint rule over
                      `mi_points` τ-cells; reference H(V) = ln K.
  mutual_information_bound
                      the lower bound H(V) − E[−log q(v | path)] on the same τ grid, q the model's own posterior from
                      its conditional denoisers' ancestral kernels along `mi_paths` forward-noised data paths
                      (`analysis.mutual_information.posterior_bound_curve`); cannot exceed H(V).
  forking_entropy     `roots` unconditional trajectories forked at each τ of `taus` into `forks` endings, read by an
                      attribute classifier trained on ground-truth renders; entropy of the endings' classes / ln K
                      (reference 1 = the prior).
  linear_probe        held-out accuracy of a logistic regression on activations at `probe_hook` of forward-noised
                      renders under the null prompt (so the label cannot leak through the conditioning); reference
                      chance = 1/K.

plus a sanity check (prompted generations read as their prompt by the classifier, which must itself reach
`classifier_min_accuracy` on held-out renders). The commitment time of each attribute under each measure is the τ at
which its curve has gone `commitment_level` of the way from start to end — `analysis.commitment`; mutual information
from 0 to H(V), forking entropy from its first to its last value, probe accuracy from chance to its last value.
Both mutual-information curves go from 0 to H(V). The difference
estimate is also scored against its own final value (`mutual_information_final`, not a primary measure: an imperfect
network's estimate overshoots H(V) at small σ, where the bound does not).
The measures' agreement is the Spearman correlation of their commitment times. Two sizes of each attribute say which
the theory expects first: its pixel footprint (fraction of pixels that change when it alone changes) and its signal
(root-mean-square pixel change between two of its levels, everything else equal); the summary gives the Spearman
correlation of each with the commitment order. The signal is the better predictor where an attribute changes many
pixels slightly (a shape's shading) and another few pixels strongly (an object's hue).
The classifier is trained on the run's own ground truth: procedural renders, or the images of the h5 file for
`data.source: h5`.

Files (run folder): `abstractions/step_XXXXXXX/{conditional.json, mutual_information.parquet,
mutual_information_bound.parquet, forking_entropy.parquet, linear_probe.parquet}` (each written atomically and
skipped when present, so an interrupted evaluation resumes piece by piece; each measure's `<piece>.safetensors` beside
it keeps its per-unit totals — each draw, path, root or held-out combination — for the paired departure test), `abstractions.parquet` (long: run, step, measure, attribute, tau, sigma, logsnr,
value, stderr, reference, reference_name), `commitment.parquet` (run, step, measure, attribute, commitment_tau,
commitment_sigma, commitment_logsnr, start, end, level, rank, primary) and `figures/abstractions.png`.
"""

from __future__ import annotations

import math
import time
from typing import Callable, ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from pydantic import Field, field_validator
from torch import Tensor, nn

from conceptlab.analysis.commitment import (
    commitment_order,
    commitment_table,
    departure,
    measure_agreement,
    paired_stderr,
)
from conceptlab.analysis.forking_entropy import forking_entropy_curves
from conceptlab.analysis.linear_probes import cluster_totals, linear_probe_curves, noisy_activations, noisy_inputs
from conceptlab.analysis.mutual_information import mutual_information_curve, posterior_bound_curve
from conceptlab.analysis.representation import check_hook
from conceptlab.config_base import StrictConfig
from conceptlab.data.labelled import unit_float
from conceptlab.data.shapes3d import FACTOR_SIZES, FACTORS
from conceptlab.data.shapes3d_world import CHUNK, Shapes3DDataConfig, Shapes3DWorld
from conceptlab.models.forking import network_denoiser
from conceptlab.models.unet import check_image_size
from conceptlab.probes.attribute_classifier import (
    AttributeClassifierConfig,
    load_or_train_attribute_classifier,
)
from conceptlab.store.files import read_json, read_parquet, read_tensors
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies.base import (
    Evaluation,
    Measurement,
    MemoryNeeds,
    StepResult,
    StudyBase,
    Summary,
    run_due_checkpoints,
    eval_noise_seed,
    once_each,
    random_init_model,
    untrained_model,
)

DIRECTORY = "abstractions"  # per checkpoint: abstractions/step_XXXXXXX/<piece>.parquet (conditional: .json)
CONTROL_PREFIX = {"untrained": "untrained__", "random_init": "random_init__", "pixels": "pixels__"}  # final step only
MEASURES = ("mutual_information", "mutual_information_bound", "forking_entropy", "linear_probe")  # primary, figure order
DIRECTIONS = {"mutual_information": 1, "mutual_information_bound": 1, "mutual_information_final": 1,
              "forking_entropy": -1, "linear_probe": 1}  # how each curve moves as an attribute is committed
PIECES = ("conditional", *MEASURES)
COLUMNS = ["run", "step", "measure", "attribute", "tau", "sigma", "logsnr", "value", "stderr", "reference",
           "reference_name"]


class AbstractionsConfig(StrictConfig):
    """When along generation each attribute is committed (data.kind=shapes3d), three ways, at the final checkpoint.

    τ runs from 0 (pure noise) to 1 (data). Mutual information by the denoiser-difference estimator (midpoint rule
    over `mi_points` noise levels) and by the model-posterior lower bound (`mi_paths` paths), forking entropy (`roots` trajectories forked into `forks` continuations at each τ,
    read by an attribute classifier trained on ground-truth renders), linear probes on activations at `probe_hook`.
    """

    taus: list[float] = Field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)], min_length=2)
    mi_points: int = Field(200, ge=2, description="midpoint-rule points of the MI integral (paper: 999)")
    mi_samples: int = Field(64, ge=1, description="(image, noise) pairs per noise level and attribute")
    mi_paths: int = Field(64, ge=2, description="forward-noised data paths of the MI lower bound (K calls per level)")
    mi_bound_points: int | None = Field(
        None, ge=2, description="noise levels of the MI lower bound's paths (None: mi_points); coarser is cheaper, looser"
    )
    roots: int = Field(32, ge=1, description="forking: trajectories per τ")
    forks: int = Field(8, ge=2, description="forking: continuations per root (K)")
    sample_steps: int = Field(40, ge=2, description="steps of the stochastic sampler from τ=0 to 1")
    probe_hook: str = Field("mid.blocks.0.hook_out", description="hook point the linear probes read")
    probe_images: int = Field(512, ge=8, description="noised renders per τ for the linear probes")
    probe_test_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    commitment_level: float = Field(0.5, gt=0.0, lt=1.0, description="commitment: τ where a curve is this far from start to end")
    classifier_width: int = Field(12, ge=4)
    classifier_images: int = Field(3000, ge=50)
    classifier_epochs: int = Field(6, ge=1)
    classifier_min_accuracy: float = Field(0.99, ge=0.0, le=1.0, description="held-out accuracy the classifier must reach")
    classifier_lr: float = Field(5e-3, gt=0.0, description="peak learning rate of the attribute classifier")
    conditional_samples: int = Field(256, ge=1, description="prompted generations read by the classifier (sanity check)")
    probe_pool: int = Field(2, ge=1, description="linear probes: spatial maps average-pooled to pool×pool")
    probe_l2: float = Field(1e-3, ge=0.0, description="linear probes: L2 penalty of the logistic regression")
    batch_size: int = Field(512, ge=1, description="images per forward pass of the measurements")
    every: int | None = Field(None, ge=1, description="also every k-th checkpoint (None: the final checkpoint only)")
    controls: list[Literal["untrained", "random_init", "pixels"]] = Field(
        default_factory=lambda: ["untrained", "pixels"],
        description="at the final checkpoint, the same measures on controls: the network exactly as training starts "
        "(untrained: its zero-initialised layers make the denoiser ignore the prompt, so its MI and forking curves "
        "are trivially flat), the same architecture with random weights in every layer (random_init; all four "
        "measures) and the noised images themselves (pixels; linear probes)",
    )
    added_fields: ClassVar[tuple[str, ...]] = ("departure_alpha",)
    departure_margin: float = Field(
        0.1, gt=0.0, lt=1.0, description="a trained curve departs from a control where, at some τ, they differ by "
        "more than this fraction of the trained curve's range (fixed before looking), and beyond noise "
        "(departure_alpha)",
    )
    departure_alpha: float = Field(
        0.05, gt=0.0, lt=1.0, description="…and by more than their measurement noise: a test at each τ on the "
        "standard error of the two curves' difference, paired on the units they share (the same draws, paths, roots "
        "or held-out combinations; Student's t on G − 1 degrees of freedom; before 2026-12-05 an unpaired z test on "
        "√(se_t² + se_c²)), Bonferroni over the τ grid at this level (analysis.commitment.departure)",
    )
    use_ema: bool = True
    seed: int = Field(0, ge=0)

    @field_validator("controls")
    @classmethod
    def _once_each(cls, v: list[str]) -> list[str]:
        return once_each(v)

    @field_validator("taus")
    @classmethod
    def _unit_interval(cls, v: list[float]) -> list[float]:
        bad = [t for t in v if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(f"every τ must be in [0, 1] (0 = noise, 1 = data), got {bad}")
        if sorted(set(v)) != list(v):
            raise ValueError(f"taus must be increasing and distinct, got {v}")
        return v



# -- classifier ---------------------------------------------------------------------------------------------------
def classifier_config(cfg, dgp) -> AttributeClassifierConfig:
    """The attribute classifier of a run: its attributes, the world's fixed factors and chosen levels."""
    a = cfg.eval.abstractions
    restricted = {name: tuple(dgp.levels[name]) for name in dgp.attributes
                  if len(dgp.levels[name]) < _factor_size(name)}
    return AttributeClassifierConfig(
        attributes=tuple(dgp.attributes), image_size=dgp.image_size, fixed=dict(dgp.fixed), levels=restricted,
        width=a.classifier_width, train_images=a.classifier_images, epochs=a.classifier_epochs, lr=a.classifier_lr,
        seed=a.seed, h5_path=dgp.cfg.h5_path if dgp.cfg.source == "h5" else None,
    )


def _factor_size(name: str) -> int:
    return FACTOR_SIZES[FACTORS.index(name)]


def load_classifier(cfg, dgp) -> tuple[nn.Module, dict]:
    """The cached (or freshly trained) attribute classifier; ValueError (one line) below `classifier_min_accuracy`."""
    a = cfg.eval.abstractions
    classifier, report = load_or_train_attribute_classifier(classifier_config(cfg, dgp))
    if report["min_accuracy"] < a.classifier_min_accuracy:
        per = ", ".join(f"{k} {v:.3f}" for k, v in report["held_out_accuracy"].items())
        raise ValueError(
            f"attribute classifier held-out accuracy {report['min_accuracy']:.3f} ({per}) is below "
            f"eval.abstractions.classifier_min_accuracy {a.classifier_min_accuracy}; train it longer "
            f"(classifier_epochs, classifier_images, classifier_width)"
        )
    return classifier.eval(), report


def attribute_reader(classifier: nn.Module, dgp, batch_size: int = 512) -> Callable[[Tensor], dict[str, Tensor]]:
    """images [N, 3, S, S] in [0, 1] (or uint8) → {attribute: class [N]} (position among the world's levels; the classifier's
    logits restricted to those levels)."""
    device = next(classifier.parameters()).device
    columns = {name: torch.tensor(dgp.levels[name], device=device) for name in dgp.attributes}

    @torch.no_grad()
    def read(images: Tensor) -> dict[str, Tensor]:
        parts: dict[str, list[Tensor]] = {name: [] for name in dgp.attributes}
        for i in range(0, images.shape[0], batch_size):
            logits = classifier(unit_float(images[i : i + batch_size]).to(device, torch.float32))
            for name in dgp.attributes:
                parts[name].append(logits[name][:, columns[name]].argmax(1).cpu())
        return {name: torch.cat(p) for name, p in parts.items()}

    return read


# -- footprint ----------------------------------------------------------------------------------------------------
def _level_sweeps(dgp, bases: int, seed: int) -> dict[str, Tensor]:
    """Per attribute, renders [bases, K, 3, S, S] of `bases` random combinations with that attribute alone run
    through its K levels."""
    g = torch.Generator().manual_seed(seed)
    base = dgp.classes[torch.randint(len(dgp.classes), (bases,), generator=g)]
    out = {}
    for j, name in enumerate(dgp.attributes):
        k = len(dgp.levels[name])
        classes = base.repeat_interleave(k, 0)
        classes[:, j] = torch.arange(k).repeat(bases)
        images = dgp.render(classes)
        out[name] = images.reshape(bases, k, *images.shape[1:])
    return out


def pixel_footprint(dgp, bases: int = 16, seed: int = 0, threshold: float = 1e-3,
                    sweeps: dict[str, Tensor] | None = None) -> dict[str, float]:
    """Per attribute, the mean fraction of pixels that change when that attribute alone runs through its levels
    (over `bases` random combinations of the others; `sweeps` from `_level_sweeps` if already rendered)."""
    out = {}
    for name, images in (sweeps or _level_sweeps(dgp, bases, seed)).items():
        spread = images.amax(1) - images.amin(1)  # [bases, 3, S, S]
        out[name] = float((spread.amax(1) > threshold).float().mean())
    return out


def attribute_signal(dgp, bases: int = 16, seed: int = 0, sweeps: dict[str, Tensor] | None = None) -> dict[str, float]:
    """Per attribute, the root-mean-square pixel change between two of its levels with everything else the same
    (over `bases` random combinations of the others and every pair of levels): how much of the image, and how
    strongly, the attribute moves — the concept signal of Park et al., and the "impact in norm" Franzese et al.
    give for the order of commitment."""
    out = {}
    for name, images in (sweeps or _level_sweeps(dgp, bases, seed)).items():
        flat = images.flatten(2)  # [bases, K, P]
        k = flat.shape[1]
        sq = (flat[:, :, None] - flat[:, None]).pow(2).mean(-1)  # [bases, K, K]
        out[name] = float((sq.sum((1, 2)) / (k * (k - 1))).mean().sqrt())
    return out


# -- the measurements ---------------------------------------------------------------------------------------------
def _sigma_logsnr(process, taus) -> tuple[list[float], list[float]]:
    sigma = process.sigma(1.0 - torch.as_tensor(taus, dtype=torch.float64))
    return sigma.tolist(), (-2.0 * sigma.log()).tolist()


def _rows(measure: str, attribute: str, taus, values, stderr, process, reference: float, name: str) -> pd.DataFrame:
    sigma, logsnr = _sigma_logsnr(process, list(taus))
    n = len(sigma)
    return pd.DataFrame({
        "measure": measure, "attribute": attribute, "tau": [float(t) for t in taus], "sigma": sigma,
        "logsnr": logsnr, "value": [float(v) for v in values],
        "stderr": [float(v) for v in stderr] if stderr is not None else [math.nan] * n,
        "reference": float(reference), "reference_name": name,
    })


def _keep_units(units: dict | None, measure: str, attribute: str, totals: Tensor | None,
                sizes: Tensor | None = None) -> None:
    """Put one curve's per-unit totals `[T, G]` (and its units' sizes `[G]` for a clustered curve) into `units` under
    `<measure>/<attribute>/totals` and `/sizes` (float32: written beside the piece's table, read by `summarize` for
    the paired departure test)."""
    if units is None or totals is None:
        return
    units[f"{measure}/{attribute}/totals"] = totals.detach().float().cpu().contiguous()
    if sizes is not None:
        units[f"{measure}/{attribute}/sizes"] = sizes.detach().float().cpu().contiguous()


def _model_space(dgp, process, rows: Tensor, device) -> Tensor:
    """The combinations at `rows` as model inputs on `device` (converted per batch: the world keeps uint8)."""
    return process.to_model_space(dgp.images(rows)).to(device)


@torch.no_grad()
def conditional_accuracy(a: AbstractionsConfig, dgp, model, read) -> dict[str, float]:
    """Prompted generations (random combinations, every attribute given) read back as their prompt, per attribute."""
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(a.seed + 11)
    classes = dgp.classes[torch.randint(len(dgp.classes), (a.conditional_samples,), generator=g)]
    prompts = dgp.make_prompt(classes).to(device)
    gen = torch.Generator(device=device).manual_seed(a.seed + 12)
    images = torch.cat([model.sample(prompts[i : i + a.batch_size], a.sample_steps, gen).float().cpu()
                        for i in range(0, len(prompts), a.batch_size)])
    got = read(images)
    return {name: float((got[name] == classes[:, j]).float().mean()) for j, name in enumerate(dgp.attributes)}


def _attribute_denoiser_and_pairs(dgp, model, j: int):
    """For attribute j: the network's denoiser given that attribute alone, (x, σ, class) → x̂_0, and a sampler of
    (model-space image, class) pairs from the world's combinations."""
    process, net = model.process, model.net
    device = next(model.parameters()).device
    name, classes = dgp.attributes[j], dgp.classes

    def d_cond(x, sigma, v):
        return process.denoise_ve(net, x, sigma, dgp.prompt.only(name, v.cpu()).to(x.device))

    def pairs(n, g):
        idx = torch.randint(len(classes), (n,), generator=g)
        return _model_space(dgp, process, idx, device), classes[idx, j]

    return d_cond, pairs


@torch.no_grad()
def mutual_information_table(a: AbstractionsConfig, dgp, model, units: dict | None = None) -> pd.DataFrame:
    """I(V; Y_0..τ) per attribute on the midpoint-rule grid (τ = 0, 1/P, ..., 1), reference H(V) = ln K; each
    draw's running sum into `units` (`_keep_units`), where given."""
    process, net = model.process, model.net
    parts = []
    for j, name in enumerate(dgp.attributes):
        d_cond, pairs = _attribute_denoiser_and_pairs(dgp, model, j)

        def d_uncond(x, sigma):
            return process.denoise_ve(net, x, sigma, dgp.prompt.null(x.shape[0]).to(x.device))

        curve = mutual_information_curve(d_cond, d_uncond, pairs, process, points=a.mi_points,
                                         samples_per_point=a.mi_samples, batch_size=a.batch_size, seed=a.seed + j)
        k = len(dgp.levels[name])
        _keep_units(units, "mutual_information", name, curve.units)
        parts.append(_rows("mutual_information", name, curve.tau.tolist(), curve.mi, curve.stderr, process,
                           math.log(k), "H(V)"))
    return pd.concat(parts, ignore_index=True)


@torch.no_grad()
def mutual_information_bound_table(a: AbstractionsConfig, dgp, model, units: dict | None = None) -> pd.DataFrame:
    """The posterior lower bound on I(V; X_τ) per attribute on the same τ grid, reference H(V) = ln K; each path's
    bound into `units`, where given."""
    process = model.process
    parts = []
    for j, name in enumerate(dgp.attributes):
        d_cond, pairs = _attribute_denoiser_and_pairs(dgp, model, j)
        k = len(dgp.levels[name])
        prior = torch.bincount(dgp.classes[:, j], minlength=k).double()
        curve = posterior_bound_curve(d_cond, pairs, process, k, points=a.mi_bound_points or a.mi_points,
                                      paths=a.mi_paths, batch_size=a.batch_size, seed=a.seed + 41 + j, prior=prior)
        entropy = float(-(prior / prior.sum() * (prior / prior.sum()).clamp_min(1e-300).log()).sum())
        _keep_units(units, "mutual_information_bound", name, curve.units)
        parts.append(_rows("mutual_information_bound", name, curve.tau.tolist(), curve.mi, curve.stderr, process,
                           entropy, "H(V)"))
    return pd.concat(parts, ignore_index=True)


@torch.no_grad()
def forking_entropy_table(a: AbstractionsConfig, dgp, model, read, units: dict | None = None) -> pd.DataFrame:
    """Forking entropy / ln K of unconditional generations at each τ of `taus`, reference 1 (the prior); each root's
    entropy into `units`, where given."""
    process = model.process
    device = next(model.parameters()).device
    sizes = {name: len(dgp.levels[name]) for name in dgp.attributes}
    gen = torch.Generator(device=device).manual_seed(a.seed + 21)
    curves = forking_entropy_curves(
        process, network_denoiser(process, model.net), dgp.prompt.null(a.roots).to(device), model.image_shape,
        a.taus, a.forks, lambda endings: read(process.to_image_space(endings)), sizes, a.sample_steps, gen,
        normalise=True, batch_size=a.batch_size,
    )
    for name, c in curves.items():
        _keep_units(units, "forking_entropy", name, c.per_root)
    return pd.concat([_rows("forking_entropy", name, a.taus, c.entropy, c.stderr, process, 1.0, "H(V)/ln K")
                      for name, c in curves.items()], ignore_index=True)


def probe_rows(n_rows: int, n_classes: int, seed: int) -> Tensor:
    """Row indices into the combinations: a random subset, or every combination (then a random remainder)."""
    g = torch.Generator().manual_seed(seed)
    if n_rows <= n_classes:
        return torch.randperm(n_classes, generator=g)[:n_rows]
    tiles = torch.arange(n_classes).repeat(n_rows // n_classes)
    return torch.cat([tiles, torch.randperm(n_classes, generator=g)[: n_rows - len(tiles)]])


@torch.no_grad()
def linear_probe_table(a: AbstractionsConfig, dgp, model, on_pixels: bool = False,
                       units: dict | None = None) -> pd.DataFrame:
    """Held-out linear-probe accuracy at each τ of `taus` (null prompt), reference chance = 1/K; with `on_pixels`,
    probes on the network's inputs themselves (the same noised images, flattened: the `pixels` control). Each
    held-out combination's correct rows and size into `units`, where given (every network and the pixels see the
    same images, noise and split, so the combinations pair)."""
    process = model.process
    device = next(model.parameters()).device
    classes = dgp.classes
    idx = probe_rows(a.probe_images, len(classes), a.seed + 31)
    x = _model_space(dgp, process, idx, device)
    gen = torch.Generator(device=device).manual_seed(a.seed + 32)
    if on_pixels:
        acts = noisy_inputs(process, x, a.taus, gen, batch_size=a.batch_size).cpu()
    else:
        acts = noisy_activations(process, model.net, a.probe_hook, x, a.taus, dgp.prompt.null(len(x)).to(device),
                                 gen, batch_size=a.batch_size, pool=a.probe_pool).cpu()
    labels = {name: classes[idx, j] for j, name in enumerate(dgp.attributes)}
    sizes = {name: len(dgp.levels[name]) for name in dgp.attributes}
    curves = linear_probe_curves(acts, a.taus, labels, sizes, test_fraction=a.probe_test_fraction, l2=a.probe_l2,
                                 seed=a.seed + 33, groups=idx)  # held-out combinations never seen in training
    # stderr: clustered by held-out combination (its noised copies are not independent trials)
    for name, c in curves.items():
        _keep_units(units, "linear_probe", name, *cluster_totals(c.test_correct, c.test_groups))
    return pd.concat([_rows("linear_probe", name, a.taus, c.accuracy, c.stderr, process, c.chance, "chance")
                      for name, c in curves.items()], ignore_index=True)


# -- commitment ---------------------------------------------------------------------------------------------------
def commitment(curves: pd.DataFrame, level: float, process) -> pd.DataFrame:
    """Commitment times of one checkpoint's curves (long table) per measure × attribute, with σ and log-SNR, the
    start/end levels used and the rank within each measure (1 = first)."""
    tables: dict[str, dict[str, tuple[Tensor, Tensor]]] = {}
    starts: dict[str, dict[str, float]] = {}
    ends: dict[str, dict[str, float]] = {}
    for (measure, attribute), g in curves.groupby(["measure", "attribute"], sort=False):
        g = g.sort_values("tau")
        tables.setdefault(measure, {})[attribute] = (torch.tensor(g["tau"].values), torch.tensor(g["value"].values))
        ref = float(g["reference"].iloc[0])
        first, last = float(g["value"].iloc[0]), float(g["value"].iloc[-1])
        if measure in ("mutual_information", "mutual_information_bound"):
            starts.setdefault(measure, {})[attribute], ends.setdefault(measure, {})[attribute] = 0.0, ref
            if measure == "mutual_information":
                starts.setdefault("mutual_information_final", {})[attribute] = 0.0
                ends.setdefault("mutual_information_final", {})[attribute] = last
        elif measure == "linear_probe":
            starts.setdefault(measure, {})[attribute], ends.setdefault(measure, {})[attribute] = ref, last
        else:
            starts.setdefault(measure, {})[attribute], ends.setdefault(measure, {})[attribute] = first, last
    if "mutual_information" in tables:
        tables["mutual_information_final"] = tables["mutual_information"]
    table = commitment_table(tables, fraction=level, starts=starts, ends=ends, directions=DIRECTIONS)
    rows = []
    for measure in table.columns:
        order = commitment_order(table, measure)
        for attribute in table.index:
            tau = float(table.loc[attribute, measure])
            sigma = math.nan if math.isnan(tau) else float(process.sigma(torch.tensor(1.0 - tau, dtype=torch.float64)))
            rows.append({
                "measure": measure, "attribute": attribute, "commitment_tau": tau, "commitment_sigma": sigma,
                "commitment_logsnr": -2.0 * math.log(sigma) if not math.isnan(sigma) else math.nan,
                "start": starts[measure][attribute], "end": ends[measure][attribute], "level": level,
                "rank": (order.index(attribute) + 1) if not math.isnan(tau) else None,
                "primary": measure in MEASURES,
            })
    out = pd.DataFrame(rows)
    out["rank"] = out["rank"].astype("Int64")
    return out


def difference_stderr(units: dict, source: str, measure: str, attribute: str) -> tuple[Tensor, int] | None:
    """The paired standard error at each τ of trained − `source` on one curve and the number of units it rests on
    (its degrees of freedom are one fewer), from both curves' per-unit totals in
    `units` ({source: {"<measure>/<attribute>/totals" | "…/sizes": tensor}}, as the pieces keep them); None where
    either has none, or a single unit (`eval.abstractions.mi_samples` or `roots` of 1: no error to estimate). A
    probe's accuracy difference is floored at one held-out row's worth (1/N)."""
    key = f"{measure}/{attribute}"
    mine, theirs = units.get("trained", {}), units.get(source, {})
    if f"{key}/totals" not in mine or f"{key}/totals" not in theirs or mine[f"{key}/totals"].shape[-1] < 2:
        return None
    sizes = mine.get(f"{key}/sizes")
    other = theirs.get(f"{key}/sizes")
    if (sizes is None) != (other is None) or (sizes is not None and not torch.equal(sizes, other)):
        raise ValueError(f"{source} {key}: its units are not the trained curve's (sizes differ), so they do not pair")
    floor = 1.0 / float(sizes.sum()) if measure == "linear_probe" and sizes is not None else 0.0
    totals = mine[f"{key}/totals"]
    return paired_stderr(totals, theirs[f"{key}/totals"], sizes, floor), totals.shape[-1]


def control_summary(curves: pd.DataFrame, commit: pd.DataFrame, margin: float, alpha: float = 0.05,
                    units: dict | None = None) -> dict:
    """Per control: its commitment τ per measure × attribute, and whether the trained curve departs from it — differs
    at some τ by more than `margin` of the trained curve's range (|end − start|) and by more than the two curves'
    noise (`analysis.commitment.departure`, level `alpha` over the τ grid; `departs_margin`: the margin alone) — and,
    per measure × attribute, whether the trained curve departs from every control it has (where a commitment time
    means something); the trained model's own commitment τ under `trained`, so every source reads the same way.

    With `units` (per source, the pieces' per-unit totals; `difference_stderr`) the noise is the paired error of the
    difference (`departure_paired` true; both curves are measured on the same draws, so noise they share cancels),
    and `departure_z_unpaired` keeps the largest z of the unpaired test √(se_t² + se_c²) for comparison; without,
    the unpaired test alone. `departure_z`: the largest |t − c| / se beyond the margin (a t statistic on G − 1
    degrees of freedom where paired; the text "inf" where the gap beyond the margin has no error at all, e.g. a bound
    exactly H(V) on every path against a control's exact 0 — JSON has no infinity), `departure_z_needed`: the critical
    value it had to exceed."""
    trained = curves[curves["source"] == "trained"]
    out: dict = {}
    departs_all: dict[str, dict[str, bool]] = {}

    def z_value(d: dict):
        return None if d["z"] is None else (round(d["z"], 3) if math.isfinite(d["z"]) else "inf")

    for source in [s for s in curves["source"].unique() if s != "trained"]:
        block: dict = {"commitment_tau": {}, "departs": {}, "departs_margin": {}, "departure_z": {},
                       "departure_z_needed": {}, "departure_paired": {}, "departure_z_unpaired": {}}
        for (measure, attribute), g in curves[curves["source"] == source].groupby(["measure", "attribute"]):
            t = trained[(trained["measure"] == measure) & (trained["attribute"] == attribute)].sort_values("tau")
            g = g.sort_values("tau")
            if len(t) != len(g) or not np.allclose(t["tau"].to_numpy(), g["tau"].to_numpy()):
                raise ValueError(f"{source} {measure} {attribute}: its τ grid differs from the trained curve's")
            paired = None if units is None else difference_stderr(units, source, measure, attribute)
            if paired is not None and paired[0].shape[0] != len(t):
                raise ValueError(f"{source} {measure} {attribute}: {paired[0].shape[0]} τ of units for {len(t)} of "
                                 "curve")
            args = (t["value"].to_numpy(), g["value"].to_numpy(), margin, t["stderr"].to_numpy(), g["stderr"].to_numpy(),
                    alpha)
            unpaired = departure(*args)
            d = unpaired if paired is None else departure(*args, difference_stderr=paired[0], df=paired[1] - 1)
            block["departs"].setdefault(measure, {})[attribute] = d["departs"]
            block["departs_margin"].setdefault(measure, {})[attribute] = d["departs_margin"]
            block["departure_z"].setdefault(measure, {})[attribute] = z_value(d)
            block["departure_z_needed"].setdefault(measure, {})[attribute] = round(d["z_needed"], 3)
            block["departure_paired"].setdefault(measure, {})[attribute] = paired is not None
            block["departure_z_unpaired"].setdefault(measure, {})[attribute] = z_value(unpaired)
            departs_all.setdefault(measure, {}).setdefault(attribute, True)
            departs_all[measure][attribute] &= d["departs"]
            row = commit[(commit["source"] == source) & (commit["measure"] == measure) &
                         (commit["attribute"] == attribute)]
            tau = float(row["commitment_tau"].iloc[0]) if len(row) else math.nan
            block["commitment_tau"].setdefault(measure, {})[attribute] = None if math.isnan(tau) else round(tau, 4)
        out[source] = block
    if out:
        block = {}
        for (measure, attribute), row in commit[commit["source"] == "trained"].groupby(["measure", "attribute"]):
            if measure in MEASURES:
                tau = float(row["commitment_tau"].iloc[0])
                block.setdefault(measure, {})[attribute] = None if math.isnan(tau) else round(tau, 4)
        out = {"trained": {"commitment_tau": block}, **out}
        out["trained_departs_from_every_control"] = {m: {a: bool(v) for a, v in d.items()}
                                                     for m, d in departs_all.items()}
    return out


def _wide(commit: pd.DataFrame) -> pd.DataFrame:
    return commit[commit["primary"]].pivot(index="attribute", columns="measure", values="commitment_tau")


def mi_at_data(curves: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """Both MI estimates at τ = 1 (data) next to H(V), per attribute: the difference estimate may overshoot H(V),
    the bound cannot."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for measure in ("mutual_information", "mutual_information_bound"):
        part = curves[curves["measure"] == measure]
        for attribute, g in part.groupby("attribute", sort=False):
            last = g.sort_values("tau").iloc[-1]
            entry = out.setdefault(attribute, {"H(V)": round(float(last["reference"]), 4)})
            entry[measure] = round(float(last["value"]), 4)
    return out


def _order_spearman(size: dict[str, float], times: pd.Series) -> float | None:
    """Spearman(−size, commitment τ) over the attributes: +1 = the larger, the earlier; None when an attribute has
    no commitment time (an order of the others would say nothing about it) or either side is constant."""
    if times.isna().any():
        return None
    both = times
    sizes = pd.Series(size)[both.index]
    if len(both) < 2 or sizes.nunique() < 2 or both.nunique() < 2:
        return None
    from scipy.stats import spearmanr  # lazy: docs/benchmarks.md, "Command start-up"

    return round(float(spearmanr(-sizes, both).statistic), 3)


def summarize(cfg, run: RunFolder, dgp, process, steps: list[int], clf_report: dict) -> Summary:
    """The pieces collected into `abstractions.parquet` and `commitment.parquet`, the figure and the summary."""
    from conceptlab.report.abstraction_figures import plot_abstractions
    from conceptlab.report.save import figures_wanted

    a = cfg.eval.abstractions
    curves, commits = [], []
    for step in steps:
        part = pd.concat([read_parquet(run.step_file(DIRECTORY, step, m)) for m in MEASURES], ignore_index=True)
        part.insert(0, "step", step)
        curves.append(part)
        c = commitment(part, a.commitment_level, process)
        c.insert(0, "step", step)
        commits.append(c)
    final = max(steps)
    table = pd.concat(curves, ignore_index=True).assign(source="trained")
    commit = pd.concat(commits, ignore_index=True).assign(source="trained")
    control_curves, control_commits = [], []
    for source, prefix in CONTROL_PREFIX.items():
        parts = [read_parquet(run.step_file(DIRECTORY, final, prefix + m)) for m in MEASURES
                 if run.step_file(DIRECTORY, final, prefix + m).is_file()]
        if parts:
            part = pd.concat(parts, ignore_index=True)
            part.insert(0, "step", final)
            control_curves.append(part.assign(source=source))
            c = commitment(part, a.commitment_level, process)
            c.insert(0, "step", final)
            control_commits.append(c.assign(source=source))
    table = pd.concat([table, *control_curves], ignore_index=True)
    commit = pd.concat([commit, *control_commits], ignore_index=True)
    table.insert(0, "run", run.name)
    commit.insert(0, "run", run.name)
    units: dict[str, dict[str, Tensor]] = {}  # per source, the final checkpoint's per-unit totals (paired test)
    for source, prefix in {"trained": "", **CONTROL_PREFIX}.items():
        for m in MEASURES:
            path = run.step_tensors(DIRECTORY, final, prefix + m)
            if path.is_file():
                units.setdefault(source, {}).update(read_tensors(path))
    controls = control_summary(table[table["step"] == final], commit[commit["step"] == final], a.departure_margin,
                               a.departure_alpha, units)
    trained_table, commit_all = table[table["source"] == "trained"], commit
    commit = commit[commit["source"] == "trained"]

    last = commit[commit["step"] == final]
    wide = _wide(last)[list(MEASURES)]
    orders = {m: [att for att in commitment_order(wide, m) if not math.isnan(wide.loc[att, m])] for m in MEASURES}
    agreement = measure_agreement(wide)
    sweeps = _level_sweeps(dgp, bases=16, seed=a.seed)
    footprint = pixel_footprint(dgp, sweeps=sweeps)
    largest = max(footprint, key=footprint.get)
    first = {m: bool(orders[m] and orders[m][0] == largest) for m in MEASURES}
    signal = attribute_signal(dgp, sweeps=sweeps)
    footprint_rho = {m: _order_spearman(footprint, wide[m]) for m in MEASURES}
    signal_rho = {m: _order_spearman(signal, wide[m]) for m in MEASURES}

    at_final = table[table["step"] == final]
    figures = {"abstractions.png": plot_abstractions(
        trained_table[trained_table["step"] == final], last,
        title=f"Commitment along generation time, final checkpoint (step {final})",
        controls=at_final[at_final["source"] != "trained"])} if figures_wanted() else {}
    conditional = read_json(run.step_file(DIRECTORY, final, "conditional", ".json"))

    def r(x: float) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)

    fields = {
        "attributes": list(dgp.attributes),
        "evaluated_steps": [int(s) for s in steps],
        "final_step": int(final),
        "classifier_accuracy": {k: r(v) for k, v in clf_report["held_out_accuracy"].items()},
        "classifier_source": clf_report.get("source"),
        "classifier_trained_on": clf_report.get("trained_on", "renders"),
        "conditional_accuracy": {k: r(v) for k, v in conditional.items()},
        "commitment_tau": {m: {att: r(wide.loc[att, m]) for att in wide.index} for m in MEASURES},
        "commitment_sigma": {
            m: {row.attribute: r(row.commitment_sigma) for row in last[last["measure"] == m].itertuples()}
            for m in MEASURES
        },
        "commitment_tau_mi_final": {
            row.attribute: r(row.commitment_tau)
            for row in last[last["measure"] == "mutual_information_final"].itertuples()
        },
        "commitment_order": orders,
        "mi_at_data": mi_at_data(trained_table[trained_table["step"] == final]),
        "agreement": {f"{row.measure_a} vs {row.measure_b}": r(row.spearman) for row in agreement.itertuples()},
        "footprint": {k: round(v, 4) for k, v in footprint.items()},
        "largest_footprint": largest,
        "largest_footprint_first": first,
        "largest_footprint_first_all": all(first.values()),
        "footprint_order_spearman": footprint_rho,
        "signal": {k: round(v, 4) for k, v in signal.items()},
        "signal_order": sorted(signal, key=signal.get, reverse=True),
        "signal_order_spearman": signal_rho,
    }
    if controls:
        for source, block in controls.items():  # each control's own commitment order against the signal order
            if source in ("trained", "trained_departs_from_every_control"):
                continue
            taus = block["commitment_tau"]
            block["signal_order_spearman"] = {
                m: _order_spearman(signal, pd.Series({att: (math.nan if t is None else t) for att, t in taus[m].items()},
                                                     dtype=float))
                for m in MEASURES if m in taus}
        fields["controls"] = controls
        departs = controls["trained_departs_from_every_control"]
        fields["commitment_order_claimed"] = {  # the order among attributes whose curve departs from every control
            m: [att for att in orders[m] if departs.get(m, {}).get(att, True)] for m in MEASURES}
    return Summary(fields, tables={"abstractions": table[COLUMNS + ["source"]], "commitment": commit_all},
                   figures=figures)


# -- the study ----------------------------------------------------------------------------------------------------
class AbstractionsStudy(StudyBase):
    """`data.kind: shapes3d` — when along generation each attribute is committed, under every measure."""

    uses_cache = True  # its attribute classifier is trained once per machine and cached
    kind = "shapes3d"
    version = 8  # 1: before versions entered run ids; 2: 2026-12-01; 3: controls (untrained, pixels); 4: probes held
    # out whole combinations, an order needs every attribute's time, each control's order (2026-12-03); 5: probe
    # stderr, departures beyond noise; 6: the probe stderr clustered by held-out combination (2026-12-04); 7: the
    # departure test paired on the curves' shared units (2026-12-05); 8: no commitment time for a curve that ends on
    # the wrong side of its start (a probe at or below chance), a NaN stderr cannot pass a departure (2026-12-07)
    summary_sections = frozenset({
        "agreement", "attributes", "classifier_accuracy", "classifier_source", "classifier_trained_on",
        "commitment_order", "commitment_order_claimed", "commitment_sigma", "commitment_tau", "commitment_tau_mi_final",
        "conditional_accuracy", "controls", "evaluated_steps", "footprint", "footprint_order_spearman",
        "largest_footprint", "largest_footprint_first", "largest_footprint_first_all", "mi_at_data", "signal",
        "signal_order", "signal_order_spearman"})
    run_tables = {
        "abstractions": ("run", "step", "measure", "attribute", "tau", "sigma", "logsnr", "value", "stderr",
                         "reference", "reference_name", "source"),
        "commitment": ("run", "step", "measure", "attribute", "commitment_tau", "commitment_sigma", "commitment_logsnr",
                       "start", "end", "level", "rank", "primary", "source"),
    }
    order = 2
    data_config = Shapes3DDataConfig
    eval_fields = {
        "abstractions": (AbstractionsConfig | None, Field(None, description="shapes3d: commitment along generation")),
    }
    exclusive_sections = frozenset(eval_fields)

    def complete_config(self, cfg) -> None:
        if cfg.eval.abstractions is None:
            cfg.eval.abstractions = AbstractionsConfig()
        if cfg.diffusion.process != "ve":
            raise ValueError("data.kind=shapes3d measures commitment with a VE model: set diffusion.process=ve")
        check_image_size(cfg.data.image_size, cfg.model)

    def build_data(self, cfg: Shapes3DDataConfig) -> Shapes3DWorld:
        return Shapes3DWorld(cfg)

    def memory_needs(self, cfg) -> MemoryNeeds:
        """uint8 renders of every combination (cached, then repeated `copies` times for training) and the renders of
        one chunk; the attribute classifier's float renders, and the largest batch of the measurements."""
        d, a = cfg.data, cfg.eval.abstractions
        pixels = 3 * d.image_size**2
        combos = math.prod(len(d.attribute_levels(name)) for name in d.attributes)
        data = combos * pixels * (1 + d.copies) + combos * d.copies * 64 + CHUNK * pixels * 4 * 4
        classifier = a.classifier_images * pixels * 4 * 4
        batches = max(a.batch_size, a.conditional_samples, a.roots * a.forks, a.probe_images, a.mi_samples)
        return MemoryNeeds(
            data=data, evaluation=classifier + batches * pixels * 4 * 4, eval_batch=a.batch_size,
            data_keys="data.attributes, data.levels, data.copies, data.image_size",
            eval_keys="eval.abstractions.classifier_images, eval.abstractions.batch_size",
        )

    def check(self, cfg, dgp, model: nn.Module) -> None:
        """Fail before training on what would only break the evaluation: an unknown probe hook point; and on a
        Shapes3D file that is missing or not the dataset's layout (`source: h5`), before the first image is read."""
        dgp.check_source()
        check_hook(model.net, cfg.eval.abstractions.probe_hook)

    def sample_step_settings(self, cfg) -> dict[str, int]:
        """The stochastic sampler's and the forks' step count."""
        return {"eval.abstractions.sample_steps": cfg.eval.abstractions.sample_steps}

    def evaluation(self, cfg, dgp: Shapes3DWorld, model, run: RunFolder, console, progress) -> Evaluation:
        """The classifier (cached, or trained now), then the five pieces per chosen checkpoint, each resumable."""
        a = cfg.eval.abstractions
        chosen = run_due_checkpoints(run, a.every)
        if not chosen:
            raise FileNotFoundError(f"no checkpoints in {run.checkpoints} to evaluate")
        began = time.perf_counter()
        classifier, clf_report = load_classifier(cfg, dgp)
        classifier = classifier.to(next(model.parameters()).device)
        read = attribute_reader(classifier, dgp, a.batch_size)
        setup = {"classifier": time.perf_counter() - began}
        # the measurements' noise and samples (not the classifier, trained once per data and seed, nor the data's own
        # level sweeps in the summary) are the run's own with eval.noise_per_run
        a = a.model_copy(update={"seed": eval_noise_seed(a.seed, cfg)})
        def curve_table(m: str, net, units: dict) -> pd.DataFrame:  # one measure's curves of `net` (a network)
            return {"mutual_information": lambda: mutual_information_table(a, dgp, net, units),
                    "mutual_information_bound": lambda: mutual_information_bound_table(a, dgp, net, units),
                    "forking_entropy": lambda: forking_entropy_table(a, dgp, net, read, units),
                    "linear_probe": lambda: linear_probe_table(a, dgp, net, units=units)}[m]()

        # each piece: units → its rows, filling units (name → per-unit tensor) for the paired departure test
        pieces: dict[str, Callable[[dict], pd.DataFrame | dict]] = {
            "conditional": lambda units: conditional_accuracy(a, dgp, model, read),
            **{m: (lambda units, m=m: curve_table(m, model, units)) for m in MEASURES},
        }

        def with_units(piece: str, table: Callable[[dict], pd.DataFrame | dict]) -> Callable[[int], StepResult]:
            def measure(step: int) -> StepResult:
                units: dict = {}
                rows = table(units)
                return StepResult(rows, tensors=units or None, info=piece)
            return measure

        def measurement(piece: str) -> Measurement:
            return Measurement(piece, with_units(piece, pieces[piece]), every=a.every,
                               use_ema=a.use_ema, directory=DIRECTORY, piece=piece,
                               suffix=".json" if piece == "conditional" else ".parquet")

        networks: dict = {}

        def control_network(source: str):
            if source not in networks:
                build = untrained_model if source == "untrained" else random_init_model
                networks[source] = build(cfg, dgp, model)
            return networks[source]

        controls = {f"{CONTROL_PREFIX[source]}{m}": (lambda units, m=m, source=source:
                                                     curve_table(m, control_network(source), units))
                    for source in ("untrained", "random_init") if source in a.controls for m in MEASURES}
        if "pixels" in a.controls:
            controls[f"{CONTROL_PREFIX['pixels']}linear_probe"] = lambda units: linear_probe_table(a, dgp, model, True,
                                                                                                  units)

        def control(piece: str) -> Measurement:
            return Measurement(piece, with_units(piece, controls[piece]), every=None,
                               use_ema=a.use_ema, directory=DIRECTORY, piece=piece)

        return Evaluation(
            measurements=[measurement(p) for p in PIECES] + [control(p) for p in controls],
            summarize=lambda: summarize(cfg, run, dgp, model.process, [s for s, _ in chosen], clf_report),
            setup_seconds=setup,
        )


STUDY = AbstractionsStudy()
