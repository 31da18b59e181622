"""A denoising network and its diffusion process held together as one trainable, checkpointable module."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from conceptlab.models.diffusion import DiffusionProcess
from conceptlab.models.encodings import SinusoidalEncoding
from conceptlab.models.processes import DiffusionConfig, build_process, guidance_offset
from conceptlab.models.sampling import ancestral_sample
from conceptlab.models.unet import ConceptUNet, ModelConfig


class DiffusionModel(nn.Module):
    """`net` (the UNet, with hook points) + `process` (schedule, loss, parameterisation)."""

    def __init__(
        self, net: nn.Module, process: DiffusionProcess, image_shape: tuple[int, int, int],
        guidance_convention: str = "ho_salimans",
    ):
        super().__init__()
        self.net = net
        self.process = process
        self.image_shape = tuple(image_shape)
        guidance_offset(0.0, guidance_convention)  # refuses an unknown convention
        self.guidance_convention = guidance_convention

    def loss(self, images: Tensor, prompts: Tensor, generator: torch.Generator | None = None):
        """Training loss on a batch of [0,1] images and their prompts; returns (loss, metrics)."""
        return self.process.loss(self.net, self.process.to_model_space(images), prompts, generator)

    def sample(
        self,
        prompts: Tensor,
        steps: int = 50,
        generator: torch.Generator | None = None,
        guidance_scale: float | None = None,
        null_prompt: Tensor | None = None,
    ) -> Tensor:
        """One image in [0,1] per prompt row (ancestral sampler); `guidance_scale` in this model's guidance
        convention (`models.processes.guidance_offset`), or None for plain conditional sampling whatever the
        convention (under `diffusers` a scale of 0 is the *unconditional* model, 1 the plain conditional one)."""
        offset = 0.0 if guidance_scale is None else guidance_offset(guidance_scale, self.guidance_convention)
        return ancestral_sample(self.process, self.net, prompts, self.image_shape, steps, generator, offset, null_prompt)


def build_network(model_cfg: ModelConfig, prompt_dim: int, channels: int = 3,
                  null_value: float | None = None) -> ConceptUNet:
    """The denoising UNet alone (with its prompt encoder), for prompts of `prompt_dim` and `channels` image channels;
    built on any default device (the memory estimate builds it on `meta`, allocating nothing)."""
    encoder = None
    if model_cfg.prompt_encoding == "sinusoidal":
        encoder = SinusoidalEncoding(
            prompt_dim,
            model_cfg.prompt_frequencies,
            period=model_cfg.prompt_period,
            min_wavelength=model_cfg.prompt_min_wavelength,
            max_wavelength=model_cfg.prompt_max_wavelength,
            include_raw=model_cfg.prompt_include_raw,
            null_value=null_value,
        )
    return ConceptUNet(model_cfg, prompt_dim=prompt_dim, image_channels=channels, prompt_encoder=encoder)


def build_model(
    model_cfg: ModelConfig,
    diffusion_cfg: DiffusionConfig,
    prompt_dim: int,
    image_size: int,
    channels: int = 3,
    attribute_sizes: tuple[int, ...] | None = None,
    null_value: float | None = None,
) -> DiffusionModel:
    """The UNet + diffusion process a config describes, for prompts of `prompt_dim` and images `channels×S×S`.

    `attribute_sizes` (one-hot prompt blocks) lets a VE process drop attributes one by one; `null_value` is the
    prompt value of a dropped label (sinusoidal encodings map all-null rows to zero features).
    """
    net = build_network(model_cfg, prompt_dim, channels, null_value)
    process = build_process(diffusion_cfg, attribute_sizes, 0.0 if null_value is None else null_value)
    return DiffusionModel(net, process, (channels, image_size, image_size), diffusion_cfg.guidance_convention)
