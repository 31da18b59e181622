"""The Python front door as a user calls it: the README's Python block as written, `load_run` on a finished run, and
importing the package changes no global state."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import conceptlab

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_readmes_python_block_runs_as_written(tmp_path, monkeypatch):
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[:1]
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    run = namespace["run"]
    assert run.path.resolve().parent == tmp_path / "runs" and run.steps == [10, 20]
    assert namespace["images"].shape == (2, 3, 32, 32) and 0 <= float(namespace["images"].min())
    assert list(namespace["acts"]) == ["mid.blocks.0.hook_out"]
    assert namespace["again"].summary == run.summary and set(namespace["table"]["class"]) == {"00", "01", "10", "11"}


def test_a_loaded_run_gives_its_model_tables_and_context(tmp_path):
    run = conceptlab.run("micro", runs_dir=tmp_path, train__steps=20)
    loaded = conceptlab.load_run(run.path)
    assert loaded.tables == ["concept_space", "learning_times"] and loaded.steps == [10, 20]
    a = loaded.sample(loaded.class_prompts(["11"]), step=10, steps=3, seed=1)
    b = loaded.sample(loaded.class_prompts(["11"]), step=10, steps=3, seed=1)
    assert torch.equal(a, b) and not torch.equal(a, loaded.sample(loaded.class_prompts(["11"]), step=20, steps=3,
                                                                  seed=1))
    assert "down.0.blocks.0.hook_concept" in loaded.hook_names()
    context = loaded.intervention_context(step=10)
    assert context.classes == ["00", "01", "10", "11"] and context.canonical_prompt is not None
    assert type(loaded.probe()).__name__ == "ConceptProbe"  # the probe that read the run's generations
    with pytest.raises(ValueError, match="no checkpoint at step 15"):
        loaded.model(15)
    with pytest.raises(FileNotFoundError, match="has no table 'geometry'"):
        loaded.table("geometry")
    with pytest.raises(FileNotFoundError, match="is not a run folder"):
        conceptlab.load_run(tmp_path)
    assert "micro" in conceptlab.list_presets()


def test_importing_the_package_and_its_modules_changes_no_global_state():
    code = ("import matplotlib; matplotlib.use('pdf'); import conceptlab, conceptlab.api, conceptlab.report.figures, "
            "conceptlab.report.emergence_figures, conceptlab.experiments.runner; "
            "import torch; print(matplotlib.get_backend(), torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["pdf", "2"]
    light = subprocess.run([sys.executable, "-c", "import conceptlab, sys; print('torch' in sys.modules)"],
                           capture_output=True, text=True, timeout=60)
    assert light.stdout.strip() == "False"  # `import conceptlab` alone loads nothing heavy


def test_the_api_leaves_the_callers_rng_alone_and_a_returned_model_is_the_callers_own(tmp_path):
    """`run`, `model`, `class_prompts`, `sample` and `run_with_cache` leave the global torch RNG as they found it (the
    caller's next draw after `manual_seed` is the same); moving or training the model `model()` returns does not
    change what `sample` and `run_with_cache` give."""
    def unchanged(fn) -> bool:
        torch.manual_seed(7)
        before = torch.get_rng_state().clone()
        fn()
        return torch.equal(before, torch.get_rng_state())

    holder = {}
    assert unchanged(lambda: holder.setdefault("run", conceptlab.run("micro", runs_dir=tmp_path, train__steps=2,
                                                                     **{"train.checkpoint_steps": [2]})))
    run = conceptlab.load_run(holder["run"].path)
    assert unchanged(lambda: run.model(2))  # built (initial weights drawn) and loaded
    assert unchanged(lambda: run.class_prompts(["11"]))
    prompts = run.class_prompts(["11"])
    assert unchanged(lambda: run.sample(prompts, steps=2))
    assert unchanged(lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts))
    before = run.sample(prompts, steps=2)
    _, acts = run.run_with_cache("mid.blocks.0.hook_out", prompts)
    mine = run.model()
    mine.to(torch.float64).train()  # stands in for .to("cuda"): nn.Module.to moves in place
    assert torch.equal(run.sample(prompts, steps=2), before)
    assert torch.equal(run.run_with_cache("mid.blocks.0.hook_out", prompts)[1]["mid.blocks.0.hook_out"],
                       acts["mid.blocks.0.hook_out"])
    assert not run.model().training and next(run.model().parameters()).dtype == torch.float32
