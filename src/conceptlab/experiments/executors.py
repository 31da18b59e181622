"""Executors: run a sweep's run folders, locally in a process pool or on SLURM through submitit job arrays.

One small interface (`Executor.run(tasks) -> outcomes`); every task is one run folder that
already holds its `config.yaml`, and runs `execute_run`, which calls the run driver
(`run_experiment`: it resumes from whatever the folder holds) and keeps a status file (written and read by
`sweep_state`, which `sweep status` reads without importing this module):

    <run_dir>/status.json   {"state": "queued" | "running" | "done" | "failed", "error": last error line,
                             "host", "pid", "slurm_job", "attempt", "started", "finished"}
    <run_dir>/run.log       the run driver's console output

A run interrupted in any way (a killed pool worker, a cancelled or requeued SLURM task)
resumes from its last training state and evaluated checkpoints when it runs again.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import re
import traceback
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal, Protocol

import submitit
from pydantic import Field, ValidationError, field_validator
from rich.console import Console
from rich.progress import Progress

from conceptlab.config_base import StrictConfig
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import ConfigError, parse_override
from conceptlab.experiments.progress import progress_bar
from conceptlab.messages import one_line, shown
from conceptlab.experiments.sweep_state import STATES, read_status, write_status
from conceptlab.store.files import append_text
from conceptlab.store.run_folder import RunFolder, RunLockedError
from conceptlab.studies import study_for

BUSY = "busy"  # an outcome only: another live process holds the run folder's lock
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SlurmOptions(StrictConfig):
    """Options of the `slurm` executor (submitit job arrays)."""

    partition: str | None = None
    time_min: int = Field(60, ge=1, description="wall-time limit per task; on timeout the task is requeued")
    gpus_per_task: int = Field(0, ge=0)
    cpus_per_task: int = Field(1, ge=1)
    mem_gb: float = Field(2.0, gt=0)
    array_parallelism: int = Field(64, ge=1, description="tasks of the array running at once")
    max_requeue: int = Field(3, ge=0, description="requeues after timeout / preemption")
    signal_delay_s: int = Field(60, ge=1, description="seconds between the warning signal and the kill")
    account: str | None = None
    qos: str | None = None
    setup: list[str] = Field(default_factory=list, description="shell lines run before each task")

    @field_validator("partition", "account", "qos")
    @classmethod
    def _slurm_name(cls, value: str | None) -> str | None:
        """A SLURM name (or a comma-separated list of them, for partitions): it goes into the job script's
        `#SBATCH` lines, so anything but letters, digits and `_.+-` could add options or lines of its own."""
        if value is not None and not _SLURM_NAME.match(value):
            raise ValueError(f"must be letters, digits, '_', '.', '+' or '-' (comma-separated for several), "
                             f"got {shown(value)}")
        return value

    @field_validator("setup")
    @classmethod
    def _one_line_each(cls, lines: list[str]) -> list[str]:
        """Each setup entry is one shell line of the job script: a newline or other control character in it would
        start lines (or `#SBATCH` options) of its own."""
        for i, line in enumerate(lines):
            if _CONTROL.search(line):
                raise ValueError(f"setup[{i}] has a control character (one line each, no newline): {shown(line)}")
        return lines


def with_slurm_options(options: "ExecutorOptions", settings: list[str]) -> "ExecutorOptions":
    """`options` with `key=value` settings (e.g. `partition=gpu`, `time_min=240`) applied to its slurm options;
    an unknown key or bad value raises `ConfigError` in one line."""
    values = options.slurm.model_dump()
    for text in settings:
        path, value = parse_override(text)
        if len(path) != 1 or path[0] not in SlurmOptions.model_fields:
            allowed = ", ".join(SlurmOptions.model_fields)
            raise ConfigError(f"unknown slurm option {shown('.'.join(path))}; allowed: {allowed}")
        values[path[0]] = value
    try:
        slurm = SlurmOptions.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        shows_value = "input" in first and first["type"] != "value_error" and not isinstance(first["input"], dict)
        detail = f"{shown(first['input'])} ({msg})" if shows_value else msg
        raise ConfigError(one_line(f"bad slurm option {'.'.join(map(str, first['loc']))}: {detail}")) from None
    return options.model_copy(update={"slurm": slurm})


class ExecutorOptions(StrictConfig):
    """Which executor runs the sweep and how."""

    kind: Literal["local", "slurm"] = "local"
    workers: int | None = Field(None, ge=1, description="local: worker processes (default: CPU cores)")
    threads: int | None = Field(None, ge=1, description="torch threads per run (default: cores // workers)")
    slurm: SlurmOptions = Field(default_factory=SlurmOptions)


class ExecutorError(RuntimeError):
    """An executor cannot run at all (e.g. SLURM not reachable); one line for the user."""


@dataclass
class RunTask:
    """One run to execute: its id, folder and resolved config."""

    run_id: str
    run_dir: Path
    config: RunConfig
    donors: tuple[Path, ...] = ()  # run folders whose training this run may reuse (experiments.training_reuse)


@dataclass
class RunOutcome:
    """How one run ended in this execution."""

    run_id: str
    state: str
    error: str | None = None


OnOutcome = Callable[["RunOutcome"], None]


class Executor(Protocol):
    """Runs tasks (each resumable from its folder) and reports one outcome per task — returned at the end and, with
    `on_outcome`, passed to it as soon as it is known (so a caller can keep a finished run before the others end)."""

    name: str

    def run(self, tasks: list[RunTask], progress: bool = True, console: Console | None = None,
            on_outcome: OnOutcome | None = None) -> list[RunOutcome]: ...


def _last_line(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__


def execute_run(run_dir: Path | str, threads: int | None = None, donors: list[str] | None = None) -> RunOutcome:
    """Run (or resume) the run in `run_dir` from its config.yaml, keeping status.json up to date. `donors`: run
    folders whose training a fresh run reuses when one of them has trained it (`training_reuse.reuse_training`,
    checked here, when the run starts: a donor of the same sweep may have finished meanwhile)."""
    import torch

    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import run_experiment
    from conceptlab.experiments.training_reuse import reuse_training

    run_dir = Path(run_dir)
    folder = RunFolder(run_dir)
    if threads:
        torch.set_num_threads(threads)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(folder.lock())
        except RunLockedError as err:  # another sweep (or a resume) is running it: leave its status alone
            return RunOutcome(run_dir.name, BUSY, str(err))
        if folder.is_complete():  # another process finished it between the queueing and the lock: nothing to do
            return RunOutcome(run_dir.name, "done")
        old = read_status(run_dir)
        write_status(
            run_dir,
            "running",
            host=socket.gethostname(),
            pid=os.getpid(),
            slurm_job=_slurm_job_id(),
            attempt=int(old.get("attempt", 0)) + 1,
            started=time.strftime("%Y-%m-%dT%H:%M:%S"),
            finished=None,
            error=None,
        )
        try:
            cfg = load_config(str(folder.config))
            with append_text(folder.run_log) as log:
                console = Console(file=log, width=120, force_terminal=False)
                reused = reuse_training(cfg, run_dir, [Path(d) for d in donors]) if donors else None
                if reused is not None:
                    console.print(f"training reused from {reused['folder']} (the same training config and code); "
                                  "evaluating its checkpoints", highlight=False, soft_wrap=True)
                run_experiment(cfg, run_dir, progress=False, console=console)
        except Exception as err:  # recorded, not raised: one failed run must not stop the sweep
            with contextlib.suppress(OSError), append_text(folder.run_log) as log:
                log.write(traceback.format_exc())
            write_status(run_dir, "failed", error=_last_line(err), finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
            return RunOutcome(run_dir.name, "failed", _last_line(err))
        write_status(run_dir, "done", finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
        return RunOutcome(run_dir.name, "done")


def _slurm_job_id() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID")


# ---------------------------------------------------------------- local


def _pool_context() -> multiprocessing.context.BaseContext:
    """Workers fork from a fork server that has imported the run driver once (and never run torch ops),
    so each new pool starts in well under a second instead of re-importing torch per worker."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["conceptlab.experiments.runner", "conceptlab.experiments.executors"])
    return context


@contextlib.contextmanager
def _workers_stop_with_us(pool: cf.ProcessPoolExecutor) -> Iterator[None]:
    """If this process is told to stop while the pool runs (SIGTERM, Ctrl-C, any error), terminate the pool's
    workers before the pool's own exit waits for them: a worker mid-run would otherwise train on, orphaned, for
    hours, holding its run folder's lock (every run resumes from its last state on disk when run again). SIGTERM
    becomes an exception only while the block runs, and only where signals can be handled (the main thread)."""
    previous = None

    def terminated(signum, frame):  # exit as a process killed by the signal would (status 143), no traceback
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    except BaseException:
        if hasattr(pool, "terminate_workers"):  # Python ≥ 3.14
            pool.terminate_workers()
        else:  # earlier: the pool's own table of worker processes
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                with contextlib.suppress(Exception):
                    process.terminate()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class LocalExecutor:
    """A process pool on this machine (default size: the CPU cores).

    If a worker dies, the pool stops its other workers too: the runs in flight are recorded as failed
    (a rerun resumes them) and the runs not yet started continue in a fresh pool.
    """

    name = "local"

    def __init__(self, workers: int | None = None, threads: int | None = None):
        cores = os.cpu_count() or 1
        self.workers = workers or cores
        self.threads = threads or max(1, cores // self.workers)

    def run(self, tasks: list[RunTask], progress: bool = True, console: Console | None = None,
            on_outcome: OnOutcome | None = None) -> list[RunOutcome]:
        console = console or Console()
        if not tasks:
            return []
        self._prepare_shared(tasks, progress)
        outcomes: dict[str, RunOutcome] = {}
        todo = list(tasks)
        with progress_bar(console, progress) as bar:
            job = bar.add_task("sweep (local)", total=len(tasks), info="")
            while todo:
                todo = self._one_pool(todo, outcomes, bar, job, on_outcome)
        return [outcomes[t.run_id] for t in tasks]

    def _one_pool(self, todo: list[RunTask], outcomes: dict[str, RunOutcome], bar: Progress, job,
                  on_outcome: OnOutcome | None = None) -> list[RunTask]:
        """Run tasks in a fresh pool; if a worker dies, return the tasks that never started (to run again)."""
        for task in todo:
            if RunFolder(task.run_dir).holder() is None:  # a run another process is running keeps its status
                # queued by this process: once it is gone (Ctrl-C, a kill) the run reads as interrupted, not queued
                write_status(task.run_dir, "queued", error=None, host=socket.gethostname(), pid=os.getpid(),
                             slurm_job=None)
        context = _pool_context()
        workers = min(self.workers, len(todo))
        broken = False
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool, _workers_stop_with_us(pool):
            futures = {pool.submit(execute_run, str(t.run_dir), self.threads, [str(d) for d in t.donors]): t
                       for t in todo}
            for future in cf.as_completed(futures):
                task = futures[future]
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    broken = True
                    continue
                except Exception as err:  # pickling or pool errors: recorded against the run
                    outcome = RunOutcome(task.run_id, "failed", _last_line(err))
                    write_status(task.run_dir, "failed", error=outcome.error)
                outcomes[task.run_id] = outcome
                if on_outcome is not None:
                    on_outcome(outcome)
                self._tick(bar, job, outcomes)
        if not broken:
            return []
        retry = []
        for task in todo:
            if task.run_id in outcomes:
                continue
            state = read_status(task.run_dir).get("state")
            if state == "queued":  # never started: run it in a fresh pool
                retry.append(task)
                continue
            error = "worker process died mid-run (killed?); rerun the sweep to resume it"
            write_status(task.run_dir, "failed", error=error)
            outcomes[task.run_id] = RunOutcome(task.run_id, "failed", error)
            self._tick(bar, job, outcomes)
        if len(retry) == len(todo):  # the pool broke before any run started: do not loop forever
            for task in retry:
                error = "the worker pool broke before this run started"
                write_status(task.run_dir, "failed", error=error)
                outcomes[task.run_id] = RunOutcome(task.run_id, "failed", error)
            return []
        return retry

    @staticmethod
    def _tick(bar: Progress, job, outcomes: dict[str, RunOutcome]) -> None:
        failed = sum(o.state == "failed" for o in outcomes.values())
        bar.update(job, completed=len(outcomes), info=f"{len(outcomes) - failed} done, {failed} failed")

    @staticmethod
    def _prepare_shared(tasks: list[RunTask], progress: bool) -> None:
        """Let each run's study build its shared cached resources once (e.g. the concept probe of `shapes` runs),
        before the workers start and all load them; runs with the same resources are prepared once."""
        seen = set()
        for task in tasks:
            cfg = task.config
            key = (cfg.data.model_dump_json(), cfg.eval.model_dump_json())
            if key not in seen:
                seen.add(key)
                study_for(cfg.data.kind).prepare_shared(cfg, progress)


# ---------------------------------------------------------------- SLURM


class _SlurmTask(submitit.helpers.Checkpointable):
    """The submitit callable: runs one folder; on timeout / pre-emption it is requeued and resumes from disk."""

    def __call__(self, run_dir: str, threads: int | None, donors: list[str] | None = None) -> RunOutcome:
        def terminated(signum, frame) -> None:  # requeue / pre-emption / scancel: stop now, state is on disk
            write_status(Path(run_dir), "queued", error="terminated by SLURM (requeue, pre-emption or cancel)")
            os._exit(128 + signum)

        signal.signal(signal.SIGTERM, terminated)
        return execute_run(run_dir, threads, donors)

    def checkpoint(self, run_dir: str, threads: int | None,
                   donors: list[str] | None = None) -> submitit.helpers.DelayedSubmission:
        write_status(Path(run_dir), "queued", error="requeued (timeout or pre-emption); resumes from its last state")
        return submitit.helpers.DelayedSubmission(_SlurmTask(), run_dir, threads, donors)


def slurm_reachable() -> tuple[bool, str]:
    """(True, "") when `sinfo` answers; else (False, why)."""
    for tool in ("sbatch", "sinfo", "squeue", "srun"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` not found on PATH"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return False, "sinfo did not answer within 15 s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, f"sinfo failed: {lines[-1] if lines else proc.returncode}"
    if not proc.stdout.strip():
        return False, "sinfo lists no nodes"
    return True, ""


class SlurmExecutor:
    """One submitit job array per sweep (array parallelism, time, partition, GPUs from the spec)."""

    name = "slurm"

    def __init__(self, folder: Path, options=None, wait: bool = True, poll_s: float = 2.0):
        self.options = options or SlurmOptions()
        self.folder = Path(folder)
        self.wait = wait
        self.poll_s = poll_s
        ok, why = slurm_reachable()
        if not ok:
            raise ExecutorError(f"slurm executor: SLURM is not reachable ({why})")

    def submit(self, tasks: list[RunTask]) -> list[submitit.Job]:
        o = self.options
        executor = submitit.SlurmExecutor(folder=self.folder / "%j", max_num_timeout=o.max_requeue)
        params = dict(
            job_name="conceptlab",
            time=o.time_min,
            cpus_per_task=o.cpus_per_task,
            mem=f"{max(1, round(o.mem_gb * 1024))}MB",
            array_parallelism=o.array_parallelism,
            signal_delay_s=o.signal_delay_s,
            setup=list(o.setup),
        )
        params.update({k: v for k, v in (("partition", o.partition), ("account", o.account), ("qos", o.qos)) if v})
        if o.gpus_per_task:
            params["gpus_per_task"] = o.gpus_per_task
        executor.update_parameters(**params)
        for task in tasks:  # no local process's host and pid left from an earlier attempt: SLURM's run now
            write_status(task.run_dir, "queued", error=None, host=None, pid=None, slurm_job=None)
        threads = [o.cpus_per_task] * len(tasks)
        jobs = executor.map_array(_SlurmTask(), [str(t.run_dir) for t in tasks], threads,
                                  [[str(d) for d in t.donors] for t in tasks])
        for task, job in zip(tasks, jobs):  # the job id, beside whatever state a task that started already wrote
            state = read_status(task.run_dir).get("state")
            write_status(task.run_dir, state if state in STATES else "queued", slurm_job=str(job.job_id))
        return jobs

    @property
    def workers(self) -> int:
        """Tasks of the array running at once (as a pool's workers: how many start together)."""
        return self.options.array_parallelism

    def run(self, tasks: list[RunTask], progress: bool = True, console: Console | None = None,
            on_outcome: OnOutcome | None = None) -> list[RunOutcome]:
        console = console or Console()
        if not tasks:
            return []
        try:
            jobs = self.submit(tasks)
        except (OSError, ValueError, RuntimeError, subprocess.SubprocessError) as err:
            raise ExecutorError(f"slurm executor: submission failed: {_last_line(err)}") from None
        console.print(f"submitted {len(jobs)} SLURM task(s) as job array {str(jobs[0].job_id).split('_')[0]}")
        if not self.wait:
            return [RunOutcome(t.run_id, "queued") for t in tasks]
        return self.wait_for(tasks, jobs, progress, console, on_outcome)

    def wait_for(self, tasks: list[RunTask], jobs: list, progress: bool, console: Console,
                 on_outcome: OnOutcome | None = None) -> list[RunOutcome]:
        """Poll status files and squeue until every task is done, failed, or gone from the queue."""
        outcomes: dict[str, RunOutcome] = {}
        absent: dict[str, int] = {}  # consecutive polls a task was missing from squeue (requeues pass through)
        with progress_bar(console, progress) as bar:
            job_bar = bar.add_task("sweep (slurm)", total=len(tasks), info="")
            while len(outcomes) < len(tasks):
                queued = squeue_ids([str(j.job_id).split("_")[0] for j in jobs])
                for task, job in zip(tasks, jobs):
                    if task.run_id in outcomes:
                        continue
                    job_id = str(job.job_id)
                    absent[job_id] = absent.get(job_id, 0) + 1 if queued is not None and job_id not in queued else 0
                    outcome = self._finished(task, job_id, queued if absent[job_id] >= 3 else None)
                    if outcome is not None:
                        outcomes[task.run_id] = outcome
                        if on_outcome is not None:
                            on_outcome(outcome)
                failed = sum(o.state == "failed" for o in outcomes.values())
                bar.update(job_bar, completed=len(outcomes), info=f"{len(outcomes) - failed} done, {failed} failed")
                if len(outcomes) < len(tasks):
                    time.sleep(self.poll_s)
        return [outcomes[t.run_id] for t in tasks]

    @staticmethod
    def _finished(task: RunTask, job_id: str, queued: set[str] | None) -> RunOutcome | None:
        status = read_status(task.run_dir)
        if status.get("state") == "done" and RunFolder(task.run_dir).is_complete():
            return RunOutcome(task.run_id, "done")
        if status.get("state") == "failed":
            return RunOutcome(task.run_id, "failed", status.get("error"))
        if queued is None or job_id in queued:
            return None
        status = read_status(task.run_dir)  # it left the queue: read once more (it may have just finished)
        if RunFolder(task.run_dir).is_complete():
            return RunOutcome(task.run_id, "done")
        if status.get("state") == "failed":
            return RunOutcome(task.run_id, "failed", status.get("error"))
        error = f"SLURM task {job_id} ended without finishing (cancelled or killed); rerun the sweep to resume it"
        write_status(task.run_dir, "failed", error=error)
        return RunOutcome(task.run_id, "failed", error)


def squeue_ids(array_ids: list[str]) -> set[str] | None:
    """Ids (`ARRAY_TASK` form) of these arrays' tasks still pending or running; None if squeue fails."""
    ids = sorted(set(array_ids))
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i", "-j", ",".join(ids)], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return set()
        return None
    return {line.strip() for line in proc.stdout.splitlines() if line.strip()}


def make_executor(kind: str, sweep_root: Path, options=None, workers: int | None = None, wait: bool = True) -> Executor:
    """The executor named `kind` configured from the spec's executor options (and CLI overrides)."""
    options = options or ExecutorOptions()
    if kind == "local":
        return LocalExecutor(workers or options.workers, options.threads)
    if kind == "slurm":
        return SlurmExecutor(Path(sweep_root) / ".submitit", options.slurm, wait=wait)
    raise ExecutorError(f"unknown executor {kind!r}; choose local or slurm")
