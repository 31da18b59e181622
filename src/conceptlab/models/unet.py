"""ConceptUNet: the concept-conditioned diffusion UNet of the concept-space paper, with named hook points."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from conceptlab.config_base import StrictConfig
from conceptlab.hooks.hook_point import HookPoint, name_hook_points
from conceptlab.models.masks import drop_threshold, sfc64_keep_mask


class ModelConfig(StrictConfig):
    """Conditional UNet with named hook points (see `models.unet`)."""

    added_fields = ("embedding_final_gelu", "norm_eps", "dropout_mask")

    widths: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [64, 128, 256], min_length=1)
    blocks_per_level: int = Field(2, ge=1)
    mid_attention: bool = True
    attention_heads: int = Field(4, ge=1)
    norm_groups: int = Field(8, ge=1)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    dropout_mask: Literal["bernoulli", "uniform", "sfc64"] = Field(
        "bernoulli", description="how dropout draws its mask: bernoulli (torch's dropout), uniform (a uniform "
        "draw ≥ p: the same distribution from another random stream, about 2× faster on a CPU) or sfc64 (on a CPU, "
        "32-bit words from numpy's SFC64 compared with round(p·2³²), `models.masks`: p resolved to 2⁻³², the "
        "mask about 3× faster to draw than uniform; elsewhere as uniform)"
    )
    pixel_unshuffle: int = Field(1, ge=1, description="space-to-depth factor applied to the input (1 = off)")
    concept_embedder: Literal["per_block", "shared"] = Field(
        "per_block", description="per_block: a small MLP per ResBlock (the paper); shared: one MLP for all blocks"
    )
    prompt_shift: float = Field(0.0, description="prompt entries are mapped to (p - prompt_shift) * prompt_scale")
    prompt_scale: float = Field(1.0, gt=0.0)
    prompt_encoding: Literal["raw", "sinusoidal"] = Field(
        "raw", description="raw: the (shifted, scaled) prompt; sinusoidal: sin/cos features of each entry"
    )
    prompt_frequencies: int = Field(8, ge=1, description="sinusoidal: frequencies per prompt entry")
    prompt_period: float | None = Field(
        None, gt=0.0, description="sinusoidal: period of each entry (periodic data, e.g. the canvas width)"
    )
    prompt_min_wavelength: float = Field(2.0, gt=0.0, description="sinusoidal, non-periodic: shortest wavelength")
    prompt_max_wavelength: float = Field(64.0, gt=0.0, description="sinusoidal, non-periodic: longest wavelength")
    prompt_include_raw: bool = Field(False, description="sinusoidal: also pass the raw entries")
    embedding_final_gelu: bool = Field(
        False, description="end every time and concept MLP with a GELU (Linear→GELU→Linear→GELU, the authors' "
        "network); off: Linear→GELU→Linear"
    )
    norm_eps: float = Field(1e-5, gt=0.0, description="GroupNorm epsilon (the authors' network: 1e-6)")

    @model_validator(mode="after")
    def _groups_divide(self) -> "ModelConfig":
        for w in self.widths:
            if w % self.norm_groups:
                raise ValueError(f"every width must be divisible by norm_groups={self.norm_groups}, got {w}")
        if self.mid_attention and self.widths[-1] % self.attention_heads:
            raise ValueError(f"last width {self.widths[-1]} not divisible by attention_heads={self.attention_heads}")
        return self


def check_image_size(image_size: int, cfg: ModelConfig) -> None:
    """ValueError unless `image_size` survives the UNet's downsampling: divisible by 2^(levels−1)·pixel_unshuffle."""
    factor = 2 ** (len(cfg.widths) - 1) * cfg.pixel_unshuffle
    if image_size % factor:
        raise ValueError(f"data.image_size {image_size} must be divisible by 2^(levels-1)·pixel_unshuffle = {factor}")


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters of `model`."""
    return sum(p.numel() for p in model.parameters())


def _mlp(in_dim: int, out_dim: int, final_gelu: bool = False) -> nn.Sequential:
    """Linear → GELU → Linear (→ GELU with `final_gelu`, the authors'), the shape of every time and concept
    embedder."""
    layers = [nn.Linear(in_dim, out_dim), nn.GELU(), nn.Linear(out_dim, out_dim)]
    return nn.Sequential(*layers, nn.GELU()) if final_gelu else nn.Sequential(*layers)


def _zero_init(module: nn.Module) -> nn.Module:
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


def _same_resolution_conv(channels: int) -> nn.Sequential:
    """2×2 stride-1 conv after padding right/bottom by 1 (the authors' transition at the coarsest/finest level)."""
    return nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(channels, channels, 2))


class MaskDropout(nn.Module):
    """Dropout whose mask is drawn by torch's dropout (`bernoulli`), as a uniform draw ≥ p (`uniform`) or, on a CPU,
    from SFC64 words (`sfc64`, `models.masks.sfc64_keep_mask`; on other devices as `uniform`): the same distribution
    (each unit kept with probability 1 − p, kept units scaled by 1/(1 − p)), another random stream, each drawn from
    torch's default generator's state. The uniform draw is made in fp32 whatever the activations' dtype (a bf16
    uniform would be too coarse to hit p). Identity in eval mode or at p = 0."""

    def __init__(self, p: float, mask: str = "bernoulli") -> None:
        super().__init__()
        if mask not in ("bernoulli", "uniform", "sfc64"):
            raise ValueError(f"dropout mask must be 'bernoulli', 'uniform' or 'sfc64', got {mask!r}")
        if mask == "sfc64":
            drop_threshold(p)  # a p its 32-bit threshold cannot hold is refused when the model is built, not mid-run
        self.p, self.mask = float(p), mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.mask == "bernoulli":
            return F.dropout(x, self.p, True)
        if self.mask == "sfc64" and x.device.type == "cpu":
            keep = sfc64_keep_mask(x.shape, self.p)
        else:
            keep = torch.rand(x.shape, device=x.device) >= self.p
        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}, mask={self.mask}"


class ResBlock(nn.Module):
    """GroupNorm→GELU→conv, + time bias + concept embedding, GroupNorm→GELU→Dropout→conv (zero-init), + residual.

    Hook points: `hook_in` (block input), `hook_time` (per-channel time bias
    [N, C]), `hook_concept` (the concept embedding [N, C], per-block mode only),
    `hook_out` (block output). In shared mode the time MLP reads the sum of the
    time and the shared concept embedding.
    """

    def __init__(
        self, in_ch: int, out_ch: int, cond_dim: int, prompt_dim: int | None, groups: int, dropout: float,
        final_gelu: bool = False, eps: float = 1e-5, dropout_mask: str = "bernoulli",
    ) -> None:
        super().__init__()
        self.hook_in = HookPoint()
        self.norm1 = nn.GroupNorm(groups, in_ch, eps=eps)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.time_mlp = _mlp(cond_dim, out_ch, final_gelu)
        self.hook_time = HookPoint()
        self.concept_embedder = _mlp(prompt_dim, out_ch, final_gelu) if prompt_dim is not None else None
        self.hook_concept = HookPoint() if prompt_dim is not None else None
        self.norm2 = nn.GroupNorm(groups, out_ch, eps=eps)
        self.dropout = MaskDropout(dropout, dropout_mask)
        self.conv2 = _zero_init(nn.Conv2d(out_ch, out_ch, 3, padding=1))
        self.skip = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()
        self.hook_out = HookPoint()

    def forward(self, x: torch.Tensor, cond: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        x = self.hook_in(x)
        h = self.conv1(F.gelu(self.norm1(x)))
        bias = self.hook_time(self.time_mlp(cond))
        if self.concept_embedder is not None:
            bias = bias + self.hook_concept(self.concept_embedder(prompt))
        h = h + bias[:, :, None, None]
        h = self.conv2(self.dropout(F.gelu(self.norm2(h))))
        return self.hook_out(self.skip(x) + h)


class Attention(nn.Module):
    """Multi-head self-attention over pixels: pre-GroupNorm, 1×1 q/k/v and output convs, residual; `hook_out`.

    q, k and v are strided views of the q/k/v conv's output, which torch's `scaled_dot_product_attention` runs
    through its math kernel. With `fused` set (`use_fused_attention`) they are first packed (unit stride along the
    head dimension), so it runs its fused kernel (flash attention on a CPU) instead: the same attention, with
    outputs that differ by rounding (fp32 ~1e-7, bf16 ~1e-3 relative), faster in inference where heads are narrow
    (docs/benchmarks.md). Off by default, so a run's numbers do not depend on it.
    """

    def __init__(self, channels: int, heads: int, groups: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.heads = heads
        self.fused = False
        self.norm = nn.GroupNorm(groups, channels, eps=eps)
        self.qkv = nn.Conv2d(channels, 3 * channels, 1)
        self.proj = nn.Conv2d(channels, channels, 1)
        self.hook_out = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        qkv = self.qkv(self.norm(x)).reshape(n, 3, self.heads, c // self.heads, h * w).transpose(-1, -2)
        if self.fused:
            qkv = qkv.contiguous()
        q, k, v = qkv.unbind(1)  # each [N, heads, HW, C/heads]
        out = F.scaled_dot_product_attention(q, k, v).transpose(-1, -2).reshape(n, c, h, w)
        return self.hook_out(x + self.proj(out))


def use_fused_attention(model: nn.Module, on: bool = True) -> nn.Module:
    """Set every `Attention` in `model` to run torch's fused kernel (`on`) or its math kernel (off, the default);
    returns `model`. Rounding-level output change: see `Attention`."""
    for m in model.modules():
        if isinstance(m, Attention):
            m.fused = on
    return model


class Level(nn.Module):
    """One resolution of the encoder or decoder: ResBlocks, then a resampling conv."""

    def __init__(self, blocks: list[ResBlock], resample: nn.Module) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.resample = resample

    def run_blocks(self, h: torch.Tensor, cond: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = block(h, cond, prompt)
        return h


class Middle(nn.Module):
    """ResBlock → (optional) self-attention → ResBlock at the coarsest resolution."""

    def __init__(self, blocks: list[ResBlock], attn: Attention | None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.attn = attn

    def forward(self, h: torch.Tensor, cond: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        h = self.blocks[0](h, cond, prompt)
        if self.attn is not None:
            h = self.attn(h)
        return self.blocks[1](h, cond, prompt)


class ConceptUNet(nn.Module):
    """Conditional UNet ε-network: `forward(x [N,C,H,W], t [N] in [0,1], prompt [N,P]) -> [N,C,H,W]`.

    Returns the raw network output; the diffusion process adds z_t (ε̂ = UNet(z_t) + z_t).
    With the paper config (widths [64,128,256], 2 blocks/level, mid attention,
    prompt_dim 11) it has 10,913,859 parameters.

    The prompt is normalised, p' = (p − prompt_shift)·prompt_scale. Time is a
    sinusoidal embedding of 1000·t → MLP (w0 → 4w0 → 4w0), shared by all
    blocks; the t it receives is the diffusion process's choice (the VDM's
    `time_input`: t itself, or the authors' normalised log-SNR). Every time and
    concept MLP is Linear→GELU→Linear, with a last GELU when
    `cfg.embedding_final_gelu` (the authors' network); GroupNorms use `cfg.norm_eps`. Concept conditioning (cfg.concept_embedder):
      per_block: every ResBlock has its own concept embedder, an MLP
        (P → C → C) whose output, the block's concept embedding, is a
        per-channel bias; these are the sites of latent interventions.
      shared: one MLP (P → 4w0 → 4w0) whose output is added to the time embedding.
    `concept_embedders()` returns these MLPs by module path; the concept embedding
    a prompt p gets from one of them is `module(normalised_prompt(p))`.
    An optional `prompt_encoder` (e.g. `models.encodings.SinusoidalEncoding`) is
    applied after that normalisation, so the embedders read its output; one whose
    `takes_raw_prompt` is true is called as `encoder(p', raw=p)`, the prompt as
    given telling it the null rows (which the shift and scale would move), any
    other module as `encoder(p')`; its width is its `out_dim` attribute (or probed
    on a zero prompt). Without one the network is unchanged.

    Levels: encoder level i (width w_i) runs its ResBlocks, keeps the result as
    skip, then downsamples with a 2×2 stride-2 conv (the last level instead
    applies a same-resolution 2×2 conv, as the authors do). Decoder `up.k`
    handles level i = L−1−k: ResBlocks, then a 2×2 transposed conv to w_{i−1}
    concatenated with encoder skip i−1 (up.L−1, the finest, ends with a
    same-resolution 2×2 conv). The skip of the coarsest level is unused.

    Hook points (see `conceptlab.hooks.hook_points`), in registration order:
      hook_prompt                 normalised prompt [N, P]
      hook_time                   shared time embedding [N, 4w0]
      hook_concept                shared concept embedding [N, 4w0] (shared mode only)
      down.{i}.blocks.{j}.hook_in / hook_time / hook_concept / hook_out
      mid.blocks.{0,1}.hook_in / hook_time / hook_concept / hook_out
      mid.attn.hook_out           attention output incl. residual (if mid_attention)
      up.{k}.blocks.{j}.hook_in / hook_time / hook_concept / hook_out
      hook_out                    network output [N, C, H, W]
    e.g. `down.0.blocks.1.hook_concept`, `mid.blocks.0.hook_out`, `up.2.blocks.0.hook_in`.
    """

    def __init__(
        self, cfg: ModelConfig, prompt_dim: int, image_channels: int = 3, prompt_encoder: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.cfg = cfg
        widths, groups, r = cfg.widths, cfg.norm_groups, cfg.pixel_unshuffle
        w0, cond_dim = widths[0], 4 * widths[0]
        per_block = cfg.concept_embedder == "per_block"
        self.prompt_encoder = prompt_encoder
        if prompt_encoder is not None:
            out_dim = getattr(prompt_encoder, "out_dim", None)
            prompt_dim = int(out_dim) if out_dim is not None else prompt_encoder(torch.zeros(1, prompt_dim)).shape[-1]
        block_prompt_dim = prompt_dim if per_block else None

        def block(cin: int, cout: int) -> ResBlock:
            return ResBlock(cin, cout, cond_dim, block_prompt_dim, groups, cfg.dropout, cfg.embedding_final_gelu,
                            cfg.norm_eps, cfg.dropout_mask)

        half = w0 // 2
        self.register_buffer(
            "frequencies", torch.exp(-math.log(1e4) * torch.arange(half) / max(half - 1, 1)), persistent=False
        )
        self.hook_prompt = HookPoint()
        self.time_embedder = _mlp(w0, cond_dim, cfg.embedding_final_gelu)
        self.hook_time = HookPoint()
        self.concept_embedder = None if per_block else _mlp(prompt_dim, cond_dim, cfg.embedding_final_gelu)
        self.hook_concept = None if per_block else HookPoint()
        self.in_conv = nn.Conv2d(image_channels * r * r, w0, 3, padding=1)

        last = len(widths) - 1
        self.down = nn.ModuleList()
        for i, w in enumerate(widths):
            cin = w0 if i == 0 else widths[i - 1]
            blocks = [block(cin if j == 0 else w, w) for j in range(cfg.blocks_per_level)]
            resample = nn.Conv2d(w, w, 2, stride=2) if i < last else _same_resolution_conv(w)
            self.down.append(Level(blocks, resample))

        w_mid = widths[-1]
        attn = Attention(w_mid, cfg.attention_heads, groups, cfg.norm_eps) if cfg.mid_attention else None
        self.mid = Middle([block(w_mid, w_mid), block(w_mid, w_mid)], attn)

        self.up = nn.ModuleList()
        for i in reversed(range(len(widths))):
            w = widths[i]
            cin = w if i == last else 2 * w
            blocks = [block(cin if j == 0 else w, w) for j in range(cfg.blocks_per_level)]
            resample = nn.ConvTranspose2d(w, widths[i - 1], 2, stride=2) if i > 0 else _same_resolution_conv(w)
            self.up.append(Level(blocks, resample))

        self.out_norm = nn.GroupNorm(groups, w0, eps=cfg.norm_eps)
        self.out_conv = _zero_init(nn.Conv2d(w0, image_channels * r * r, 3, padding=1))
        self.hook_out = HookPoint()
        name_hook_points(self)

    def normalised_prompt(self, prompt: torch.Tensor) -> torch.Tensor:
        """The prompt as the concept embedders see it: (p − prompt_shift)·prompt_scale, then the prompt encoder
        (given the prompt as it came too, on which it tells null rows)."""
        p = (prompt - self.cfg.prompt_shift) * self.cfg.prompt_scale
        if self.prompt_encoder is None:
            return p
        if getattr(self.prompt_encoder, "takes_raw_prompt", False):
            return self.prompt_encoder(p, raw=prompt)
        return self.prompt_encoder(p)

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        """Sinusoidal embedding of 1000·t (log-spaced frequencies 1..1e-4, sin then cos) → MLP."""
        args = 1000.0 * t[:, None].float() * self.frequencies[None]
        emb = torch.cat([args.sin(), args.cos()], dim=1)
        return self.time_embedder(F.pad(emb, (0, self.cfg.widths[0] % 2)))

    def concept_embedders(self) -> dict[str, nn.Module]:
        """The concept MLPs by module path (one per ResBlock, or the single shared one)."""
        return {name: m for name, m in self.named_modules() if name.endswith("concept_embedder")}

    def forward(self, x: torch.Tensor, t: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """Raw output for images x [N,C,H,W], times t [N] (or a scalar) in [0,1] and prompts [N,P]."""
        n, _, height, width = x.shape
        factor = 2 ** (len(self.cfg.widths) - 1) * self.cfg.pixel_unshuffle
        if height % factor or width % factor:
            raise ValueError(
                f"image size {height}×{width} must be divisible by 2**(levels-1)·pixel_unshuffle = {factor}"
            )
        prompt = self.hook_prompt(self.normalised_prompt(prompt))
        cond = self.hook_time(self.time_embedding(t.expand(n)))
        if self.concept_embedder is not None:
            cond = cond + self.hook_concept(self.concept_embedder(prompt))

        r = self.cfg.pixel_unshuffle
        h = self.in_conv(F.pixel_unshuffle(x, r) if r > 1 else x)
        skips = []
        for level in self.down:
            h = level.run_blocks(h, cond, prompt)
            skips.append(h)
            h = level.resample(h)
        h = self.mid(h, cond, prompt)
        for k, level in enumerate(self.up):
            if k > 0:
                h = torch.cat([h, skips[-1 - k]], dim=1)
            h = level.resample(level.run_blocks(h, cond, prompt))
        h = self.out_conv(F.gelu(self.out_norm(h)))
        return self.hook_out(F.pixel_shuffle(h, r) if r > 1 else h)
