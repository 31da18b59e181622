"""Nothing lost, nothing silently wrong: every kind of damage to a finished run, followed by every reading command;
kill -9 during training and during evaluation, then resume, byte-identical and nothing lost; two processes on one
run folder; a stale run after an analysis-version bump; `runs migrate` of an old-format folder.

The contract checked for each (damage, command): the command either gives exactly the undamaged run's results, or
refuses with one line naming the damaged file — never a traceback, never different numbers with exit 0. The store's
commands leave a damaged table out with a warning naming it and answer for the rest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.store.files import read_tensors
from conceptlab.store.run_folder import SUMMARY_UNREADABLE

runner = CliRunner()
MICRO = ["eval.interventions.samples=2", "eval.interventions.over_prompting.scales=[0.5]",
         "eval.interventions.linear=null", "eval.interventions.patching=null"]
RESULT_KEYS = ("learning_time", "mean_accuracy", "final_accuracy", "final_valid_fraction", "final_step", "checkpoints",
               "emergence")


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("integrity")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished micro run with interventions, and a second run of another config (a foreign checkpoint's source)."""
    import os as _os

    _os.environ.setdefault("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    root = tmp_path_factory.mktemp("finished")
    run_experiment(load_config("micro", MICRO), root / "run", progress=False)
    run_experiment(load_config("micro", ["data.color_separation=0.7"]), root / "other", progress=False)
    return root


def _results(summary: dict) -> dict:
    return {k: summary.get(k) for k in RESULT_KEYS}


def _flip(path: Path, offset: int = -9) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _last_ckpt(run: Path) -> Path:
    return sorted((run / "checkpoints").glob("step_*.safetensors"))[-1]


DAMAGE = {
    "checkpoint: a flipped byte in the tensor data": lambda r, o: _flip(_last_ckpt(r)),
    "checkpoint: truncated": lambda r, o: _truncate(_last_ckpt(r)),
    "checkpoint: sidecar deleted": lambda r, o: _last_ckpt(r).with_suffix(".json").unlink(),
    "checkpoint: sidecar torn": lambda r, o: _truncate(_last_ckpt(r).with_suffix(".json")),
    "checkpoint: weights of the middle one deleted": lambda r, o: sorted((r / "checkpoints").glob("*.safetensors"))[0].unlink(),
    "checkpoint: copied in from another run": lambda r, o: [
        shutil.copy(_last_ckpt(o), _last_ckpt(r)), shutil.copy(_last_ckpt(o).with_suffix(".json"),
                                                                _last_ckpt(r).with_suffix(".json"))],
    "checkpoint: a flipped byte, its evaluation lost (re-evaluation needed)": lambda r, o: [
        _flip(_last_ckpt(r)), sorted((r / "eval").glob("*.parquet"))[-1].unlink()],
    "checkpoint: copied in from another run, its evaluation lost (re-evaluation needed)": lambda r, o: [
        shutil.copy(_last_ckpt(o), _last_ckpt(r)), shutil.copy(_last_ckpt(o).with_suffix(".json"),
                                                                _last_ckpt(r).with_suffix(".json")),
        sorted((r / "eval").glob("*.parquet"))[-1].unlink()],
    "training state: a flipped byte": lambda r, o: _flip(r / "train_state.safetensors"),
    "training state: truncated": lambda r, o: _truncate(r / "train_state.safetensors"),
    "train log: torn last line": lambda r, o: (r / "train_log.jsonl").write_text(
        (r / "train_log.jsonl").read_text() + '{"step": 99, "lo'),
    "timings: torn last line": lambda r, o: (r / "timings.jsonl").write_text(
        (r / "timings.jsonl").read_text() + '{"finished": "20'),
    "summary: not JSON": lambda r, o: (r / "summary.json").write_text("{not json"),
    "run table concept_space.parquet: truncated": lambda r, o: _truncate(r / "concept_space.parquet"),
    "run table interventions.parquet: garbage": lambda r, o: (r / "interventions.parquet").write_bytes(b"garbage"),
    "per-checkpoint eval file: truncated": lambda r, o: _truncate(sorted((r / "eval").glob("*.parquet"))[-1]),
    "per-checkpoint interventions file: garbage": lambda r, o: sorted((r / "interventions").glob("*.parquet"))[-1]
    .write_bytes(b"PAR1 garbage"),
    "samples file: truncated": lambda r, o: _truncate(r / "samples.safetensors"),
    "provenance: not JSON": lambda r, o: (r / "provenance.json").write_text("[1, 2"),
    "data.json deleted": lambda r, o: (r / "data.json").unlink(),
    "config.yaml: not YAML": lambda r, o: (r / "config.yaml").write_text("data: [unclosed"),
}
# the file each damage is about (relative to the run folder): a refusal or a warning must name it in full; a damaged
# checkpoint is its weights and its sidecar, either named
FILES = {
    "training state": "train_state.safetensors", "train log": "train_log.jsonl", "timings": "timings.jsonl",
    "summary": "summary.json", "run table concept_space": "concept_space.parquet",
    "run table interventions": "interventions.parquet", "samples": "samples.safetensors",
    "provenance": "provenance.json", "data.json": "data.json", "config.yaml": "config.yaml",
}
# `runs ls` columns read from a run folder's file: where the store leaves that file out (with a warning), the run's
# cells there are left out ("—"; the status, from a summary that does not read, "done (summary unreadable)", as
# `sweep status` says), and only there
FROM_FILE = {"summary.json": lambda column: column == "status" or column.startswith("learning_time_"),
             "config.yaml": lambda column: column == "name" or "." in column}
PER_RUN_ROWS = "select run_id, count(*) as n from concept_space group by run_id order by run_id"


def _damaged(damage: str, run: Path) -> set[str]:
    """The files of `run` (relative paths) that `damage` is about, found before it is done."""
    if damage.startswith("checkpoint"):
        weights = sorted((run / "checkpoints").glob("step_*.safetensors"))[0 if "middle one" in damage else -1]
        return {f"checkpoints/{weights.name}", f"checkpoints/{weights.with_suffix('.json').name}"}
    for folder in ("eval", "interventions"):
        if damage.startswith(f"per-checkpoint {folder}"):
            return {f"{folder}/{sorted((run / folder).glob('*.parquet'))[-1].name}"}
    return {next(v for k, v in FILES.items() if damage.startswith(k))}


def _names(message: str, files: set[str], run: Path) -> bool:
    """Whether `message` names one of the damaged `files` of `run`: by its path, or — a checkpoint file gone — by
    the checkpoints folder and the checkpoint's step in a list ("…/run/checkpoints: checkpoints of step(s) [20] are
    missing or incomplete")."""
    if any(f in message for f in files):
        return True
    folder = f"{run}/checkpoints"
    after = message.split(folder, 1)[1] if folder in message else ""
    steps = {int(m.group(1)) for f in files if (m := re.fullmatch(r"checkpoints/step_(\d+)\.\w+", f))}
    return any(re.search(rf"\[[\d, ]*\b{step}\b[\d, ]*\]", after) for step in steps)


def _invoke(args: list[str]):
    result = runner.invoke(app, args, terminal_width=400)
    text = result.output + (str(result.exception) if result.exception and not isinstance(result.exception,
                                                                                          SystemExit) else "")
    # the answer alone: warnings go to stderr, but click < 8.2 mixes stderr into stdout
    answer = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("warning:"))
    return result.exit_code, text, result.exception, answer


def _ls_table(stdout: str) -> tuple[dict[str, dict[str, str]], str]:
    """`runs ls`'s table as run_id → {column: cell}, and its last line ("N runs under ROOT")."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    header = re.split(r"\s{2,}", lines[0])
    rows = [re.split(r"\s{2,}", line) for line in lines[1:-1]]
    assert all(len(row) == len(header) for row in rows), stdout
    return {row[0]: dict(zip(header, row)) for row in rows}, lines[-1]


def _check_store_answer(label: str, stdout: str, expected: str, left_out: set[str]) -> str:
    """`runs ls` / `runs query` after the damage, exit 0: the undamaged answer, or — where the store left a damaged
    file of the run out (`left_out`, named in its warnings) — that answer less exactly that file's part."""
    if label == "runs query":  # rows per run of concept_space: the damaged run's row goes with its table, no other
        lines = expected.splitlines()
        want = [line for line in lines if not ("concept_space.parquet" in left_out and line.startswith("run,"))]
        assert stdout.splitlines() == want, (stdout, expected, left_out)
        return "same answer" if want == lines else "answered without the damaged table"
    rows, count = _ls_table(stdout)
    truth, truth_count = _ls_table(expected)
    assert set(rows) == set(truth) == {"run", "other"} and count == truth_count, (stdout, expected)
    if "config.yaml" not in left_out:  # the columns shown: the config keys that differ between runs, and the rest
        assert list(rows["run"]) == list(truth["run"]), (stdout, expected)
    shared = [c for c in rows["run"] if c in truth["run"]]
    assert {c: rows["other"][c] for c in shared} == {c: truth["other"][c] for c in shared}, (stdout, expected)
    gone = [c for c in shared if any(FROM_FILE[f](c) for f in left_out if f in FROM_FILE)]
    assert {c: rows["run"][c] for c in shared if c not in gone} == {c: truth["run"][c] for c in shared if c not in gone}
    for c in gone:
        assert rows["run"][c] == (SUMMARY_UNREADABLE if c == "status" else "—"), (c, stdout)
    if not left_out:
        assert stdout == expected
    return "same answer" if stdout == expected else "answered without the damaged file"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_then_every_reading_command_never_gives_silent_wrong_results(finished, tmp_path, damage):
    root = tmp_path / "root"
    run = root / "run"
    shutil.copytree(finished / "run", run)
    shutil.copytree(finished / "other", root / "other")  # an undamaged run beside it: the store answers for it
    original = json.loads((run / "summary.json").read_text())
    truth = _results(original)
    store_commands = {"runs ls": ["runs", "ls", "--root", str(root)],
                      "runs query": ["runs", "query", PER_RUN_ROWS, "--root", str(root), "--csv"]}
    expected = {}
    for label, command in store_commands.items():  # the undamaged answers, checked against the run folders' files
        code, text, exc, stdout = _invoke(command)
        assert code == 0 and "warning:" not in text, (label, text)
        expected[label] = stdout
    rows = {rid: len(pd.read_parquet(root / rid / "concept_space.parquet")) for rid in ("other", "run")}
    assert expected["runs query"].splitlines() == ["run_id,n", *(f"{rid},{n}" for rid, n in rows.items())], expected
    listed, count = _ls_table(expected["runs ls"])
    assert set(listed) == {"run", "other"} and count == f"2 runs under {root}", expected["runs ls"]
    for rid, row in listed.items():
        times = json.loads((root / rid / "summary.json").read_text())["learning_time"]
        assert row["status"] == "done" and {c: v for c, v in row.items() if c.startswith("learning_time_")} == {
            f"learning_time_{k.replace('/', '_')}": "—" if v is None else f"{float(v):.4g}" for k, v in times.items()}
    named = _damaged(damage, run)
    DAMAGE[damage](run, finished / "other")
    outcomes = {}
    commands = (("runs show", ["runs", "show", str(run), "--json"]), *store_commands.items(),
                ("resume", ["resume", str(run), "--no-progress", "--threads", "1"]))  # last: it may repair what it can
    for label, command in commands:
        code, text, exc, stdout = _invoke(command)
        assert exc is None or isinstance(exc, SystemExit), f"{damage} / {label}: traceback {exc!r}"
        assert "Traceback" not in text, (damage, label, text)
        warnings = [line for line in text.splitlines() if line.startswith("warning:")]
        # a warning is about the damaged file, by its full path
        assert all(any(str(run / f) in w for f in named) for w in warnings), (damage, label, warnings)
        if code == 0 and label == "runs show":  # the command's own answer: the undamaged summary, all of it
            assert json.dumps(json.loads(stdout), sort_keys=True) == json.dumps(original, sort_keys=True), \
                f"{damage} / {label}: exit 0 with a different summary"
            outcomes[label] = "same results"
        elif code == 0 and label == "resume":  # what it leaves: the undamaged results
            summary = json.loads((run / "summary.json").read_text())
            assert _results(summary) == truth, f"{damage} / {label}: exit 0 with different results"
            outcomes[label] = "same results"
        elif code == 0:
            left_out = {f for f in named if any(str(run / f) in w for w in warnings)}
            outcomes[label] = _check_store_answer(label, stdout, expected[label], left_out)
        else:
            errors = [line for line in text.strip().splitlines() if line.startswith("error:")]
            assert code in (1, 2) and len(errors) == 1, (damage, label, text)
            assert _names(errors[0], named, run), f"{damage} / {label}: none of {named} named: {text}"
            outcomes[label] = "refused, naming the file"
    # a damaged checkpoint that has to be evaluated again is refused, never evaluated as this run's
    if "re-evaluation needed" in damage:
        assert outcomes["resume"] == "refused, naming the file", outcomes


def test_kill_9_during_training_and_during_evaluation_then_resume_is_byte_identical_and_loses_nothing(tmp_path):
    args = ["micro", *MICRO, "train.steps=60", "train.checkpoint_steps=[20,40,60]", "eval.samples_per_class=4"]
    reference = tmp_path / "reference"
    run_experiment(load_config(args[0], args[1:]), reference, progress=False)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    kill_points = {"training, after the first checkpoint": "timings.jsonl",  # written just after the checkpoint
                   "evaluation, after the first checkpoint's measurements": "interventions/step_0000020.parquet",
                   "evaluation, after the last checkpoint's concept space": "eval/step_0000060.parquet"}
    for point, marker in kill_points.items():
        run = tmp_path / f"killed-in-{point.split(',')[0]}-{marker.split('/')[0].split('.')[0]}"
        config = tmp_path / f"{run.name}.yaml"
        config.write_text(yaml.safe_dump({"extends": "micro", **_nested(args[1:])}))
        code = ("import sys; from conceptlab.experiments.loading import load_config; "
                "from conceptlab.experiments.runner import run_experiment; "
                f"run_experiment(load_config({str(config)!r}), {str(run)!r}, progress=False)")
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        while not (run / marker).exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before the kill point ({point})"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (run / "summary.json").exists()
        kept = {p.relative_to(run) for p in run.rglob("step_*") if p.is_file()}
        summary = run_experiment(load_config(str(config)), run, progress=False)  # resume
        assert kept <= {p.relative_to(run) for p in run.rglob("step_*") if p.is_file()}, f"lost files ({point})"
        _assert_same_run(reference, run, point)
        # nor the killed invocation's training time: it was recorded at its checkpoints
        assert summary["invocations"] == 2, point
        assert summary["seconds_all_invocations"]["train"] > summary["seconds"]["train"], (point, summary)
        killed = json.loads((run / "timings.jsonl").read_text().splitlines()[0])
        assert killed.get("interrupted") is True and killed["seconds"]["train"] > 0, (point, killed)


def _nested(overrides: list[str]) -> dict:
    from conceptlab.experiments.loading import apply_overrides

    return apply_overrides({}, overrides)


def _assert_same_run(a: Path, b: Path, where: str) -> None:
    for table in ("concept_space", "learning_times", "interventions", "emergence"):
        x, y = pd.read_parquet(a / f"{table}.parquet"), pd.read_parquet(b / f"{table}.parquet")
        pd.testing.assert_frame_equal(x.drop(columns="run", errors="ignore"), y.drop(columns="run", errors="ignore"),
                                      obj=f"{table} ({where})")
    for ckpt in sorted((a / "checkpoints").glob("*.safetensors")):
        x, y = read_tensors(ckpt), read_tensors(b / "checkpoints" / ckpt.name)
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), f"{ckpt.name} ({where})"
    samples = read_tensors(b / "samples.safetensors")
    assert sorted(samples) == ["step_0000020", "step_0000040", "step_0000060"], where
    sa, sb = json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text())
    assert _results(sa) == _results(sb), where


def test_two_processes_on_one_run_folder_the_second_gets_one_line_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump({"extends": "micro", "train": {"steps": 4000, "checkpoint_steps": [4000]}}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = ("from conceptlab.experiments.loading import load_config; "
            "from conceptlab.experiments.runner import run_experiment; "
            f"run_experiment(load_config({str(config)!r}), {str(run)!r}, progress=False)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (run / "train_log.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        result = runner.invoke(app, ["resume", str(run), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert f"is in use by PID {proc.pid} on host" in result.output and "Traceback" not in result.output
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the holder died: the kernel released its lock, so the folder is free again without any cleanup
    from conceptlab.store.run_folder import RunFolder

    assert RunFolder(run).holder() is None
    with RunFolder(run).lock():
        pass


def test_a_sweep_started_twice_runs_each_run_once(tmp_path):
    from conceptlab.experiments.executors import LocalExecutor
    from conceptlab.experiments.sweep import expand, run_sweep

    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"base": "micro", "overrides": {"train.steps": 200, "train.checkpoint_steps": [100, 200]},
                                    "axes": {"seeds": [0, 1]}}))
    sweep = expand(str(spec), root=tmp_path / "sweep")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = ("from conceptlab.experiments.sweep import expand, run_sweep; "
            "from conceptlab.experiments.executors import LocalExecutor; "
            f"run_sweep(expand({str(spec)!r}, root={str(tmp_path / 'sweep')!r}), LocalExecutor(2, 1), progress=False)")
    first = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not all((r.directory(sweep.root) / "train_log.jsonl").exists() for r in sweep.runs) \
                and time.time() < deadline:
            time.sleep(0.05)
        second = run_sweep(sweep, LocalExecutor(2, 1), progress=False)
        assert len(second["busy"]) == 2 and second["done"] == 0 and not second["failed"], second
    finally:
        first.wait(timeout=300)
    for r in sweep.runs:  # every logged step once: nobody trained a run twice
        steps = [json.loads(line)["step"] for line in (r.directory(sweep.root) / "train_log.jsonl").read_text().splitlines()]
        assert len(steps) == len(set(steps)) and (r.directory(sweep.root) / "summary.json").is_file()


def test_an_analysis_version_bump_gives_new_run_ids_and_refuses_to_continue_an_old_folder(tmp_path, monkeypatch):
    from conceptlab.experiments.sweep import run_id
    from conceptlab.studies import study_for

    cfg = load_config("micro", ["train.steps=10", "train.checkpoint_steps=[10]"])
    before = run_id(cfg)
    run_experiment(cfg, tmp_path / "run", progress=False)
    study = study_for("shapes")
    monkeypatch.setattr(type(study), "version", study.version + 1)
    assert run_id(cfg) != before  # a sweep would run it anew, not reuse the old folder
    result = runner.invoke(app, ["resume", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2 and "was made by analysis versions" in result.output, result.output
    assert "start a new run" in result.output and len(result.output.strip().splitlines()) <= 2


def test_runs_migrate_upgrades_a_folder_of_the_old_format(finished, tmp_path):
    run = tmp_path / "old"
    shutil.copytree(finished / "run", run)
    (run / "provenance.json").unlink()  # what a folder written before 2026-12-01 looks like
    (run / "training.json").unlink()
    for sidecar in (run / "checkpoints").glob("*.json"):
        meta = json.loads(sidecar.read_text())
        meta.pop("sha256")
        sidecar.write_text(json.dumps(meta))
    result = runner.invoke(app, ["resume", str(run), "--no-progress"])
    assert result.exit_code == 2 and "runs migrate" in result.output, result.output
    result = runner.invoke(app, ["runs", "migrate", str(tmp_path)])
    assert result.exit_code == 0 and "format 1 → 2" in result.output and "hashed step_0000020" in result.output
    meta = json.loads((run / "checkpoints" / "step_0000020.json").read_text())
    assert "sha256" in meta
    assert json.loads((run / "provenance.json").read_text())["versions"] is None
    again = runner.invoke(app, ["runs", "migrate", str(tmp_path)])
    assert "already current" in again.output
    assert runner.invoke(app, ["runs", "show", str(run)]).exit_code == 0
    result = runner.invoke(app, ["resume", str(run), "--no-progress"])  # its code version is unknown: not continued
    assert result.exit_code == 2 and "unknown version" in result.output, result.output
