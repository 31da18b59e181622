"""The intervention evaluation's pass size: capped on a CPU where the images do not depend on the packing."""

import pytest
import torch

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.sweep import run_id
from conceptlab.studies.emergence import images_per_pass


@pytest.mark.parametrize("overrides, device, expected", [
    ([], "cpu", 128),  # the paper preset's 1,024-image passes, capped
    ([], "cuda", 1024),
    (["eval.interventions.noise=shared"], "cpu", 1024),  # there the packing moves the draws: left alone
    (["eval.interventions.max_batch=64"], "cpu", 64),
    (["eval.interventions.cpu_max_batch=2048"], "cpu", 1024),
    (["eval.interventions.cpu_max_batch=null"], "cpu", 1024),
])
def test_passes_are_capped_on_a_cpu_under_per_variant_noise_only(overrides, device, expected):
    iv = load_config("hidden-emergence-paper", overrides).eval.interventions
    assert images_per_pass(iv, torch.device(device)) == expected


def test_no_cap_by_default_and_the_default_keeps_every_run_id():
    cfg = load_config("hidden-emergence-tiny", [])
    assert cfg.eval.interventions.cpu_max_batch is None
    assert images_per_pass(cfg.eval.interventions, torch.device("cpu")) == cfg.eval.interventions.max_batch
    assert "cpu_max_batch" not in cfg.model_dump()["eval"]["interventions"]
    assert run_id(load_config("hidden-emergence-tiny", ["eval.interventions.cpu_max_batch=64"])) != run_id(cfg)


def test_the_evaluation_samples_in_the_capped_passes(intervention_call):
    cfg = load_config("hidden-emergence-tiny", ["eval.interventions.max_batch=1000",
                                                "eval.interventions.cpu_max_batch=128"])
    assert intervention_call(cfg)["max_batch"] == 128  # the model is on the CPU
