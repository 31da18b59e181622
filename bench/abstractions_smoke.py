"""CPU smoke check of latent abstractions: when does a tiny VE model commit to wall hue vs shape?

Trains a small conditional VE diffusion model (ConceptUNet, attribute-label dropout) on Shapes3D-like renders in which
two attributes vary — wall hue (10 levels, a large pixel footprint) and shape (4 levels, a small one), every other
factor fixed — for a wall-clock budget, then measures along generation time τ (0 = noise, 1 = data):

  1. mutual information I(V; Y_0..τ) per attribute (denoiser differences, midpoint rule),
  2. forking entropy of unconditional generations (K forks per root, read by an attribute classifier),
  3. held-out linear-probe accuracy on the network's activations at a hook point on forward-noised renders (null
     prompt, so the label cannot leak through the conditioning),

and prints each curve, the commitment time of each attribute under each measure (τ at half of the way from start to
end) and the measures' rank agreement. Expected (Franzese et al.): wall hue commits before shape under all three.
Mutual information is scored twice: half of H(V) = ln K (`mutual_information`; the estimate of an imperfect network
overshoots H(V) at small σ, where the weight g²/2σ⁴ amplifies tiny differences between the conditional and
unconditional denoisers) and half of the estimate's own final value (`mutual_information_final`).

    .venv/bin/python bench/abstractions_smoke.py [--minutes 5 | --train-steps N] [--threads 1] [--seed 0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from conceptlab.analysis.commitment import commitment_order, commitment_table, measure_agreement
from conceptlab.analysis.forking_entropy import forking_entropy_curves
from conceptlab.analysis.linear_probes import linear_probe_curves, noisy_activations
from conceptlab.analysis.mutual_information import mutual_information_curve
from conceptlab.data.shapes3d import FACTORS, FACTOR_SIZES, render_shapes3d
from conceptlab.models.unet import ModelConfig
from conceptlab.models.forking import network_denoiser
from conceptlab.models.sampling import ancestral_sample
from conceptlab.models.unet import ConceptUNet, count_parameters
from conceptlab.models.variance_exploding import AttributePrompt, VarianceExploding
from conceptlab.probes.attribute_classifier import (
    AttributeClassifierConfig,
    attribute_accuracy,
    classify_attributes,
    load_or_train_attribute_classifier,
)
from conceptlab.train.trainer import EMA

LEVELS = {"floor_hue": 0, "wall_hue": 6, "object_hue": 3, "scale": 5, "shape": 0, "orientation": 7}  # when fixed
TAUS = [round(0.1 * i, 1) for i in range(11)]


def dataset(attributes: tuple[str, ...], image_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every combination of the varying attributes once (the others at LEVELS): images [N,3,S,S], factors [N,6],
    labels [N,A]."""
    grids = torch.meshgrid(*[torch.arange(FACTOR_SIZES[FACTORS.index(a)]) for a in attributes], indexing="ij")
    n = grids[0].numel()
    factors = torch.tensor([LEVELS[name] for name in FACTORS]).repeat(n, 1)
    for a, grid in zip(attributes, grids):
        factors[:, FACTORS.index(a)] = grid.flatten()
    labels = factors[:, [FACTORS.index(a) for a in attributes]]
    return render_shapes3d(factors, image_size), factors, labels


def fmt(values) -> str:
    return " ".join(f"{float(v):5.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="training wall-clock budget")
    parser.add_argument("--train-steps", type=int, default=None, help="train this many steps instead (reproducible)")
    parser.add_argument("--attributes", default="wall_hue,shape", help="comma-separated varying factors")
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--roots", type=int, default=40)
    parser.add_argument("--forks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=40, help="sampler steps")
    parser.add_argument("--hook", default="mid.blocks.0.hook_out")
    parser.add_argument("--json", type=Path, default=None, help="write the curves and tables here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    began = time.perf_counter()
    size = args.image_size
    attributes = tuple(args.attributes.split(","))
    unknown = [a for a in attributes if a not in FACTORS]
    if unknown:
        parser.error(f"unknown attributes {unknown}; Shapes3D factors are {list(FACTORS)}")
    fixed = {k: v for k, v in LEVELS.items() if k not in attributes}
    images, factors, labels = dataset(attributes, size)
    prompts_for = AttributePrompt(attributes, tuple(FACTOR_SIZES[FACTORS.index(a)] for a in attributes))
    x_all, p_all = images * 2 - 1, prompts_for.encode(labels)
    print(f"data: {len(images)} renders {size}x{size}, varying {attributes}, fixed {fixed}")

    # attribute classifier (cached)
    clf_cfg = AttributeClassifierConfig(attributes=attributes, image_size=size, fixed=fixed, width=12,
                                        train_images=3000, epochs=6, lr=5e-3, seed=args.seed)
    classifier, clf_report = load_or_train_attribute_classifier(clf_cfg)
    print(f"attribute classifier ({clf_report['source']}): held-out {clf_report['held_out_accuracy']}")

    # model + training
    net = ConceptUNet(ModelConfig(widths=[32, 64], blocks_per_level=1, mid_attention=False, dropout=0.0,
                                  pixel_unshuffle=2), prompt_dim=prompts_for.dim)
    process = VarianceExploding(0.01, 50.0, "v", label_dropout=0.5, attribute_sizes=prompts_for.sizes)
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=0.0)
    ema = EMA(net, 0.995)
    gen = torch.Generator().manual_seed(args.seed)
    step, t_train, losses = 0, time.perf_counter(), []
    def more() -> bool:
        if args.train_steps is not None:
            return step < args.train_steps
        return time.perf_counter() - t_train < 60 * args.minutes

    while more():
        idx = torch.randint(len(x_all), (64,), generator=gen)
        loss, _ = process.loss(net, x_all[idx], p_all[idx], gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        ema.update(net, step)
        losses.append(loss.item())
        step += 1
        if step % 200 == 0:
            print(f"  step {step}: loss {sum(losses[-200:]) / 200:.4f}  ({time.perf_counter() - t_train:.0f} s)")
    model = ema.model.eval()
    print(f"trained {count_parameters(net):,} parameters for {step} steps in {time.perf_counter() - t_train:.0f} s")

    # sanity: conditional samples carry their attributes
    with torch.no_grad():
        cond = ancestral_sample(process, model, p_all, (3, size, size), args.steps, torch.Generator().manual_seed(1))
    cond_acc = attribute_accuracy(classifier, cond, factors)
    print(f"conditional generations read as their prompt: {cond_acc}")

    results: dict = {"steps": step, "classifier": clf_report, "conditional_accuracy": cond_acc, "curves": {}}
    t_eval = time.perf_counter()

    # 1. mutual information
    mi_curves = {}
    for j, a in enumerate(attributes):
        def d_cond(x, sigma, v, a=a):
            return process.denoise_ve(model, x, sigma, prompts_for.only(a, v))

        def d_uncond(x, sigma):
            return process.denoise_ve(model, x, sigma, prompts_for.null(x.shape[0]))

        def pairs(n, g, j=j):
            idx = torch.randint(len(x_all), (n,), generator=g)
            return x_all[idx], labels[idx, j]

        mi = mutual_information_curve(d_cond, d_uncond, pairs, process, points=50, samples_per_point=16,
                                      batch_size=400, seed=args.seed)
        mi_curves[a] = (mi.tau, mi.mi)
        print(f"MI {a:9s} (ln K = {math.log(prompts_for.sizes[j]):.2f}): {fmt(mi.mi[::5])}")

    # 2. forking entropy (unconditional generation)
    roots_prompt = prompts_for.null(args.roots)

    def classify(endings):
        return classify_attributes(classifier, process.to_image_space(endings))

    fe = forking_entropy_curves(process, network_denoiser(process, model), roots_prompt, (3, size, size), TAUS,
                                args.forks, classify, dict(zip(attributes, prompts_for.sizes)), args.steps,
                                torch.Generator().manual_seed(2), normalise=True)
    for a in attributes:
        print(f"forking entropy {a:9s} (/ln K): {fmt(fe[a].entropy)}")

    # 3. linear probes on forward-noised renders, null prompt
    reps = max(1, 800 // len(x_all))
    x_probe, y_probe = x_all.repeat(reps, 1, 1, 1), labels.repeat(reps, 1)
    acts = noisy_activations(process, model, args.hook, x_probe, TAUS, prompts_for.null(len(x_probe)),
                             torch.Generator().manual_seed(3), pool=2)
    lp = linear_probe_curves(acts, TAUS, {a: y_probe[:, j] for j, a in enumerate(attributes)},
                             dict(zip(attributes, prompts_for.sizes)), l2=1e-3, seed=args.seed)
    for a in attributes:
        print(f"linear probe {a:9s} (chance {lp[a].chance:.2f}): {fmt(lp[a].accuracy)}")
    print(f"measurement took {time.perf_counter() - t_eval:.0f} s")

    tau = torch.tensor(TAUS, dtype=torch.float64)
    curves = {
        "mutual_information": mi_curves,  # half of H(V) = ln K (the estimate overshoots at small σ)
        "mutual_information_final": mi_curves,  # half of the estimate's final value
        "forking_entropy": {a: (tau, fe[a].entropy) for a in attributes},
        "linear_probe": {a: (tau, lp[a].accuracy) for a in attributes},
    }
    starts = {"mutual_information": {a: 0.0 for a in attributes},
              "linear_probe": {a: lp[a].chance for a in attributes}}
    ends = {"mutual_information": {a: math.log(k) for a, k in zip(attributes, prompts_for.sizes)}}
    starts["mutual_information_final"] = starts["mutual_information"]
    table = commitment_table(curves, fraction=0.5, starts=starts, ends=ends)
    sigma_at = table.apply(lambda col: col.map(lambda x: float(process.sigma(torch.tensor(1 - x))) if not math.isnan(x) else x))
    print("\ncommitment time τ (half-way), rows attributes, columns measures:")
    print(table.round(3).to_string())
    print("σ at commitment:")
    print(sigma_at.round(3).to_string())
    for m in table.columns:
        print(f"order under {m}: {commitment_order(table, m)}")
    print(measure_agreement(table).to_string(index=False))
    print(f"total {time.perf_counter() - began:.0f} s")
    if args.json is not None:
        results["curves"] = {m: {a: {"tau": [float(v) for v in t], "value": [float(v) for v in y]}
                                 for a, (t, y) in per.items()} for m, per in curves.items()}
        results["commitment"] = json.loads(table.to_json())
        results["agreement"] = json.loads(measure_agreement(table).to_json(orient="records"))
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
