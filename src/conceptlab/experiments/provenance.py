"""Provenance: which code, analysis versions, machine and precision made a run's numbers.

`analysis_versions(cfg)` are what enters run ids (`experiments.sweep.run_id`): a study bumps its `version` when a
change alters its numbers, so a sweep never reuses a run made by older code, and `invocation(...)` is what every
invocation of the run driver appends to the folder's `provenance.json` (package version, git commit and whether the
work tree had uncommitted changes, the version keys whose code changed since it was recorded (`code_drift`, from
`experiments.code_versions`), torch, Python, CPU and GPU model, device, precision, threads, host).
"""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from importlib import metadata

if TYPE_CHECKING:
    import torch
# torch and the studies are imported by the two functions that use them, so reading a record's precision (`runs show`)
# starts without them (lazy: docs/benchmarks.md, "Command start-up")

PACKAGE_DIR = Path(__file__).resolve().parents[1]

TRAINING_VERSION = 1  # bump when the training loop's or the model's behaviour changes without a config key


def analysis_versions(cfg) -> dict[str, int]:
    """The code versions a run's numbers depend on beyond its config: its study's and the training code's, and with
    `eval.noise_per_run` the per-run seed derivation's (`studies.base.NOISE_SEEDING_VERSION`) — entered only once
    it is past 1, so the ids of runs made before it existed stay theirs."""
    from conceptlab.studies import base as studies_base, study_for

    versions = {"study": int(getattr(study_for(cfg.data.kind), "version", 1)), "training": TRAINING_VERSION}
    if cfg.eval.noise_per_run and studies_base.NOISE_SEEDING_VERSION != 1:
        versions["noise_seeding"] = studies_base.NOISE_SEEDING_VERSION
    return versions


@functools.lru_cache(maxsize=None)
def git_state() -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding this package's source, (None, None) outside one."""
    source = PACKAGE_DIR
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
        return commit.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None


@functools.lru_cache(maxsize=None)
def package_version() -> str:
    try:
        return metadata.version("conceptlab")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def invocation(cfg, device: torch.device, bf16: bool, code_drift: list[str] | None = None) -> dict[str, Any]:
    """One invocation's record; `code_drift`: the version keys whose code changed since they were recorded
    (`experiments.code_versions.drift_for`, which the run driver passes)."""
    import torch

    commit, dirty = git_state()
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "conceptlab": package_version(),
        "git_commit": commit,
        "git_dirty": dirty,
        "versions": analysis_versions(cfg),
        "code_drift": code_drift,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "device": str(device),
        "bf16": bool(bf16),
        "threads": torch.get_num_threads(),
        "host": socket.gethostname(),
    }


# -- the precision a run's numbers were made in ------------------------------------------------------------------------
# Each invocation of the run driver records what it did once it has done it: `trained` ([from, to] steps, or None when
# it trained nothing) and `measured` (how many checkpoints it measured); one that an error ends (a failure, a refusal,
# Ctrl-C) records what it had done by then (`trained: None, measured: 0` when it was refused before any work). An
# invocation without these keys (killed before it wrote them, or recorded by code older than them) may have done
# either, and counts as having done both.
TRAINED, MEASURED = "trained", "measured"


def run_code_drift(invocations: list[dict[str, Any]]) -> list[str] | None:
    """The version keys whose code differed from its record in any invocation whose work a run holds (sorted; []
    when none did): those that trained or measured (or may have: see above) and the last, which wrote the summary —
    not one that failed or was refused before doing anything. None when none of them recorded it (made before
    `code_drift` existed)."""
    counted = [i for i in invocations[:-1] if _trained_anything(i) or _measured_anything(i)] + invocations[-1:]
    known = [i["code_drift"] for i in counted if isinstance(i, dict) and isinstance(i.get("code_drift"), list)]
    return sorted({str(k) for drift in known for k in drift}) if known else None


def precision_name(bf16: bool) -> str:
    """How a precision is named in summaries, costs and reports."""
    return "bf16 autocast" if bf16 else "fp32"


def invocation_precision(invocation: dict[str, Any]) -> str | None:
    """The precision one invocation record ran in (None: the record does not say, or is not a record)."""
    return precision_name(bool(invocation["bf16"])) if isinstance(invocation, dict) and "bf16" in invocation else None


def _trained_anything(invocation: dict[str, Any]) -> bool:
    return not isinstance(invocation, dict) or invocation.get(TRAINED, "unrecorded") is not None


def _measured_anything(invocation: dict[str, Any]) -> bool:
    return not isinstance(invocation, dict) or bool(invocation.get(MEASURED, 1))


def training_precisions(invocations: list[dict[str, Any]]) -> set[str]:
    """The precisions of the invocations that trained (or may have: see above), where their records say."""
    return {p for inv in invocations if _trained_anything(inv) and (p := invocation_precision(inv)) is not None}


def run_precision(invocations: list[dict[str, Any]], lent: list[dict[str, Any]] | None = None) -> str | None:
    """The precision of a finished run's numbers: `invocations` are the folder's own (the last one, which wrote the
    summary, evaluated), `lent` those of the run that trained it where it reused another run's training
    (`experiments.training_reuse`). One name when every invocation that trained or measured ran in one precision;
    `mixed: trained in …, evaluated in …` when they did not (a run resumed on a machine that resolves `train.bf16:
    null` the other way); None when no record says. (With the run driver's earlier invocations alone, the precision
    of the work so far.)"""
    trained = training_precisions(list(lent) if lent else invocations)
    evaluated = {p for inv in invocations[:-1] if _measured_anything(inv) and (p := invocation_precision(inv))}
    if invocations and (last := invocation_precision(invocations[-1])) is not None:
        evaluated.add(last)
    if not trained and not evaluated:
        return None
    if len(trained | evaluated) == 1:
        return next(iter(trained | evaluated))
    return (f"mixed: trained in {' + '.join(sorted(trained)) or 'unrecorded'}, "
            f"evaluated in {' + '.join(sorted(evaluated)) or 'unrecorded'}")
