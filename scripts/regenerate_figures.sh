#!/usr/bin/env bash
# Regenerate the "after" figures of docs/figures/after/ (docs/figures/README.md): the five figures issue 27 redrew,
# from runs made here on CPU.
#
#   scripts/regenerate_figures.sh [RUNS_ROOT]      (default runs/figures-after; reruns reuse finished runs)
#
# 1. hidden-emergence-tiny over seeds 0, 1, 2 (a sweep, 2 workers × 1 thread; ≈ 12 min on 2 cores): seed 0's
#    concept space, accuracy and trajectory figures, and the three seeds' scores (emergence-report's figure);
# 2. abstractions-micro (seconds): the abstractions figure's layout, names and legend (a micro run learns little).
# Each figure is copied as PNG and PDF. Set CONCEPTLAB=path/to/conceptlab to use another install.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${1:-runs/figures-after}"
OUT=docs/figures/after
CL="${CONCEPTLAB:-.venv/bin/conceptlab}"
PY="$(dirname "$CL")/python"
export OMP_NUM_THREADS=1
export CONCEPTLAB_VECTOR_FIGURES=pdf  # the docs take each figure's PDF too, whatever the caller's setting
mkdir -p "$ROOT" "$OUT"

spec="$ROOT/hidden-emergence-3-seeds.yaml"
cat >"$spec" <<'YAML'
name: hidden-emergence-3-seeds
description: "hidden-emergence-tiny over seeds 0-2: the runs behind docs/figures/after"
base: hidden-emergence-tiny
axes:
  seeds: [0, 1, 2]
executor:
  kind: local
  workers: 2
  threads: 1
YAML
sweep="$ROOT/hidden-emergence-3-seeds"
"$CL" sweep run "$spec" --root "$sweep" --no-progress
"$PY" - "$sweep" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
from conceptlab.experiments.emergence_report import emergence_report
from conceptlab.report.html import write_sweep_report
emergence_report(sys.argv[1])
write_sweep_report(sys.argv[1])
PY
seed0="$("$PY" - "$sweep" <<'PY'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
manifest = json.loads((root / "manifest.json").read_text())
print(next(root / r["run_id"] for r in manifest["runs"] if r["values"]["train.train_seed"] == 0))
PY
)"
abstractions="$ROOT/abstractions-micro"
if [ ! -f "$abstractions/summary.json" ]; then
    rm -rf "$abstractions"
    "$PY" - "$abstractions" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
run_experiment(load_config("abstractions-micro"), sys.argv[1], progress=False)
PY
fi

copy() {  # copy SRC.png (+ .pdf) to $OUT/NAME.png (+ .pdf)
    cp "$1.png" "$OUT/$2.png"
    cp "$1.pdf" "$OUT/$2.pdf"
}
copy "$seed0/figures/concept_space" hidden_emergence_tiny_concept_space
copy "$seed0/figures/accuracy" hidden_emergence_tiny_accuracy
copy "$seed0/figures/trajectory_11" hidden_emergence_tiny_trajectory
copy "$seed0/figures/intervention_scores" hidden_emergence_tiny_scores
copy "$sweep/emergence_seeds" hidden_emergence_tiny_3_seeds
copy "$abstractions/figures/abstractions" abstractions_micro
echo "figures in $OUT; runs in $ROOT (report: $sweep/report.html)"
