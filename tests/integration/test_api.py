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


def test_bad_arguments_get_one_line_errors_before_any_work_and_nothing_is_broadcast(tmp_path):
    """What a wrong argument did before these checks (2026-12-07, an audit): a prompt row of shape [4] gave 4 images
    (its width taken as the batch), one prompt with two images noised both with one draw, guidance on a run trained
    without prompt dropout sampled an unconditional branch it never learned, t = 5 ran, `steps=0` fell back to the
    config's, `step=20.5` read step 20, a string of class codes was read letter by letter."""
    run = conceptlab.run("micro", runs_dir=tmp_path, train__steps=2, **{"train.checkpoint_steps": [1, 2]})
    prompts = run.class_prompts(["11", "00"])
    cases = [
        (lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts[0]), ValueError, r"prompts must be \[N, 4\]"),
        (lambda: run.sample(prompts[0]), ValueError, r"got shape \[4\]"),
        (lambda: run.sample(torch.zeros(0, 4)), ValueError, "N ≥ 1"),
        (lambda: run.sample(torch.zeros(1, 5)), ValueError, "prompt width 4"),
        (lambda: run.sample(prompts[None]), ValueError, r"got shape \[1, 2, 4\]"),
        (lambda: run.sample([[0.0] * 4]), TypeError, "must be a tensor"),
        (lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts[:1], images=torch.rand(2, 3, 32, 32)),
         ValueError, r"images must be \[1, 3, 32, 32\]"),
        (lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts, images=torch.rand(2, 3, 16, 16)),
         ValueError, "the run's image shape"),
        (lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts, t=5.0), ValueError, r"in \[0, 1\]"),
        (lambda: run.run_with_cache("mid.blocks.0.hook_out", prompts, t=float("nan")), ValueError, r"in \[0, 1\]"),
        (lambda: run.sample(prompts, guidance=2.0), ValueError, "cfg_dropout = 0"),
        (lambda: run.sample(prompts, guidance=-1.0), ValueError, "w ≥ 0"),
        (lambda: run.sample(prompts, steps=0), ValueError, "steps must be an integer ≥ 1"),
        (lambda: run.sample(prompts, step=1.5), TypeError, "integer checkpoint step"),
        (lambda: run.sample(prompts, step=3), ValueError, r"checkpoints: \[1, 2\]"),
        (lambda: run.class_prompts("11"), TypeError, "list of class codes"),
        (lambda: run.class_prompts([]), ValueError, "classes is empty"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
    # what stays accepted: a double or integer prompt tensor (cast to float32), numpy-style integer steps, t at 0 and 1
    assert torch.equal(run.sample(prompts.double(), steps=2), run.sample(prompts, steps=2))
    assert run.sample(prompts, step=torch.tensor(2), steps=torch.tensor(2)).shape == (2, 3, 32, 32)
    for t in (0.0, 1.0):
        assert run.run_with_cache("mid.blocks.0.hook_out", prompts, t=t)[0].shape == (2, 3, 32, 32)
    bare = tmp_path / "bare"  # a run folder before its first checkpoint: its config alone
    bare.mkdir()
    (bare / "config.yaml").write_text((run.path / "config.yaml").read_text())
    unsaved = conceptlab.load_run(bare)
    assert unsaved.hook_names() == run.hook_names()  # the names do not depend on the weights
    with pytest.raises(ValueError, match=r"prompts must be \[N, 4\]"):  # checked before looking for a checkpoint
        unsaved.sample(prompts[0])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):  # so is t
        unsaved.run_with_cache("mid.blocks.0.hook_out", prompts, t=5.0)


def test_a_ddpm_run_is_read_on_its_chain_only_and_a_run_keeps_a_few_models_loaded(tmp_path):
    from conceptlab.api import MODELS_KEPT

    run = conceptlab.run("bumps-micro", runs_dir=tmp_path, train__steps=6,
                         **{"train.checkpoint_schedule": "list", "train.checkpoint_steps": [1, 2, 3, 4, 5, 6]})
    chain = run.config.diffusion.ddpm_steps
    prompts = torch.full((1, run.data.prompt_dim), 0.5)
    with pytest.raises(ValueError, match=f"between the DDPM chain's T = {chain} steps"):
        run.run_with_cache("mid.blocks.0.hook_out", prompts, t=0.5 + 0.3 / chain)
    assert run.run_with_cache("mid.blocks.0.hook_out", prompts, t=round(0.5 * chain) / chain)[0].shape[0] == 1
    for step in run.steps:
        run.run_with_cache("mid.blocks.0.hook_out", prompts, step=step, t=1.0)
    assert len(run._models) == MODELS_KEPT < len(run.steps)
    assert [step for step, _ in run._models] == run.steps[-MODELS_KEPT:]  # the most recently used stay
