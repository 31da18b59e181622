"""Data-generating processes (DGPs), each beside its config section; `studies.build_data(cfg)` builds the one a
`data` section's `kind` names (through the study that serves it).

Every DGP gives the runner what training needs: `training_set()` (an object with `.images` `[N, C, S, S]` in
[0, 1] and `.prompts` `[N, D]`), `prompt_dim`, `channels`, `image_size`, `attribute_sizes` (prompt blocks for
attribute-wise label dropout, or None), `null_label` and `describe()` (`studies.base.DataProcess`). Each kind adds what its evaluation needs:

- `shapes` (`data.shapes.ShapesDGP`): discrete concept classes, below;
- `bumps` (`data.bump_world.BumpWorld`): label lattice, held-out region, `regions()`, `grid_labels()`, `render(labels)`;
- `shapes3d` (`data.shapes3d_world.Shapes3DWorld`): attribute classes, `render(classes)`, `make_prompt(classes, given)`.

The `shapes` protocol, which the concept-space evaluation and interventions rely on:

- attributes: `concepts: list[str]`; `classes`, `train_classes`, `held_out_classes: list[str]` (class codes, one
  "0"/"1" digit per concept in `concepts` order); `prompt_dim: int`;
- `prompt_slices() -> dict[str, slice]`: where each concept's entries sit in a prompt;
- `make_prompt(values: dict[str, Tensor]) -> Tensor[N, prompt_dim]`: prompts from arbitrary concept values
  (concepts left out are masked with the null value); `class_prompt(code) -> Tensor[prompt_dim]`: exact means;
- `training_set() -> ConceptDataset` (images [N,3,S,S] in [0,1], prompts [N,D], class_index [N], class_codes);
  `test_set(n_per_class, seed) -> ConceptDataset` (every class, exact means);
  `sample_class(code, n, generator=None, jitter=True) -> (images, prompts)`;
- `concept_signal(n=256, seed=0) -> dict[str, float]`: σ_i, the image change per unit change of concept i;
- `describe() -> dict`: a JSON-able summary for the run record.

Determinism: the same config gives bit-identical data. Nonsense input (unknown class code, n ≤ 0) raises ValueError.
"""

from __future__ import annotations

from conceptlab.data.bump_world import BumpsDataConfig, BumpWorld
from conceptlab.data.labelled import LabelledImages
from conceptlab.data.shapes import ConceptDataset, ShapesDataConfig, ShapesDGP
from conceptlab.data.shapes3d_world import Shapes3DDataConfig, Shapes3DWorld

__all__ = [
    "BumpWorld",
    "BumpsDataConfig",
    "ConceptDataset",
    "LabelledImages",
    "Shapes3DDataConfig",
    "Shapes3DWorld",
    "ShapesDGP",
    "ShapesDataConfig",
]
