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

import time

from conceptlab.data.celeba import CelebADataConfig, CelebADGP
from conceptlab.probes.face_classifier import load_or_train_face_probe
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies.base import Evaluation, MemoryNeeds
from conceptlab.studies.concept_space import (
    ConceptSpaceStudy,
    _variant_count,
    concept_space_measurement,
    summarize,
)
from conceptlab.studies.emergence import intervention_measurement


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

    def memory_needs(self, cfg) -> MemoryNeeds:
        """The training images (uint8, and one float batch), the probe's labelled images, a checkpoint's
        generations (every class's samples and every intervention variant's)."""
        d, e = cfg.data, cfg.eval
        image = 3 * d.image_size**2
        classes = 2 ** len(d.concepts)
        data = len(d.resolved_train_classes()) * d.images_per_class * image
        probe = classes * e.probe.images_per_class * image * 5  # uint8 set, float batches, invalid images
        batch = e.samples_per_class * classes
        generated = batch * image * 4
        iv = e.interventions
        if iv is not None:
            generated += _variant_count(iv) * len(iv.targets or d.resolved_held_out_classes()) * iv.samples * image * 4
            batch = max(batch, max(iv.max_batch, iv.samples))
        guided = 2 if cfg.diffusion.guidance_scale or cfg.diffusion.cfg_dropout else 1
        return MemoryNeeds(data=data, evaluation=max(probe, 2 * generated), eval_batch=batch * guided,
                           data_keys="data.images_per_class, data.image_size",
                           eval_keys="eval.samples_per_class, eval.probe.images_per_class, data.image_size")

    def prepare_shared(self, cfg, progress: bool = False) -> None:
        """Decode the images and train (or find cached) the face probe once, before sweep workers start."""
        dgp = CelebADGP(cfg.data, progress=progress)
        dgp.training_set()
        load_or_train_face_probe(cfg.eval.probe, dgp, progress=progress)

    def evaluation(self, cfg, dgp: CelebADGP, model, run: RunFolder, console, progress) -> Evaluation:
        began = time.perf_counter()
        probe, probe_report = load_or_train_face_probe(cfg.eval.probe, dgp, progress=progress)
        setup = {"probe": time.perf_counter() - began}
        measurements = [concept_space_measurement(cfg, dgp, model, probe)]
        if cfg.eval.interventions is not None:
            measurements.append(intervention_measurement(cfg, dgp, model, probe, run.list_checkpoints()))
        return Evaluation(measurements, lambda: summarize(cfg, run, dgp.describe(), probe_report), setup)


STUDY = CelebAStudy()
