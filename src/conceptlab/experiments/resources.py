"""Memory a run needs, estimated from its config before anything is allocated, and the memory it may use here; a
run that cannot fit is refused in one line (the estimate, the limit, and the config keys that drive it). Also the
arithmetic of a run's training (`training_flops`), by which a pool orders its runs.

The estimate of a run's peak resident memory is the sum of

- `runtime`: this process now (the interpreter, torch and the libraries a run imports);
- `data`: building and holding the training set (the study's `memory_needs`, from the config alone);
- `model`: weights, gradients, AdamW state, EMA, and the copies written at a checkpoint (the network is built on the
  `meta` device to count its parameters; nothing is allocated); DDPM's step tables;
- the larger of `training` (a training step's activations at `train.batch_size`, measured on `meta`) and
  `evaluation` (what the study's evaluation holds, plus one no-grad network pass at its largest batch).

Freed memory is rarely returned to the system during a run, so parts are added rather than overlapped. The limit
is the memory available to this process (`MemAvailable`, and the cgroup's `memory.max` where one is set, plus what
the process already holds) and, when set, the hard cap `CONCEPTLAB_MAX_MEMORY_GB` (for shared machines and
clusters: a run whose estimate is over it is refused whatever the machine has free).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from conceptlab.experiments.loading import ConfigError
from conceptlab.messages import one_line
from conceptlab.models.diffusion_model import build_network
from conceptlab.models.footprint import network_footprint
from conceptlab.studies import MemoryNeeds, build_data, study_for

CAP_ENV = "CONCEPTLAB_MAX_MEMORY_GB"
GB = 1e9


class ResourceError(ConfigError):
    """A run that would not fit in the memory it may use; one line."""


@dataclass
class MemoryEstimate:
    """A run's estimated peak resident memory, by part (bytes), and the config keys driving each part."""

    parts: dict[str, int]
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def peak(self) -> int:
        p = self.parts
        return p["runtime"] + p["data"] + p["model"] + max(p["training"], p["evaluation"])

    def describe(self) -> str:
        shown = ", ".join(f"{name} {gigabytes(size)}" for name, size in self.parts.items())
        return f"about {gigabytes(self.peak)} GB at its peak ({shown})"


@dataclass
class MemoryLimit:
    """The most a run may hold (bytes) and where that limit comes from."""

    bytes: int
    source: str


def gigabytes(size: float) -> str:
    return f"{size / GB:.2f}" if size < 10 * GB else f"{size / GB:.1f}"


def process_memory() -> int:
    """Resident bytes of this process now (Linux `/proc/self/status`; elsewhere the peak so far)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except (ImportError, OSError):  # pragma: no cover - not POSIX
        return 0


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """Bytes the process's cgroup still allows (its limit minus its use), or None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, where = parts[1], parts[2].lstrip("/")
        if controllers == "":  # cgroup v2
            folder = Path("/sys/fs/cgroup") / where
            limit, used = _read_int(folder / "memory.max"), _read_int(folder / "memory.current")
        elif "memory" in controllers.split(","):  # cgroup v1
            folder = Path("/sys/fs/cgroup/memory") / where
            limit, used = _read_int(folder / "memory.limit_in_bytes"), _read_int(folder / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and used is not None and limit < 1 << 60:
            return max(0, limit - used)
    return None


def available_memory() -> MemoryLimit:
    """Bytes a run in this process may hold at its peak: what it holds now plus what the machine (and its cgroup)
    can still give, capped by `CONCEPTLAB_MAX_MEMORY_GB` when set (ConfigError if that is not a positive number)."""
    held = process_memory()
    free, source = None, "MemAvailable"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        try:
            free, source = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free physical memory"
        except (ValueError, OSError, AttributeError):  # pragma: no cover - unknown system: no machine limit
            free, source = 1 << 62, "no known limit"
    room = _cgroup_room()
    if room is not None and room < free:
        free, source = room, "the cgroup's memory.max"
    limit = MemoryLimit(held + free, f"{source} on this machine")
    cap = memory_cap()
    if cap is not None and cap < limit.bytes:
        limit = MemoryLimit(cap, f"{CAP_ENV}={os.environ[CAP_ENV]}")
    return limit


def memory_cap() -> int | None:
    """The hard cap `CONCEPTLAB_MAX_MEMORY_GB` in bytes, or None when unset; ConfigError when it is not a positive
    finite number."""
    text = os.environ.get(CAP_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        raise ConfigError(f"{CAP_ENV} must be a positive number of gigabytes, got {text[:40]!r}")
    return int(value * GB)


def study_memory(cfg) -> MemoryNeeds:
    """The run's study's `memory_needs(cfg)` (a plug-in without it: nothing known)."""
    needs = getattr(study_for(cfg.data.kind), "memory_needs", None)
    return needs(cfg) if callable(needs) else MemoryNeeds()


def estimate_memory(cfg, dgp=None, needs: MemoryNeeds | None = None) -> MemoryEstimate:
    """The run's estimated peak memory (see the module docstring). Without `dgp` (the data-generating process) the
    model and its passes are not counted: the estimate that can be made before the data is built."""
    needs = needs or study_memory(cfg)
    parts = {"runtime": process_memory(), "data": int(needs.data), "model": 0, "training": 0, "evaluation": 0}
    keys = {"data": needs.data_keys, "evaluation": needs.eval_keys}
    parts["evaluation"] = int(needs.evaluation)
    if dgp is not None:
        try:
            use = _footprint(cfg.model, dgp, cfg.train.batch_size, needs.eval_batch)
        except (RuntimeError, ValueError, OverflowError) as err:  # shapes the network cannot take, or sizes past int64
            sizes = _with_values(cfg, "data.image_size, model.widths, model.pixel_unshuffle, train.batch_size")
            raise ConfigError(one_line(f"the network cannot run on these shapes ({sizes}): {err}")) from None
        ema = 1 if cfg.train.ema_decay is not None else 0
        parts["model"] = 4 * use["parameters"] * (7 + 3 * ema)  # weights, grads, AdamW moments, EMA; checkpoint copies
        if cfg.diffusion.process == "ddpm":
            parts["model"] += 64 * cfg.diffusion.ddpm_steps
        parts["training"] = use["training"] + 4 * cfg.train.batch_size * dgp.prompt_dim
        parts["evaluation"] += use["evaluation"]
        keys["model"] = "model.widths, model.blocks_per_level"
        keys["training"] = "train.batch_size, model.widths, data.image_size"
    return MemoryEstimate(parts, {k: v for k, v in keys.items() if v})


_FOOTPRINTS: dict[tuple, dict[str, int]] = {}  # a network's footprint per (model config, data shapes, batches)


def _footprint(model_cfg, dgp, train_batch: int, eval_batch: int) -> dict[str, int]:
    """`network_footprint` of the network `model_cfg` builds for `dgp`'s shapes, built on the meta device; kept per
    process by everything it depends on (sizing one takes about half a second on a CPU, and a process that prepares
    many runs, a dry run of each preset say, sizes the same few networks again)."""
    shape = (dgp.channels, dgp.image_size, dgp.image_size)
    key = (type(model_cfg).__qualname__, model_cfg.model_dump_json(), shape, dgp.prompt_dim, repr(dgp.null_label),
           train_batch, eval_batch)
    if key not in _FOOTPRINTS:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            net = build_network(model_cfg, dgp.prompt_dim, dgp.channels, dgp.null_label)
        _FOOTPRINTS[key] = network_footprint(net, shape, dgp.prompt_dim, train_batch, eval_batch)
    return dict(_FOOTPRINTS[key])


def training_shape(cfg) -> tuple:
    """What a run's training arithmetic depends on, to within the prompt's width: the data kind and image size, the
    model config, steps and batch (runs equal in it — a sweep over seeds, separations or evaluation keys — train
    alike, so their order is immaterial)."""
    return (cfg.data.kind, getattr(cfg.data, "image_size", None), cfg.model.model_dump_json(), cfg.train.steps,
            cfg.train.batch_size)


_DATA_SHAPES: dict[str, tuple | None] = {}  # (channels, image size, prompt width, null label) per data config
_FORWARD_FLOPS: dict[tuple, float | None] = {}  # one image's forward FLOPs per (model config, data shapes)


def training_flops(cfg) -> float | None:
    """The arithmetic of a run's training, from its config alone: `train.steps` × `train.batch_size` × 3 × one
    image's forward FLOPs (torch's flop counter on the network built on the meta device, nothing allocated; a
    backward pass is about two forwards). Evaluation is not counted, nor the time a FLOP takes (small images run
    less efficiently): a proxy that orders runs by size, never reported as a time. None when the run's data cannot
    be built here (e.g. a study whose data needs files this machine lacks) or its network cannot take the data's
    shapes: the run itself says why when it starts. The data is built (`build_data`, which reads no images for the
    built-in studies) for its shapes only, kept per data config (bar the data seed), and each network is sized once
    per process by what it sees (model config, channels, image size, prompt width, null label)."""
    from torch.utils.flop_counter import FlopCounterMode  # here: it imports torch's subclass machinery (start-up)

    data = cfg.data.model_dump(mode="json")
    data.pop("data_seed", None)
    data_key = json.dumps(data, sort_keys=True, default=str)
    if data_key not in _DATA_SHAPES:
        try:
            with torch.random.fork_rng(devices=[]):  # a plug-in's data may draw as it is built
                dgp = build_data(cfg.data)
            _DATA_SHAPES[data_key] = (dgp.channels, dgp.image_size, dgp.prompt_dim, dgp.null_label)
        except (OSError, ValueError, ConfigError):  # e.g. files this machine lacks; anything else is a bug: raised
            _DATA_SHAPES[data_key] = None
    shapes = _DATA_SHAPES[data_key]
    if shapes is None:
        return None
    channels, size, prompt_dim, null_label = shapes
    key = (cfg.model.model_dump_json(), channels, size, prompt_dim, repr(null_label))
    if key not in _FORWARD_FLOPS:
        try:
            with torch.device("meta"):
                net = build_network(cfg.model, prompt_dim, channels, null_label)
                with FlopCounterMode(display=False) as counter, torch.no_grad():
                    net(torch.empty(1, channels, size, size), torch.empty(1), torch.empty(1, prompt_dim))
            _FORWARD_FLOPS[key] = float(counter.get_total_flops())
        except (RuntimeError, ValueError):  # shapes this network cannot take (check_memory refuses the run)
            _FORWARD_FLOPS[key] = None
    flops = _FORWARD_FLOPS[key]
    return None if flops is None else 3.0 * flops * cfg.train.steps * cfg.train.batch_size


def check_memory(cfg, dgp=None, needs: MemoryNeeds | None = None) -> MemoryEstimate:
    """`estimate_memory`, or ResourceError (one line: the estimate, the limit, the keys driving its parts over half
    the limit and their values) when the estimated peak is over `available_memory()`."""
    estimate = estimate_memory(cfg, dgp, needs)
    limit = available_memory()
    if estimate.peak > limit.bytes:
        parts = sorted(((v, k) for k, v in estimate.parts.items() if k != "runtime"), reverse=True)
        big = [k for v, k in parts if v > limit.bytes / 2] or [parts[0][1]]  # the parts that matter, largest first
        keys = list(dict.fromkeys(key.strip() for part in big for key in estimate.keys.get(part, "").split(",")
                                  if key.strip()))
        hint = f"; lower {_with_values(cfg, ', '.join(keys[:6]))}" if keys else ""
        raise ResourceError(f"this run needs {estimate.describe()}, over the {gigabytes(limit.bytes)} GB it may use "
                            f"({limit.source}){hint}")
    return estimate


def _with_values(cfg, keys: str) -> str:
    """`a.b, c.d` → `a.b=1, c.d=[2, 3]` (each key's value in `cfg`)."""
    out = []
    for key in (k.strip() for k in keys.split(",") if k.strip()):
        value = cfg
        for part in key.split("."):
            value = getattr(value, part, None)
        text = repr(value) if not isinstance(value, (list, tuple)) else "[" + ", ".join(map(str, value[:6])) + \
            (", …]" if len(value) > 6 else "]")
        out.append(f"{key}={text[:40]}")
    return ", ".join(out)


def describe_limit() -> str:
    """The memory a run may use here, for `--dry-run`."""
    limit = available_memory()
    return f"{gigabytes(limit.bytes)} GB ({limit.source})"
