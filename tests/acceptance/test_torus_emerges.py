"""Finding 1 (Liang et al. 2024): during training the representation of the label grid goes from unstructured to a
torus, with an effective dimension above 4 (factorized, not a coupled 3D torus, whose participation ratio is ≤ 3).

The shipped factorize-torus-tiny preset (periodic bumps on a 16×16 torus), seed 0, trained 600 steps, with the
representation (after the bottleneck, t = 0.5, the noised ground-truth images as input) read on the 32×32 label grid
(`label_density: 2`) at steps 50, 100, 200, 400 and 600. Betti numbers from Vietoris–Rips on the top 4 PCs, or
more where PC 4 and PC 5 cannot be told apart (North's rule, `homology_dims_rule: whole_eigenspaces`, since
2026-12-04; the test passed under it the same day) (300 landmarks; H0 by the widest gap, H1 and H2 above 0.1 of the
diameter).

Measured on the AMD EPYC (bf16), this schedule to step 600 (seeds 0–2) or 1,000 (seed 3; σ = 1.5): Betti numbers
(1, 0, 0) at steps 50 and 100 in all five runs; a torus (1, 2, 1) from step 200–400, in every run by step 400, with
train accuracy 0.47–0.95 there; effective dimension 4.1 (σ = 1.5 at step 200) to 10.4 at the torus checkpoints,
7.2–10.4 at the last one. Later the second loop can fade below the cut (seed 3 at 800–1,000, σ = 1.5 at 1,000; in
3,000-step runs it faded and came back), so the test asks for the torus during training, not at one fixed step. It fails if no torus forms, if one is there before training
has shaped the representation, or if the effective dimension is ≤ 4 where the torus last stands and at the end.

The same run's final checkpoint beside its controls (docs/controls.md: `factorize-torus-controls-tiny`, report seeds
100–102, margins declared before those seeds ran): the trained code is more additive than the network at
initialisation and than the noised images (by ≥ 0.2) and its chords closer to orthogonal than at initialisation
(by ≥ 0.1); it is *not* more additive than a random layer on the label encoding (restated finding: the factorized
form is the encoding's, kept by training), and the torus is already in the noised images (restated: the topology is
in the data), while neither the untrained network nor the random encoding map is a torus. At seed 0, 600 steps, on
the AMD EPYC: additive share trained 0.914, encoding_map 0.934, untrained 0.447, pixels 0.363. The control test
fails if a control reaches the trained code's additivity, if the untrained network or the encoding map is a torus,
or if the restated findings stop holding (the map falls 0.05 below the trained code, the pixels stop being a torus).

The untrained network is the network exactly as training starts, whose zero-initialised residual convolutions keep
the label out of every block's output: its low additivity says little. The same architecture with random weights in
every layer (`random_init`, added 2026-12-03) carries the label, and on report seeds 100–102 (fp32) its code is
nearly as additive as the trained one (0.85–0.86 vs 0.89–0.92) with chords nearly as orthogonal (0.15 vs 0.09–0.12):
the claims "beyond random_init" fail on 3 of 3, restated as "the factorized form is the architecture's and its
label encoding's, kept by training". The test fails if training starts making the code more additive than the
random network by the claim's margin (0.2) or its chords closer to orthogonal by 0.1, or if the random network is
a torus.
"""

import pytest
from rich.console import Console

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

TORUS = [1, 2, 1]


def _torus_run(folder):
    cfg = load_config("factorize-torus-tiny", [
        "train.steps=600",
        "train.checkpoint_schedule=list",
        "train.checkpoint_steps=[50,100,200,400,600]",
        "eval.composition.labels_per_region=32",
        "eval.geometry.controls=[untrained,random_init,pixels,encoding,encoding_map]",
    ])
    return run_experiment(cfg, folder, progress=False, console=Console(quiet=True))


@pytest.mark.slow
def test_the_representation_becomes_a_torus_and_its_code_is_factorized_beyond_untrained_and_pixels(tmp_path):
    """One run, two findings (one test, so the run is trained once under any test scheduler): the topology over
    training, then the factorized code at the final checkpoint beside its controls."""
    summary = _torus_run(tmp_path / "torus")
    _becomes_a_torus_during_training(summary)
    _factorized_code_beside_its_controls(summary)


def _becomes_a_torus_during_training(summary):
    betti = {int(step): b for step, b in summary["betti_by_step"].items()}
    ed = {int(step): v for step, v in summary["effective_dimension"]["by_step"].items()}
    report = (betti, ed, summary["accuracy_by_step"])
    assert summary["final_accuracy"]["train"]["joint"] >= 0.9, report  # the model has learned the grid
    assert betti[50] != TORUS and betti[50][2] == 0, report  # unstructured at the start: no loops pair into a void
    tori = [step for step, b in betti.items() if b == TORUS]
    assert tori, report  # a torus forms during training
    assert ed[max(tori)] > 4 and ed[600] > 4, report  # and it is not a 3D one
    assert summary["betti"] == betti[600], report  # the run's final topology is the last checkpoint's row


def _factorized_code_beside_its_controls(summary):
    c = summary["controls"]
    trained, untrained, pixels, mapped = c["trained"], c["untrained"], c["pixels"], c["encoding_map"]
    report = {k: {m: v.get(m) for m in ("additive_share", "orthogonality", "torus")} for k, v in c.items()}
    # the declared claims that held on every report seed: training makes the code additive and its chords orthogonal
    assert trained["additive_share"] >= untrained["additive_share"] + 0.2, report
    assert trained["additive_share"] >= pixels["additive_share"] + 0.2, report
    assert trained["orthogonality"] <= untrained["orthogonality"] - 0.1, report
    # the restated findings: as additive as a random layer on the encoding (not more), the torus is in the data
    assert trained["additive_share"] - mapped["additive_share"] < 0.05, report
    assert pixels["torus"] == 1, report
    # the controls that must not show a torus
    assert untrained["torus"] == 0 and mapped["torus"] == 0 and c["encoding"]["torus"] == 0, report
    # a random network (every layer drawn, so the label reaches the code): training does not add additivity beyond it
    random = c["random_init"]
    assert trained["additive_share"] - random["additive_share"] < 0.2, report
    assert random["orthogonality"] - trained["orthogonality"] < 0.1, report
    assert random["torus"] == 0, report
