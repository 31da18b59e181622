#!/usr/bin/env bash
# The one prepared GPU check (issue 23, item 4), for a session whose task is lent a device machine (NVIDIA H200 here):
# the paper-scale presets for a few hundred steps on the GPU through the project's own code path, with the absolute
# time of every phase from each run's timings.jsonl. CI never runs it; nothing here is a test.
#
#   bench/device_check.sh prepare      # here, once: wheels of what the device image lacks, into .whl/ (ignored)
#   bench/device_check.sh run          # there: device tool `run`, carry [".whl"], timeout_s ≈ 480
#                                      # (each paper preset is stopped after $DEVICE_CHECK_LIMIT s, default 190;
#                                      # presets named in $DEVICE_CHECK_PROFILE run under cProfile, its top in the log;
#                                      # $DEVICE_CHECK_PRESETS names the presets to run instead, without the micro run;
#                                      # pass DEVICE_CHECK_COMMIT=<this checkout's commit> to have it printed)
#   bench/device_check.sh run --quick  # anywhere, CPU or GPU: the micro presets, to check the script itself
#
# The device image has torch (2.11, CUDA 13), numpy, pandas, pyarrow, matplotlib, h5py, rich, typer, tensorboard and
# safetensors (/work/.library/device/KINDS.md), not pydantic, duckdb, ripser, persim or submitit: `prepare` downloads
# those for CPython 3.12 / manylinux, `run` installs them under /tmp/site. What it writes goes to $OUT (the device
# tool brings it back): gpu.txt, one <preset>.log and <preset>-timings.jsonl per preset, summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=(pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 duckdb==2.0.1
        ripser==0.6.15 persim==0.4.1 deprecated==1.3.1 submitit==1.5.4 typer==0.29.2)

prepare() {
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    mkdir -p .whl
    for spec in "${WHEELS[@]}"; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$spec" \
            || { echo "device_check: no wheel for $spec" >&2; return 1; }
    done
    du -sh .whl
}

run() {
    local quick=${1:-}
    OUT=${OUT:-/tmp/device-check}
    mkdir -p "$OUT"
    if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import pydantic, duckdb" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl || exit 1
        export PYTHONPATH=/tmp/site
    fi
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 CONCEPTLAB_CACHE=/tmp/conceptlab-cache
    { nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null || echo "no GPU"
      python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
      # the device copy's .git can predate the working tree sent with it: a hash of src/ says which code ran
      echo "commit $(git rev-parse --short HEAD 2>/dev/null) (the copy's .git); src sha1 $(find src -name '*.py' \
          | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -c1-12)${DEVICE_CHECK_COMMIT:+; sent from $DEVICE_CHECK_COMMIT}"
      date -u; } | tee "$OUT/gpu.txt"
    local steps=300 presets limit=${DEVICE_CHECK_LIMIT:-190}
    if [ "$quick" = "--quick" ]; then
        steps=4
        presets=(micro bumps-micro)
    elif [ -n "${DEVICE_CHECK_PRESETS:-}" ]; then  # a rerun of named presets alone (no micro run first)
        read -ra presets <<< "$DEVICE_CHECK_PRESETS"
    else
        # the micro preset first (seconds): a failure of the GPU path shows there before the long runs
        timeout 60 python3 -m conceptlab run micro train.steps=30 train.checkpoint_schedule=list \
            "train.checkpoint_steps=[10,20,30]" --runs-dir /tmp/device-runs --no-progress \
            > "$OUT/micro.log" 2>&1
        echo "micro (30 steps): exit $?" | tee -a "$OUT/summary.txt"
        presets=(hidden-emergence-paper factorize-torus-paper)
    fi
    # a few hundred steps, checkpoints at a third, two thirds and the end, every checkpoint evaluated as the preset
    # says (the evaluation is the preset's own: interventions at every checkpoint, geometry and controls at the last)
    for preset in "${presets[@]}"; do
        local a=$((steps / 3)) b=$((2 * steps / 3))
        # stopped with SIGINT at the limit: the run records its phases so far (timings.jsonl), a profile is written
        local prof=()
        [[ " ${DEVICE_CHECK_PROFILE:-} " == *" $preset "* ]] && prof=(-m cProfile -o "/tmp/$preset.prof")
        timeout -s INT -k 20 "$limit" python3 "${prof[@]}" -m conceptlab run "$preset" "train.steps=$steps" \
            train.checkpoint_schedule=list "train.checkpoint_steps=[$a,$b,$steps]" --runs-dir /tmp/device-runs \
            --no-progress > "$OUT/$preset.log" 2>&1
        echo "$preset: exit $?${prof:+ (under cProfile: its times are inflated)}" | tee -a "$OUT/summary.txt"
        [ -f "/tmp/$preset.prof" ] && python3 - "/tmp/$preset.prof" >> "$OUT/$preset.log" <<'EOF'
import pstats, sys
stats = pstats.Stats(sys.argv[1])
print("\n== profile: conceptlab functions by cumulative time")
stats.sort_stats("cumulative").print_stats("conceptlab", 45)
print("\n== profile: all functions by own time")
stats.sort_stats("tottime").print_stats(25)
EOF
        local folder
        folder=$(ls -td /tmp/device-runs/*-"$preset" 2>/dev/null | head -1)
        [ -n "$folder" ] && cp "$folder/timings.jsonl" "$OUT/$preset-timings.jsonl" 2>/dev/null
        [ -n "$folder" ] && python3 - "$folder" "$steps" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
from pathlib import Path
folder, steps = Path(sys.argv[1]), int(sys.argv[2])
summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
seconds = summary.get("seconds", {})
print(f"  device {summary.get('device')} bf16 {summary.get('bf16')} parameters {summary.get('parameters')}")
print("  seconds: " + ", ".join(f"{k} {v}" for k, v in seconds.items()))
log = folder / "train_log.jsonl"
rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []
per_step = sorted(r["seconds"] for r in rows if "seconds" in r and r.get("step", 0) > steps // 10)
if per_step:
    mid = per_step[len(per_step) // 2]
    print(f"  training step: median {mid:.4f} s (min {per_step[0]:.4f}, max {per_step[-1]:.4f}) over "
          f"{len(per_step)} logged steps after the first tenth; whole phase {seconds.get('train')} s")
EOF
    done
}

case "${1:-}" in
    prepare) prepare ;;
    run) shift; run "${1:-}" ;;
    *) echo "usage: bench/device_check.sh prepare | run [--quick]" >&2; exit 2 ;;
esac
