"""docs/extending.md is executed: its file blocks are the plug-in's files, its Python examples run, its configs
load, and a study dropped into the studies package is found with nothing else changed."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conceptlab.experiments.loading import load_config, validate
from conceptlab.experiments.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "extending.md"
PLUGINS = Path(__file__).parent / "plugins"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w+)\n(?P<code>.*?)```", re.S)


def blocks(lang: str):
    return [(m["file"], m["code"]) for m in BLOCK.finditer(DOC.read_text()) if m["lang"] == lang]


@pytest.fixture(autouse=True)
def _plugins_importable(monkeypatch, tmp_path_factory):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


def test_the_doc_shows_the_plug_in_files_exactly():
    files = [(f, code) for f, code in blocks("python") if f]
    assert {f for f, _ in files} == {"tests/integration/plugins/ringworld/world.py",
                                     "tests/integration/plugins/ringworld/edits.py"}
    for name, code in files:
        assert code == (REPO / name).read_text(), f"docs/extending.md's copy of {name} differs from the file"


def test_the_docs_python_examples_run_and_the_extra_measurement_runs_end_to_end(tmp_path, monkeypatch):
    module = types.ModuleType("docs_extending_examples")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    examples = [code for f, code in blocks("python") if not f]
    assert len(examples) >= 3
    for code in examples:
        exec(compile(code, str(DOC), "exec"), module.__dict__)
    cfg = load_config("bumps-micro", [f"data.kind={module.__name__}:WeightNormStudy"])
    summary = run_experiment(cfg, tmp_path / "run", progress=False)
    norms = sorted((tmp_path / "run" / "weight_norm").glob("step_*.parquet"))
    assert len(norms) == 2 and (pd.read_parquet(norms[-1])["weight_norm"] > 0).all()
    assert summary["kind"] == f"{module.__name__}:WeightNormStudy" and "final_accuracy" in summary


def test_the_docs_configs_load(tmp_path):
    ring, intervention = [yaml.safe_load(code) for _, code in blocks("yaml")]
    assert validate(ring).eval.ring.angles == 6
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(intervention))
    cfg = load_config(str(path))
    assert cfg.eval.interventions.custom[0].build().name == "exaggerate"


def test_a_study_module_dropped_into_the_package_is_a_data_kind_with_nothing_else_changed(tmp_path):
    """The in-tree route: `ring.py` with a module-level STUDY in conceptlab.studies (here: a folder added to the
    package's path, in a fresh interpreter) — configs then say data.kind: ring, and a run goes end to end."""
    source = (PLUGINS / "ringworld" / "world.py").read_text().replace('"ringworld.world:RingStudy"', '"ring"')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ring.py").write_text(source + "\n\nSTUDY = RingStudy()\n")
    script = textwrap.dedent(f"""
        import conceptlab.studies as studies
        studies.__path__.append({str(tmp_path / "pkg")!r})
        from conceptlab.experiments.loading import validate
        from conceptlab.experiments.runner import run_experiment
        assert "ring" in studies.builtin_kinds(), studies.builtin_kinds()
        cfg = validate({{"data": {{"kind": "ring", "image_size": 8, "angles": 4, "copies": 2}},
                        "model": {{"widths": [16, 32], "blocks_per_level": 1, "mid_attention": False}},
                        "diffusion": {{"process": "cosine", "prediction": "v", "sample_steps": 2}},
                        "train": {{"steps": 4, "batch_size": 4, "checkpoint_schedule": "list",
                                  "checkpoint_steps": [4]}}, "eval": {{"ring": {{"angles": 3}}}}}})
        summary = run_experiment(cfg, {str(tmp_path / "run")!r}, progress=False)
        assert summary["kind"] == "ring" and summary["final_step"] == 4
        print("ok", sorted(cfg.eval.model_dump()))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "CONCEPTLAB_CACHE": str(tmp_path),
                               "CONCEPTLAB_VECTOR_FIGURES": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("ok") and "'ring'" in last  # its eval section is composed into EvalConfig
    assert (tmp_path / "run" / "ring.parquet").is_file()
