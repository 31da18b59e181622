"""The `celeba` study (Park et al. 2024, real data): the concept-space reading and hidden capabilities on CelebA.

The `shapes` study's evaluation on real faces: per checkpoint, `eval.samples_per_class` generations of every class
read by the face-attribute probe (`probes.face_classifier`, trained on CelebA's labels instead of renders) into the
concept-space table, and, with `eval.interventions`, every intervention on the held-out combination (the authors'
linear latent intervention on the one-hot attribute blocks, over-prompting past a block's one-hot value, patching,
the bias-matched naive baseline). The run-level tables, summary and figures are the `shapes` study's
(`studies.concept_space.summarize`), so the findings suite reads a `celeba` run exactly as a `shapes` one.
It shares the `eval` fields of the `shapes` study (`eval.probe` configures the face probe here).
"""

from __future__ import annotations

from conceptlab.data.celeba import CelebADataConfig, CelebADGP
from conceptlab.probes.face_classifier import load_or_train_face_probe
from conceptlab.studies.concept_space import ConceptSpaceStudy


class CelebAStudy(ConceptSpaceStudy):
    """`data.kind: celeba` — concept-space dynamics and hidden capabilities on real faces."""

    kind = "celeba"
    version = 1
    order = 40
    data_config = CelebADataConfig
    eval_fields = {}  # the shapes study's fields (declared there once)
    exclusive_sections = frozenset()  # eval.interventions stays open to celeba runs through the parent class

    def build_data(self, cfg: CelebADataConfig) -> CelebADGP:
        return CelebADGP(cfg)

    def data_bytes(self, cfg) -> int:
        """The training images, held as uint8."""
        d = cfg.data
        return len(d.resolved_train_classes()) * d.images_per_class * 3 * d.image_size**2

    def probe_bytes(self, cfg) -> int:
        """The face probe's labelled images (uint8), their float batches and its invalid images."""
        return 2 ** len(cfg.data.concepts) * cfg.eval.probe.images_per_class * 3 * cfg.data.image_size**2 * 5

    def config_warnings(self, cfg) -> list[str]:
        """None: the face probe is trained on the data's own labelled images, so the data cannot leave its range."""
        return []

    def probe(self, cfg, dgp: CelebADGP | None = None, progress: bool = False):
        """(the face probe, its report): trained on the data's labelled images (built here when `dgp` is None),
        cached per machine; the rest of the evaluation is the shapes study's."""
        return load_or_train_face_probe(cfg.eval.probe, dgp or CelebADGP(cfg.data, progress=progress),
                                        progress=progress)


STUDY = CelebAStudy()
