"""Predict the end-to-end wall time of a preset on this machine from measured costs, term by term.

For each preset (read with `conceptlab.experiments.loading.load_config`) it measures, in this process:

- data: building the training set (`dgp.training_set()`), once;
- training: `train.steps` × the median s/step of `iter_training`'s loop body at the preset's batch size, network and
  precision: a batch drawn from the training set, its labels dropped at `diffusion.cfg_dropout` and augmented as
  `train` says, the trainer's own `train_step`, the EMA update where `train.ema_decay` is set, and the host reads of
  the loss and metrics (`--steps` timed steps after one untimed);
- checkpoints: their number (`checkpoint_schedule`) × one save of the weights (and the EMA weights where kept) and the
  full training state;
- evaluation: per evaluated checkpoint, the study's own per-checkpoint measurements (shapes: the concept-space
  reading and the interventions; bumps: composition and geometry), timed at 1 and 2 sampler steps and extended
  linearly to the configured steps (the network passes are the same every step; one untimed call first at each); those
  that sample nothing (the geometry and its controls) are timed in one call, not again at 2 steps; the bumps
  study's once-only measurements (the final checkpoint's controls, the summary's topology) are counted once.

The network and probe are freshly initialised: throughput does not depend on the weights. Not counted: the concept
probe's training when it is not cached (once per machine), the summary's tables and figures, process start.

    .venv/bin/python bench/predict_run_time.py [--presets hidden-emergence-paper factorize-torus-paper] [--steps 3]
    .venv/bin/python bench/predict_run_time.py --quick --presets micro      # seconds; no claim
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

import benchlib
from conceptlab.models.diffusion_model import build_model
from conceptlab.probes.concept_classifier import ConceptProbe, default_cache_dir, probe_key
from conceptlab.store.run_folder import RunFolder
from conceptlab.train.checkpoints import (
    checkpoint_schedule,
    optimizer_tensors,
    prefixed,
    save_checkpoint,
    save_training_state,
)
from conceptlab.train.precision import resolve_bf16
from conceptlab.train.trainer import EMA, TrainingData, build_optimizer, train_step, training_batch

QUICK = {"micro": []}  # --quick: presets small enough for a test


SAMPLING = ("concept_space", "interventions", "composition")  # the measurements whose cost grows with sampler steps


def evaluated(n_checkpoints: int, every: int | None) -> int:
    """Checkpoints a measurement runs at: every `every`-th (the first, the (k+1)-th, …) and always the last."""
    if every is None:
        return 1
    picked = set(range(0, n_checkpoints, every)) | {n_checkpoints - 1}
    return len(picked)


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def hms(seconds: float) -> str:
    h, rest = divmod(int(round(seconds)), 3600)
    return f"{h} h {rest // 60:02d} min" if h else f"{rest // 60} min {rest % 60:02d} s"


def measurements(preset: str, overrides: list[str], sample_steps: int, scratch: Path):
    """(cfg, [(name, measure, every)]) of the study's per-checkpoint measurements with the sampler shortened to
    `sample_steps`, on a fresh model whose weights are saved as the run's only (final) checkpoint."""
    kind = benchlib.load(preset, overrides)[0].data.kind
    key = "eval.composition.sample_steps" if kind == "bumps" else "eval.sample_steps"
    cfg, dgp = benchlib.load(preset, [*overrides, f"{key}={sample_steps}"])
    model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, cfg.data.image_size, dgp.channels,
                        dgp.attribute_sizes, dgp.null_label).eval()
    run = RunFolder(scratch / f"{cfg.name}-{sample_steps}")
    path = save_checkpoint(run.checkpoints, 1, prefixed("model.", model.state_dict()),
                           {"config_hash": cfg.training_hash(), "metrics": {}, "has_ema": False})
    if kind == "shapes":
        from conceptlab.studies.concept_space import concept_space_measurement
        from conceptlab.studies.emergence import intervention_measurement

        probe = ConceptProbe(list(dgp.concepts), cfg.eval.probe.width).eval()
        out = [concept_space_measurement(cfg, dgp, model, probe)]
        if cfg.eval.interventions is not None:
            out.append(intervention_measurement(cfg, dgp, model, probe, [(1, path)]))
        return cfg, dgp, model, out, None
    if kind == "bumps":
        from conceptlab.studies.factorization import STUDY, representation_cloud, topology

        evaluation = STUDY.evaluation(cfg, dgp, model, run, None, False)

        def summary_topology() -> None:
            from conceptlab.studies.factorization import grid_sublattice, refine_grid

            geo = cfg.eval.geometry
            grid = grid_sublattice(refine_grid(dgp.grid_labels(), geo.label_density, dgp.period), geo.labels)
            cloud = representation_cloud(cfg, dgp, model, grid)
            topology(cfg, cloud.points, cloud.labels, dgp.period)

        return cfg, dgp, model, evaluation.measurements, summary_topology
    raise SystemExit(f"{preset}: data.kind {kind} has no evaluation model here")


def per_checkpoint_times(preset: str, overrides: list[str], scratch: Path):
    """({measurement: [seconds at 1 sampler step, at 2] (one entry for those that sample nothing)}, {measurement:
    its `every`}, the once-only summary measurement or None). Each measurement is called once untimed before it is
    timed, at 1 and at 2 steps alike (each k builds fresh objects: its first call pays the allocator, kernels and the
    patching reference's load, which a run pays once, not per step)."""
    per_ckpt: dict[str, list[float]] = {}
    every: dict[str, int | None] = {}
    once = None
    with torch.no_grad():
        for k in (1, 2):
            _, _, _, ms, once = measurements(preset, overrides, k, scratch)
            for m in ms:
                if k == 2 and m.name not in SAMPLING:
                    continue  # its cost does not depend on the sampler's steps: timed once
                m.measure(1)  # untimed: first-call costs
                seconds = timed(lambda: m.measure(1))
                print(f"    ({m.name} at {k} sampler step{'s' if k > 1 else ''}: {seconds:.2f} s)", flush=True)
                per_ckpt.setdefault(m.name, []).append(seconds)
                every[m.name] = m.every
    return per_ckpt, every, once


def per_checkpoint_cost(times: list[float], full: int) -> float:
    """Seconds of one evaluated checkpoint at `full` sampler steps from its times at 1 and 2 steps (a fixed part and
    a per-step part, extended linearly), or its one time when it samples nothing."""
    if len(times) == 1:
        return times[0]
    t1, t2 = times
    slope = max(t2 - t1, 0.0)
    return max(t1 - slope, 0.0) + slope * full


def predict(preset: str, overrides: list[str], steps: int) -> dict[str, float]:
    """Print each term of the predicted wall time of one run of `preset`; returns the terms in seconds."""
    cfg, dgp = benchlib.load(preset, overrides)
    tr = cfg.train
    schedule = checkpoint_schedule(tr)
    n_ckpt = len(schedule)
    print(f"\n== {cfg.name}: {tr.steps:,} steps at batch {tr.batch_size}, {n_ckpt} checkpoints "
          f"({tr.checkpoint_schedule} from {schedule[0]})", flush=True)
    terms: dict[str, float] = {}

    began = time.perf_counter()
    data = dgp.training_set()
    data_s = time.perf_counter() - began
    terms["data"] = data_s
    print(f"  data: training set built in {data_s:.1f} s")
    if cfg.data.kind == "shapes":
        cached = (default_cache_dir() / f"{probe_key(cfg.eval.probe, list(cfg.data.concepts), cfg.data.image_size)}"
                  ".safetensors").exists()
        print(f"  concept probe: {'cached on this machine' if cached else 'NOT cached: trained once, not counted'}")

    model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, cfg.data.image_size, dgp.channels,
                        dgp.attribute_sizes, dgp.null_label).train()
    optimizer = build_optimizer(model, tr)
    bf16 = resolve_bf16(tr.bf16)
    g = torch.Generator().manual_seed(0)
    noise = torch.Generator().manual_seed(1)
    ema = EMA(model, tr.ema_decay) if tr.ema_decay is not None else None

    batches = TrainingData(data.images, data.prompts, cfg.data.null_value)  # as the run driver hands it over

    def one_step() -> None:  # iter_training's loop body: its batch, the step, the EMA update, the host reads
        images, prompts = training_batch(batches, tr, cfg.diffusion.cfg_dropout, g)
        loss, metrics, grad_norm = train_step(model, optimizer, images, prompts, noise, bf16, "cpu", tr.grad_clip)
        if ema is not None:  # as iter_training: every step
            ema.update(model, 1_000)
        float(loss.detach())
        [float(v) for v in (*metrics.values(), *([grad_norm] if grad_norm is not None else []))]

    one_step()
    per_step = [timed(one_step) for _ in range(steps)]
    s_step = statistics.median(per_step)
    terms["training"] = tr.steps * s_step
    print(f"  training: {tr.steps:,} steps x {s_step:.3f} s/step (median of {steps}: "
          f"{benchlib.fmt_spread(per_step, 's')}, {'bf16' if bf16 else 'fp32'}"
          f"{', with the EMA update' if ema is not None else ''}) = {hms(terms['training'])}")

    with tempfile.TemporaryDirectory(prefix="predict-") as scratch:
        folder = Path(scratch)

        def save() -> None:
            weights = prefixed("model.", model.state_dict())
            if ema is not None:
                weights.update(prefixed("ema.", ema.model.state_dict()))
            save_checkpoint(folder / "ckpt", 1, weights, {"config_hash": "", "metrics": {}, "has_ema": ema is not None})
            opt_tensors, opt_meta = optimizer_tensors(optimizer)
            state = dict(weights)
            state.update(prefixed("optim.", opt_tensors))
            save_training_state(folder / "state.safetensors", state, {"step": 1, "optimizer": opt_meta})

        save_s = timed(save)
        terms["checkpoints"] = n_ckpt * save_s
        print(f"  checkpoints: {n_ckpt} x {save_s:.2f} s (weights{' + EMA' if ema is not None else ''} + training state) "
              f"= {hms(terms['checkpoints'])}")

        per_ckpt, every, once = per_checkpoint_times(preset, overrides, folder)
        full = cfg.eval.composition.sample_steps if cfg.data.kind == "bumps" else None
        full = full or cfg.eval.sample_steps or cfg.diffusion.sample_steps
        eval_total = 0.0
        for name, times in per_ckpt.items():
            count = evaluated(n_ckpt, every[name])
            cost = per_checkpoint_cost(times, full)
            eval_total += count * cost
            how = (f"{times[0]:.2f} s at 1 sampler step, {times[1]:.2f} s at 2 -> {cost:.1f} s at {full}"
                   if len(times) == 2 else f"{cost:.2f} s (no sampling, timed once)")
            print(f"  evaluation {name}: {count} checkpoints x {how} = {hms(count * cost)}")
        if once is not None:
            topo_s = timed(once)
            eval_total += topo_s
            print(f"  summary topology (once): {topo_s:.1f} s")
        terms["evaluation"] = eval_total
    total = sum(terms.values())
    print(f"  predicted wall time: {hms(total)} = " + " + ".join(f"{k} {hms(v)}" for k, v in terms.items()))
    return terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["hidden-emergence-paper", "factorize-torus-paper"])
    parser.add_argument("--set", dest="overrides", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per preset")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="one timed step; for tests")
    args = parser.parse_args()
    if args.quick:
        args.steps = 1
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    benchlib.print_environment(args.threads)
    for preset in args.presets:
        predict(preset, args.overrides, args.steps)


if __name__ == "__main__":
    main()
