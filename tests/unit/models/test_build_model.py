"""build_model wires the configured diffusion process and prompt encoding into one DiffusionModel."""

import pytest
import torch

from conceptlab.models.processes import DiffusionConfig
from conceptlab.models.unet import ModelConfig
from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.models.ddpm import DDPM
from conceptlab.models.diffusion_model import build_model

SMALL = dict(widths=[8, 16], blocks_per_level=1, mid_attention=False, norm_groups=4, dropout=0.0)


def test_ddpm_with_sinusoidal_prompts_trains_and_samples():
    model = build_model(
        ModelConfig(**SMALL, prompt_encoding="sinusoidal", prompt_frequencies=3, prompt_period=32.0),
        DiffusionConfig(process="ddpm", ddpm_steps=20, sample_steps=5),
        prompt_dim=2,
        image_size=8,
        channels=1,
    )
    assert isinstance(model.process, DDPM)
    encoded = model.net.normalised_prompt(torch.tensor([[0.0, 16.0]]))
    assert encoded.shape == (1, 2 * 2 * 3)  # 2 entries × (sin, cos) × 3 frequencies
    loss, _ = model.loss(torch.rand(4, 1, 8, 8), torch.rand(4, 2) * 32, torch.Generator().manual_seed(0))
    assert torch.isfinite(loss)
    images = model.sample(torch.rand(3, 2) * 32, 5, torch.Generator().manual_seed(1))
    assert images.shape == (3, 1, 8, 8) and images.min() >= 0 and images.max() <= 1


def test_ddpm_config_errors_are_one_line():
    with pytest.raises(ConfigError, match="must divide ddpm_steps"):
        load_config("micro", ["diffusion.process=ddpm", "diffusion.prediction=eps", "diffusion.sample_steps=7"])
    with pytest.raises(ConfigError, match="ddpm uses eps prediction"):
        load_config("micro", ["diffusion.process=ddpm", "diffusion.prediction=v", "diffusion.sample_steps=5"])


def test_variance_exploding_process_is_selectable():
    from conceptlab.models.variance_exploding import VarianceExploding

    model = build_model(ModelConfig(**SMALL), DiffusionConfig(process="ve", prediction="x", sigma_min=0.02),
                        prompt_dim=3, image_size=8)
    assert isinstance(model.process, VarianceExploding)
    loss, _ = model.loss(torch.rand(2, 3, 8, 8), torch.rand(2, 3), torch.Generator().manual_seed(0))
    assert torch.isfinite(loss)
    with pytest.raises(ConfigError, match="x prediction is implemented for process ve only"):
        load_config("micro", ["diffusion.prediction=x"])


@pytest.mark.parametrize("process, prediction", [("vdm", "eps"), ("ddpm", "eps"), ("cosine", "v")])
def test_label_dropout_is_refused_for_processes_that_would_ignore_it(process, prediction):
    with pytest.raises(ValueError, match=f"diffusion.label_dropout=0.5 works with diffusion.process=ve only.*"
                                         f"diffusion.process is {process}"):
        DiffusionConfig(process=process, prediction=prediction, label_dropout=0.5)
    with pytest.raises(ConfigError) as err:
        load_config("micro", [f"diffusion.process={process}", f"diffusion.prediction={prediction}",
                              "diffusion.sample_steps=5", "diffusion.label_dropout=0.5"])
    assert "label_dropout" in str(err.value) and "\n" not in str(err.value)
    DiffusionConfig(process=process, prediction=prediction, label_dropout=0.0)  # off: accepted
    assert build_model(ModelConfig(**SMALL), DiffusionConfig(process="ve", label_dropout=0.5), 2, 8).process \
        .label_dropout == 0.5
