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
      provenance.json          the folder's format, and per invocation: code version (package, git commit),
                               analysis versions, torch, CPU/GPU, precision, host, and what it did (steps
                               trained, checkpoints measured)
      training.json            written when training is done: the final step (and what retention pruned)
      timings.jsonl            seconds of every invocation (a resumed run has several; a killed one keeps its training
                               seconds up to its last checkpoint)
      figures/*.png, *.pdf     each figure as PNG and as vector (PDF; `CONCEPTLAB_VECTOR_FIGURES`: SVG, or none)
      tensorboard/             TensorBoard event files (`train.tensorboard`, on by default)
      report.html              the self-contained report of the run (`report.html.write_run_report`)
      status.json, run.log     kept by the sweep executors
      .lock                    held (OS advisory lock) by the process working on the run

Which measurements and tables exist is the study's business (`studies`); their file names follow the two patterns
above, so the store (`store.index`) finds every run-level table without knowing the studies.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
from collections.abc import Iterator
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no run-folder locks
    fcntl = None  # type: ignore[assignment]

from conceptlab.store.files import read_json
from conceptlab.train.checkpoints import list_checkpoints, training_state_step

SUMMARY = "summary.json"
CONFIG = "config.yaml"
STATUS = "status.json"
# folders inside a run folder that hold no run (the store does not descend into them)
INNER_FOLDERS = frozenset({"checkpoints", "figures", "eval", "interventions", "composition", "geometry", "abstractions",
                           "tensorboard"})
FORMAT = 2  # 1: folders written before provenance.json (no content hashes in checkpoint sidecars); `runs migrate`
_HELD: dict[str, list] = {}  # locks this process holds: path → [open file, depth] (re-entrant)


class RunLockedError(RuntimeError):
    """Another live process is working on this run folder."""


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

    @property
    def provenance(self) -> Path:
        return self.root / "provenance.json"

    @property
    def training(self) -> Path:
        return self.root / "training.json"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold this folder's exclusive lock for the block: an OS advisory lock (flock) on `.lock`, released by the
        kernel when the process dies however it dies, so a crashed or killed run resumes without cleanup. Another
        process asking gets RunLockedError naming the holder (PID, host); re-entrant within a process.

        On a filesystem without working flock (some NFS mounts) `flock` either fails (ENOLCK/EOPNOTSUPP: a
        RunLockedError saying so) or silently locks nothing; there, do not run two processes on one folder."""
        key = str(self.root.resolve())
        if key in _HELD:
            _HELD[key][1] += 1
            try:
                yield
            finally:
                _HELD[key][1] -= 1
            return
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_file, "a+")
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.seek(0)
                    holder = handle.read().strip() or "another process"
                    raise RunLockedError(f"run folder {self.root} is in use by {holder}; wait for it, or stop it") from None
                except OSError as err:
                    raise RunLockedError(f"run folder {self.root}: this filesystem refuses file locks ({err}); "
                                         "run one process per folder") from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"PID {os.getpid()} on host {socket.gethostname()}\n")
            handle.flush()
            _HELD[key] = [handle, 1]
            try:
                yield
            finally:
                del _HELD[key]
        finally:
            handle.close()  # closing releases the flock

    def holder(self) -> str | None:
        """Who holds this folder's lock ("PID p on host h"), or None when nobody does (checked without waiting)."""
        if fcntl is None or not self.lock_file.is_file() or str(self.root.resolve()) in _HELD:
            return None
        with open(self.lock_file, "a+") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.seek(0)
                return handle.read().strip() or "another process"
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return None

    def read_status(self) -> dict:
        """status.json (kept by the sweep executors), or {} when it is missing, not JSON or not a JSON object."""
        try:
            status = read_json(self.status) if self.status.is_file() else {}
        except (ValueError, RecursionError, OSError):
            return {}
        return status if isinstance(status, dict) else {}

    def state(self) -> tuple[str, str | None]:
        """(state, last error line) as `sweep status`, a sweep's report and the store's `runs` table show it: done
        (summary written), failed, running, queued, interrupted (`status_state`: a status "done" without a summary,
        or "running" or "queued" by a process of this host that is gone), pending (never started, or no readable
        status), and `SUMMARY_UNREADABLE`: a summary.json that does not read (a torn write), its error naming the
        file and how to write it again."""
        unreadable = self.summary_unreadable()
        if unreadable is not None:
            return SUMMARY_UNREADABLE, unreadable
        if self.is_complete():
            return "done", None
        status = self.read_status()
        return self.live_state(status, "pending"), status.get("error")

    def live_state(self, status: dict, missing: str) -> str:
        """`status_state`, but a run whose lock a process holds now is running whatever its status says (a
        `conceptlab resume` writes none, and its folder may hold a stopped sweep's "queued"), and a run a stopped
        sweep queued and nothing ever started (no training state, no checkpoint) is pending, not interrupted."""
        state = status_state(status, missing)
        if state != "interrupted":
            return state
        try:
            if self.holder():
                return "running"
        except OSError:  # a lock file this reader cannot open (a read-only copy): no process of ours holds it
            pass
        if status.get("state") == "queued" and not self.train_state.is_file() and not self.list_checkpoints():
            return "pending"
        return state

    def summary_unreadable(self) -> str | None:
        """None unless summary.json is there and does not read as a JSON object (a torn write): then the line that
        says so and how to write it again (`conceptlab resume` writes the summary of a finished run anew)."""
        if not self.is_complete():
            return None
        try:
            summary = self.read_summary()
        except (ValueError, OSError) as err:
            why = str(err)
        else:
            if isinstance(summary, dict):
                return None
            why = f"{self.summary} is not a JSON object"
        return f"{why}; `conceptlab resume {shlex.quote(str(self.root))}` writes it again"

    def format_version(self) -> int:
        """The folder's layout version: `FORMAT` for folders with a provenance record, 1 before."""
        if not self.provenance.is_file():
            return 1
        return int(read_json(self.provenance).get("format", 1))

    def trained_step(self) -> int:
        """How far training got: the training state's step, or (when retention removed the state) the final step
        `training.json` records; 0 if neither exists."""
        if self.train_state.is_file():
            return training_state_step(self.train_state)
        if self.training.is_file():
            return int(read_json(self.training)["step"])
        return 0

    def disk_bytes(self) -> int:
        """Bytes of every file in the folder."""
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    def is_complete(self) -> bool:
        """A run is complete once its summary.json is written (the run driver writes it last)."""
        return self.summary.is_file()

    def read_summary(self) -> dict:
        """The run's summary; FileNotFoundError when it has none, ValueError (naming the file) when it is not JSON."""
        if not self.root.is_dir():
            raise FileNotFoundError(f"{self.root}: no such run folder" if not self.root.exists()
                                    else f"{self.root} is not a folder (a run folder holds its config and summary)")
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

    def pruned_steps(self) -> set[int]:
        """The checkpoints retention deleted once the run was evaluated (`training.json`'s `pruned`; none before)."""
        return set(read_json(self.training).get("pruned", [])) if self.training.is_file() else set()

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

    def step_tensors(self, directory: str, step: int, piece: str | None = None) -> Path:
        """The tensors a measurement kept at one checkpoint: `directory/step_XXXXXXX.safetensors`, or with `piece`
        `directory/step_XXXXXXX/<piece>.safetensors` (folders written before this layout named them
        `cloud_step_XXXXXXX.safetensors`; those are read where no new one exists)."""
        path = self.step_file(directory, step, piece, suffix=".safetensors")
        if piece is not None:
            return path
        legacy = self.root / directory / f"cloud_{step_name(step)}.safetensors"
        return legacy if not path.is_file() and legacy.is_file() else path

    def measured_steps(self) -> set[int]:
        """The checkpoints some measurement has a file for (any `<folder>/step_XXXXXXX…` outside checkpoints/)."""
        return set(self.measurement_times())

    def measurement_times(self) -> dict[int, float]:
        """Each measured checkpoint's step → when its newest measurement file was written (its mtime)."""
        times: dict[int, float] = {}
        for folder in self.root.iterdir() if self.root.is_dir() else []:
            if not folder.is_dir() or folder.name in ("checkpoints", "figures"):
                continue
            for path in folder.iterdir():
                match = re.match(r"^step_(\d+)", path.name)
                if match:
                    step = int(match.group(1))
                    times[step] = max(times.get(step, 0.0), path.stat().st_mtime)
        return times

    def table(self, name: str) -> Path:
        """A run-level table `<name>.parquet`."""
        return self.root / f"{name}.parquet"

    def file(self, name: str) -> Path:
        """Any other run-level file by name (e.g. `homology.json`, `samples.safetensors`)."""
        return self.root / name

    def figure(self, name: str) -> Path:
        return self.figures / name


SUMMARY_UNREADABLE = "done (summary unreadable)"  # the state of a run whose summary.json is there but not JSON


def status_state(status: dict, missing: str) -> str:
    """The state a run folder's status.json says, for a run without a summary (`missing`: the state of one without
    status): "done" is interrupted (the summary is what finishes a run), and "running" (a local worker) or "queued"
    (by a local sweep) by a process of this host, not a SLURM job, that is gone is interrupted (a killed worker, a
    sweep stopped by Ctrl-C)."""
    state = str(status.get("state", missing))
    if state == "done":
        return "interrupted"
    if state in ("running", "queued") and status.get("host") == socket.gethostname() and not status.get("slurm_job"):
        if not _pid_alive(status.get("pid")):
            return "interrupted"
    return state


def _pid_alive(pid) -> bool:
    """Whether a process with this id lives on this host (a missing or garbled id: no)."""
    try:
        pid = int(pid or 0)
    except (TypeError, ValueError, OverflowError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True
