"""Finding 1 (Liang et al. 2024): during training the representation of the label grid goes from unstructured to a
torus, and its effective dimension rises above 4.

The shipped factorize-torus-tiny preset (periodic bumps on a 16×16 torus), seed 0, trained 600 steps, with the
representation (after the bottleneck, t = 0.5, the noised ground-truth images as input) read on the 32×32 label grid
(`label_density: 2`) at steps 50, 100, 200, 400 and 600. Betti numbers from Vietoris–Rips on the top 4 PCs (300
landmarks; H0 by the widest gap, H1 and H2 above 0.1 of the diameter).

Measured on the AMD EPYC (bf16), seeds 0 / 1 / 2 with checkpoints every 100 steps: Betti numbers (1, 0, 0) at steps
50 and 100 in all three; (1, 2, 1), a torus, from step 400 to 600 in all three (seed 1 showed (1, 1, 1) at 200–300,
seed 2 (1, 1, 0) at 300); train accuracy 0.56–0.86 at 400 and ≥ 0.98 at 600. Effective dimension 7.6 / 8.4 / 7.7 at
step 50, dipping to 4.9–6.6 at 100–200, 10.4 / 9.4 / 10.2 at 600. The test fails if the torus does not form, if it is
there before training has shaped the representation, or if the effective dimension does not end above 4 and above
its first value.
"""

import pytest
from rich.console import Console

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

TORUS = [1, 2, 1]


@pytest.mark.slow
def test_the_label_representation_becomes_a_torus_during_training(tmp_path):
    cfg = load_config("factorize-torus-tiny", [
        "train.steps=600",
        "train.checkpoint_schedule=list",
        "train.checkpoint_steps=[50,100,200,400,600]",
        "eval.composition.labels_per_region=32",
    ])
    summary = run_experiment(cfg, tmp_path, progress=False, console=Console(quiet=True))
    betti = {int(step): b for step, b in summary["betti_by_step"].items()}
    ed = {int(step): v for step, v in summary["effective_dimension"]["by_step"].items()}
    report = (betti, ed, summary["accuracy_by_step"])
    assert summary["final_accuracy"]["train"]["joint"] >= 0.9, report  # the model has learned the grid
    assert betti[50] != TORUS and betti[50][2] == 0, report  # unstructured at the start: no loops pair into a void
    assert betti[600] == TORUS, report
    assert summary["betti"] == TORUS, report  # the final checkpoint's topology, as the run summary reports it
    assert ed[600] > 4 and ed[600] > ed[50], report
