# Two commands: `make demo` runs the main job, `make test` runs the test suite (`make test-fast`: unit tests only).
# Both create .venv and install everything they need. torch is installed first, pinned (TORCH_SPEC), so the
# project's `torch>=2.2` pulls nothing more. Which build pip picks is pip's index's: the CPU wheel where pip finds one
# (these machines' wheel folder, or PIP_INDEX_URL=https://download.pytorch.org/whl/cpu); plain PyPI on Linux has CUDA.
PYTHON ?= python3
VENV   ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-numerics install bench findings findings-paper-setup findings-quick findings-page clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/conceptlab sweep run hidden-emergence-tiny
	$(VENV)/bin/conceptlab report runs/hidden-emergence-tiny

# the whole suite (budget 15 min on 2 cores; its measured times per CPU are in docs/benchmarks.md); --durations
# lists the slowest tests, to keep it in that budget
test: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --maxschedchunk 1 --durations=25

# the fast lane: unit tests only (tests/unit), no training runs beyond a few steps
test-fast: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist load tests/unit

# the unit tests again under two other CPUs' kernels (scripts/test_numerics.sh: OpenBLAS, MKL and oneDNN forced to
# their SSE and their AVX2 kernels), so a test that passes only with this CPU's rounding fails here, not on the next
# machine; 6 min on 2 idle cores (TESTS="tests/unit tests/integration" for both)
test-numerics: $(STAMP)
	PY=$(PY) scripts/test_numerics.sh $(TESTS)

# every fast-variant finding beside its controls (experiments/findings.yaml): runs the suite's report seeds (resumable,
# runs reused only when config and code versions match, runs recorded in results/runs not run again), writes
# findings/findings.md and findings/report.html and records every finished run in results/runs; hours on 2 cores.
# `make findings-paper-setup`: Park's findings under the paper's training setup (17 runs of 1–1.5 h each on one bf16
# core, more in fp32; `conceptlab findings --setup paper --dry-run` prints the recorded times).
# `make findings-quick`: CI-size presets, one seed each (~15 min), into findings/quick
findings: $(STAMP)
	$(VENV)/bin/conceptlab findings --setup fast --record results

findings-paper-setup: $(STAMP)
	$(VENV)/bin/conceptlab findings --setup paper --record results

# docs/findings.md is generated, never edited by hand: every finding evaluated from the run records in results/runs
# (kept by `--record results`, gathered over sessions and machines; no weights), and the README's findings table
# (between its markers) from the same evaluation; runs nothing, seconds
findings-page: $(STAMP)
	$(VENV)/bin/conceptlab findings --evaluate-only --root results --markdown docs/findings.md --readme README.md --no-progress

findings-quick: $(STAMP)
	$(VENV)/bin/conceptlab findings --quick

# each bench times ours against the authors' regime in the same process (docs/benchmarks.md); minutes to an hour on a CPU
bench: $(STAMP)
	$(PY) bench/train_step.py
	$(PY) bench/sampling.py
	$(PY) bench/eval_checkpoint.py --sample-steps 5
	$(PY) bench/predict_run_time.py

clean:
	rm -rf $(VENV) runs .pytest_cache
