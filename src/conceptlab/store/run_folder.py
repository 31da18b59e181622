"""The run folder: the one definition of where a run's files live (everything else asks this class for paths).

    runs/0003-concept-space-tiny/          (a sweep's runs are named by run id instead)
      config.yaml              resolved config
      data.json                the data-generating process's summary (e.g. the concept signals)
      train_log.jsonl          one JSON line per logged step
      train_state.safetensors  resumable state (model, EMA, optimizer, RNG)
      checkpoints/step_XXXXXXX.safetensors + .json    weights + sidecar (step, config hash, metrics)
      <measurement>/step_XXXXXXX.parquet   per-checkpoint rows of each measurement of the run's study, e.g.
                                          eval/ (concept space), interventions/, composition/, geometry/;
                                          or <directory>/step_XXXXXXX/<piece>.parquet|json (abstractions/)
      <table>.parquet          run-level tables, all checkpoints, `run` column first (concept_space, emergence, ...)
      *_samples.safetensors    a few generations per checkpoint, for the figures
      summary.json             written last: a run with a summary is complete
      timings.jsonl            seconds of every invocation (a resumed run has several)
      figures/*.png
      status.json, run.log     kept by the sweep executors

Which measurements and tables exist is the study's business (`studies`); their file names follow the two patterns
above, so the store (`store.index`) finds every run-level table without knowing the studies.
"""

from __future__ import annotations

import re
from pathlib import Path

from conceptlab.store.files import read_json
from conceptlab.train.checkpoints import list_checkpoints

SUMMARY = "summary.json"
CONFIG = "config.yaml"
STATUS = "status.json"
# folders inside a run folder that hold no run (the store does not descend into them)
INNER_FOLDERS = frozenset({"checkpoints", "figures", "eval", "interventions", "composition", "geometry", "abstractions"})


def step_name(step: int) -> str:
    return f"step_{int(step):07d}"


class RunFolder:
    """Paths inside one run folder (see the module docstring for the layout)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.config = self.root / CONFIG
        self.data = self.root / "data.json"
        self.train_log = self.root / "train_log.jsonl"
        self.train_state = self.root / "train_state.safetensors"
        self.checkpoints = self.root / "checkpoints"
        self.summary = self.root / SUMMARY
        self.figures = self.root / "figures"
        self.timings = self.root / "timings.jsonl"
        self.status = self.root / STATUS
        self.run_log = self.root / "run.log"

    @property
    def name(self) -> str:
        return self.root.name

    def is_complete(self) -> bool:
        """A run is complete once its summary.json is written (the run driver writes it last)."""
        return self.summary.is_file()

    def read_summary(self) -> dict:
        """The run's summary; FileNotFoundError when it has none, ValueError (naming the file) when it is not JSON."""
        if not self.summary.is_file():
            raise FileNotFoundError(f"{self.root} has no {SUMMARY} (run unfinished? resume it with conceptlab resume)")
        try:
            return read_json(self.summary)
        except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, or nested past the parser
            raise ValueError(f"{self.summary} is not valid JSON ({type(err).__name__}: {str(err)[:200]})") from None

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """(step, path) of every complete checkpoint (weights and sidecar written), by step; file names are
        `train.checkpoints`'."""
        return list_checkpoints(self.checkpoints)

    # -- measurements and tables ------------------------------------------------------------------------------------
    def step_file(self, directory: str, step: int, piece: str | None = None, suffix: str = ".parquet") -> Path:
        """A measurement's file for one checkpoint: `directory/step_XXXXXXX<suffix>`, or with `piece`
        `directory/step_XXXXXXX/<piece><suffix>` (several measurements sharing one folder per checkpoint)."""
        if piece is None:
            return self.root / directory / f"{step_name(step)}{suffix}"
        return self.root / directory / step_name(step) / f"{piece}{suffix}"

    def step_files(self, directory: str, piece: str | None = None, suffix: str = ".parquet") -> list[tuple[int, Path]]:
        """(step, path) of every checkpoint's file of one measurement, by step."""
        pattern = f"step_*{suffix}" if piece is None else f"step_*/{piece}{suffix}"
        out = []
        for path in (self.root / directory).glob(pattern):
            name = path.name if piece is None else path.parent.name
            match = re.match(r"^step_(\d+)", name)
            if match:
                out.append((int(match.group(1)), path))
        return sorted(out)

    def step_tensors(self, directory: str, step: int) -> Path:
        """The tensors a measurement kept at one checkpoint: `directory/step_XXXXXXX.safetensors` (folders written
        before this layout named them `cloud_step_XXXXXXX.safetensors`; those are read where no new one exists)."""
        path = self.step_file(directory, step, suffix=".safetensors")
        legacy = self.root / directory / f"cloud_{step_name(step)}.safetensors"
        return legacy if not path.is_file() and legacy.is_file() else path

    def table(self, name: str) -> Path:
        """A run-level table `<name>.parquet`."""
        return self.root / f"{name}.parquet"

    def file(self, name: str) -> Path:
        """Any other run-level file by name (e.g. `homology.json`, `samples.safetensors`)."""
        return self.root / name

    def figure(self, name: str) -> Path:
        return self.figures / name
