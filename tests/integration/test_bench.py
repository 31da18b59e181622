"""The benchmarks in bench/ run in their smallest mode and print their ratio lines; none divides by a constant.

Only that they run and report: no timing is asserted (the machine may be busy)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
RATIO = re.compile(r"^ratio .+ \(reference/ours\): \d+\.\d\dx median/median, range \d+\.\d\d-\d+\.\d\dx \(min/max-based\)$",
                   re.M)
SPREAD = re.compile(r"min \d+\.\d+ / median \d+\.\d+ / max \d+\.\d+ s")


def run_bench(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(BENCH / script), "--threads", "1", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(
    "script, args",
    [
        ("train_step.py", ("--quick", "--preset", "micro", "--batch", "2", "--reps", "1")),
        ("sampling.py", ("--quick", "--preset", "micro", "--reps", "1")),
        ("eval_checkpoint.py", ("--quick", "--reps", "1")),
        ("chord_tests.py", ("--quick",)),
    ],
)
def test_a_bench_prints_both_sides_and_the_ratio(script, args):
    out = run_bench(script, *args)
    assert out.startswith("cpu: "), out  # the machine, then torch, threads, date and commit
    assert "torch " in out and " UTC, commit " in out, out
    ours = [line for line in out.splitlines() if line.startswith("ours ")]
    reference = [line for line in out.splitlines() if line.startswith("reference ")]
    assert len(ours) == 1 and SPREAD.search(ours[0]), out
    assert len(reference) == 1 and SPREAD.search(reference[0]), out
    assert len(RATIO.findall(out)) == 1, out


def test_the_training_bench_reports_flops_and_the_peak_of_this_run():
    out = run_bench("train_step.py", "--quick", "--preset", "micro", "--batch", "2", "--reps", "1",
                    "--levers", "channels_last", "fused_attention", "--profile", "1")
    assert re.search(r"train step \d+\.\d GFLOP", out), out
    # the bf16 peak is measured only where bf16 is native (emulated it is slow and no run uses it)
    assert re.search(r"dense peak bf16 .*: \d+ / \d+ GFLOP/s|dense peak bf16: not measured \(this CPU has no native", out), out
    assert re.search(r"of the (bf16|fp32) peak", out), out
    # a lever is one more interleaved side with its own ratio to the same reference
    assert re.search(r"^lever channels_last: first call \d+\.\d s", out, re.M), out
    assert re.search(r"^ours\+channels_last s/step: " + SPREAD.pattern, out, re.M), out
    assert re.search(r"^ours\+fused_attention s/step: " + SPREAD.pattern, out, re.M), out
    assert len(RATIO.findall(out)) == 3 and "ratio training step, channels_last (reference/ours)" in out, out
    assert "ratio training step, fused_attention (reference/ours)" in out, out
    # --profile: where our step's time goes, and the convolution kernels' own throughput against the peak
    assert re.search(r"^profile of 1 of our steps: \d+\.\d+ s of operator self time a step", out, re.M), out
    assert re.search(r"^  aten::\S+ +\d+\.\d%", out, re.M), out
    assert re.search(r"^convolutions: \d+\.\d+ s a step \(\d+% of it\), \d+\.\d GFLOP: \d+ GFLOP/s inside", out, re.M), out


def test_the_sampling_bench_times_each_lever_as_a_further_side():
    out = run_bench("sampling.py", "--quick", "--preset", "micro", "--reps", "1", "--levers", "channels_last",
                    "fused_attention")
    for lever in ("channels_last", "fused_attention"):
        assert re.search(rf"^lever {lever}: first sampling \d+\.\d s", out, re.M), out
        assert re.search(rf"^ours\+{lever} s/sampling: " + SPREAD.pattern, out, re.M), out
        assert f"ratio sampling, {lever} (reference/ours)" in out, out
    assert len(RATIO.findall(out)) == 3, out


def test_the_evaluation_bench_times_the_levers_and_a_pass_size_as_further_sides():
    out = run_bench("eval_checkpoint.py", "--quick", "--reps", "1", "--channels-last", "--fused-attention",
                    "--max-batch", "4")
    for lever in ("channels_last", "fused_attention"):
        assert re.search(rf"^ours\+{lever} s/checkpoint: " + SPREAD.pattern, out, re.M), out
        assert f"ratio checkpoint evaluation, {lever} (reference/ours)" in out, out
    assert re.search(r"^ours max_batch 4 s/checkpoint: " + SPREAD.pattern, out, re.M), out
    assert "third side: ours in passes of 4 images" in out, out
    assert len(RATIO.findall(out)) == 4, out


def test_the_run_time_prediction_prints_every_term():
    out = run_bench("predict_run_time.py", "--quick", "--presets", "micro", "bumps-micro")
    for preset in ("micro", "bumps-micro"):
        block = out.split(f"== {preset}:")[1].split("\n== ")[0]
        for term in ("data:", "training:", "checkpoints:", "evaluation ", "predicted wall time:"):
            assert term in block, (preset, term, out)
        # both keep an EMA (train.ema_decay): the step and the checkpoint terms time it, as iter_training runs it
        assert "with the EMA update)" in block and "(weights + EMA + training state)" in block, (preset, out)


def test_no_bench_divides_by_a_constant_measured_elsewhere():
    patterns = [
        re.compile(r"\bREFERENCE_S"),  # REFERENCE_S_PER_STEP and its kin
        re.compile(r"^\s*\w*_S_PER_STEP\s*[:=][^\n]*\d", re.M | re.I),  # any seconds-per-step set to a number
        re.compile(r"^\s*\w*(?:REFERENCE|AUTHORS)\w*\s*[:=]\s*[\d.]+", re.M | re.I),  # a reference set to a number
    ]
    offenders = {p.name: [m.group(0).strip() for pattern in patterns for m in pattern.finditer(p.read_text())]
                 for p in BENCH.glob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}, offenders


def test_the_constant_check_would_catch_the_old_bench():
    old = "REFERENCE_S_PER_STEP = 2.7  # authors' code\nAUTHORS_SECONDS = 1.35\nref_s_per_step: float = 2.7\n"
    assert re.search(r"\bREFERENCE_S", old)
    assert re.search(r"^\s*\w*_S_PER_STEP\s*[:=][^\n]*\d", old, re.M | re.I)
    assert re.search(r"^\s*\w*(?:REFERENCE|AUTHORS)\w*\s*[:=]\s*[\d.]+", old, re.M | re.I)


def test_launches_reports_each_ratio_over_fresh_processes(tmp_path):
    # a stand-in bench whose ratio differs per process (its pid): the wrapper must read each launch's line and
    # report min / median / max over the launches, and keep each launch's output
    fake = tmp_path / "fake_bench.py"
    fake.write_text(
        "import os\n"
        "k = len(os.listdir(os.environ['COUNT_DIR']))\n"
        "open(os.path.join(os.environ['COUNT_DIR'], str(k)), 'w').close()\n"
        "r = [1.8, 2.0, 1.9][k]\n"
        "print(f'ratio train step (reference/ours): {r:.2f}x median/median, range 1.70-2.10x (min/max-based)')\n"
        "print('ratio sampling (reference/ours): 3.10x median/median, range 3.00-3.20x (min/max-based)')\n")
    count = tmp_path / "count"
    count.mkdir()
    env = {**os.environ, "COUNT_DIR": str(count)}
    command = [sys.executable, str(BENCH / "launches.py"), "--launches", "3", "--keep", str(tmp_path / "kept"), "--",
               str(fake)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("cpu: ") and "3 launches, one after another" in out, out
    assert "ratio train step over 3 launches: min 1.80x / median 1.90x / max 2.00x [1.80, 2.00, 1.90]" in out, out
    assert "ratio sampling over 3 launches: min 3.10x / median 3.10x / max 3.10x" in out, out
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["launch-1.txt", "launch-2.txt", "launch-3.txt"]


def test_launches_refuses_one_launch_a_missing_bench_and_a_bench_without_ratios(tmp_path):
    def launches(*args):
        return subprocess.run([sys.executable, str(BENCH / "launches.py"), *args], cwd=REPO, capture_output=True,
                              text=True, timeout=120)

    one = launches("--launches", "1", "--", "bench/train_step.py")
    assert one.returncode != 0 and "--launches must be ≥ 2" in one.stderr
    missing = launches("--launches", "2", "--", "bench/no_such_bench.py")
    assert missing.returncode != 0 and "name a bench script" in missing.stderr
    silent = tmp_path / "silent.py"
    silent.write_text("print('no ratio here')\n")
    quiet = launches("--launches", "2", "--", str(silent))
    assert quiet.returncode == 1 and "printed no ratio line" in quiet.stderr
    failing = tmp_path / "failing.py"
    failing.write_text("raise SystemExit('broken bench')\n")
    broken = launches("--launches", "2", "--", str(failing))
    assert broken.returncode == 1 and "launch 1 failed" in broken.stderr and "broken bench" in broken.stderr


def test_the_startup_bench_times_fresh_processes_against_another_commits_source():
    out = run_bench("startup.py", "--quick")
    assert "import: python -c import conceptlab.experiments.config" in out, out
    assert re.search(r"^  ours +" + SPREAD.pattern, out, re.M) and "ratio" not in out, out  # no reference: no claim
    out = run_bench("startup.py", "--against", "HEAD", "--reps", "1", "--commands", "help", "sweep-status")
    assert "reference: src/ at HEAD" in out and re.search(r"^  reference +" + SPREAD.pattern, out, re.M), out
    assert "sweep-status: python -m conceptlab.cli sweep status /" in out, out  # the records as a scratch sweep
    assert len(RATIO.findall(out.replace("\n  ratio", "\nratio"))) == 2, out
    listed = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert "startup-" not in listed, listed  # its worktree removed


@pytest.mark.parametrize("sides", ["vector", "none"])
def test_the_figures_bench_prints_both_sides_and_the_ratio_in_process(sides, monkeypatch, capsys, probe_cache):
    """bench/figures.py in this process (its one micro run and two summaries, ≈ 8 s; a fresh process would add ≈ 5 s
    of imports), with the test suite's figure settings and the thread count given back afterwards."""
    import runpy

    import torch

    monkeypatch.setattr(sys, "argv", ["figures.py", "--quick", "--reps", "1", "--threads", "1", "--sides", sides])
    monkeypatch.syspath_prepend(str(BENCH))
    before = {k: os.environ.get(k) for k in ("CONCEPTLAB_VECTOR_FIGURES", "CONCEPTLAB_FIGURES")}
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(BENCH / "figures.py"), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert {k: os.environ.get(k) for k in before} == before
    assert out.startswith("cpu: ") and " UTC, commit " in out, out
    assert "preset micro: 6 figures a summary" in out, out  # the run itself draws them, whatever the sides
    assert ("ours: no figures" in out) == (sides == "none"), out
    for side in ("reference", "ours"):
        assert re.search(rf"^{side} +s/summary: " + SPREAD.pattern, out, re.M), out
    assert len(RATIO.findall(out)) == 1, out
