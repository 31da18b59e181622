"""The training loop: loss goes down, EMA, and exact resume after an interruption."""

import pytest
import torch

from conceptlab.models.processes import DiffusionConfig
from conceptlab.models.unet import ModelConfig
from conceptlab.train.config import TrainConfig
from conceptlab.models.diffusion_model import build_model
from conceptlab.train.checkpoints import list_checkpoints, load_checkpoint, training_state_step
from conceptlab.train.trainer import TrainingData, iter_training, load_weights

MODEL = ModelConfig(widths=[8, 16], blocks_per_level=1, mid_attention=False, dropout=0.1, pixel_unshuffle=2)
DIFFUSION = DiffusionConfig(process="cosine", prediction="v")


def _model(seed=0, mask="bernoulli"):
    torch.manual_seed(seed)
    return build_model(MODEL.model_copy(update={"dropout_mask": mask}), DIFFUSION, prompt_dim=2, image_size=8)


def _data(n=32):
    g = torch.Generator().manual_seed(0)
    prompts = torch.rand(n, 2, generator=g)
    images = prompts[:, :1, None, None].expand(n, 3, 8, 8).clone()  # brightness follows the prompt
    return TrainingData(images, prompts, null_value=0.0)


def _cfg(**kw):
    base = dict(steps=12, batch_size=8, lr=3e-3, checkpoint_schedule="list", checkpoint_steps=[4, 8], ema_decay=0.9,
                bf16=True, log_every=1)
    return TrainConfig(**{**base, **kw})


def test_training_writes_scheduled_checkpoints_with_sidecars(tmp_path):
    records = list(iter_training(_model(), _data(), _cfg(), tmp_path / "ckpt", tmp_path / "state.safetensors",
                                 cfg_dropout=0.2, config_hash="h1"))
    assert [r.step for r in records] == list(range(1, 13))
    assert [r.step for r in records if r.checkpoint] == [4, 8, 12]
    assert [s for s, _ in list_checkpoints(tmp_path / "ckpt")] == [4, 8, 12]
    tensors, sidecar = load_checkpoint(tmp_path / "ckpt" / "step_0000012.safetensors")
    assert sidecar["config_hash"] == "h1" and sidecar["has_ema"] and "loss" in sidecar["metrics"]
    assert any(k.startswith("ema.") for k in tensors) and any(k.startswith("model.") for k in tensors)
    ema = load_weights(_model(), tensors, use_ema=True)
    raw = load_weights(_model(), tensors, use_ema=False)
    assert not all(torch.equal(a, b) for a, b in zip(ema.parameters(), raw.parameters()))


@pytest.mark.parametrize("mask", ["bernoulli", "sfc64"])  # dropout 0.1: the masks draw from the saved RNG state
def test_interrupted_and_resumed_run_equals_uninterrupted_run(tmp_path, mask):
    full = _model(mask=mask)
    for _ in iter_training(full, _data(), _cfg(), tmp_path / "a", tmp_path / "a.safetensors", 0.2, "h"):
        pass
    interrupted = _model(mask=mask)
    for rec in iter_training(interrupted, _data(), _cfg(), tmp_path / "b", tmp_path / "b.safetensors", 0.2, "h"):
        if rec.step == 10:  # crash after the step-8 state was saved
            break
    resumed = _model(seed=123, mask=mask)  # a fresh process starts from other weights: resume overwrites them
    steps = [r.step for r in iter_training(resumed, _data(), _cfg(), tmp_path / "b", tmp_path / "b.safetensors",
                                           0.2, "h")]
    assert steps == [9, 10, 11, 12]
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    a, _ = load_checkpoint(tmp_path / "a" / "step_0000012.safetensors")
    b, _ = load_checkpoint(tmp_path / "b" / "step_0000012.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_steps_record_comes_before_the_state_that_marks_it_done(tmp_path):
    """What the caller does with a checkpoint step's record (the run driver's log line) is done before its training
    state is saved, so a kill in between repeats the step on resume instead of losing the line."""
    state = tmp_path / "state.safetensors"
    seen = []
    for rec in iter_training(_model(), _data(), _cfg(), tmp_path / "ckpt", state, 0.0, "h"):
        seen.append((rec.step, training_state_step(state)))
    assert [s for s in seen if s[0] in (4, 5, 8, 9, 12)] == [(4, 0), (5, 4), (8, 4), (9, 8), (12, 8)]
    assert training_state_step(state) == 12  # saved once the caller asks for the next record


def test_resume_refuses_state_from_another_config(tmp_path):
    for _ in iter_training(_model(), _data(), _cfg(), tmp_path / "c", tmp_path / "s.safetensors", 0.0, "one"):
        pass
    with pytest.raises(ValueError, match="different configuration"):
        next(iter_training(_model(), _data(), _cfg(steps=20), tmp_path / "c", tmp_path / "s.safetensors", 0.0, "two"))


def test_loss_decreases_on_a_learnable_task(tmp_path):
    records = list(iter_training(_model(), _data(64), _cfg(steps=150, batch_size=32, checkpoint_steps=[150], lr=5e-3,
                                                           grad_clip=1.0), tmp_path / "d", tmp_path / "d.sf"))
    first = sum(r.loss for r in records[:15]) / 15
    last = sum(r.loss for r in records[-15:]) / 15
    assert last < 0.8 * first


def test_uint8_images_train_exactly_like_their_float_values(tmp_path):
    data = _data()
    quantised = (data.images * 255).round().to(torch.uint8)
    as_float = TrainingData(quantised.float() / 255, data.prompts, data.null_value)
    as_uint8 = TrainingData(quantised, data.prompts, data.null_value)
    finals = []
    for name, d in (("f", as_float), ("u", as_uint8)):
        model = _model()
        list(iter_training(model, d, _cfg(bf16=False), tmp_path / name, tmp_path / f"{name}.safetensors"))
        finals.append(model.state_dict())
    assert all(torch.equal(finals[0][k], finals[1][k]) for k in finals[0])


@pytest.fixture
def drawn_batches(monkeypatch) -> list:
    """Every batch of images the trainer hands to its training step, as drawn (after augmentation)."""
    import conceptlab.train.trainer as trainer

    seen, real_step = [], trainer.train_step

    def spy(model, optimizer, x, *args):
        seen.append(x.clone())
        return real_step(model, optimizer, x, *args)

    monkeypatch.setattr(trainer, "train_step", spy)
    return seen


def test_hflip_flips_the_drawn_images_and_at_zero_changes_nothing(tmp_path, drawn_batches):
    n = 16
    images = torch.zeros(n, 3, 8, 8)
    images[..., :4] = 1.0  # bright on the left: a flipped image is bright on the right
    data = TrainingData(images, torch.rand(n, 2), null_value=0.0)
    seen = drawn_batches
    for p, name in ((1.0, "all"), (0.5, "half"), (0.0, "none")):
        seen.clear()
        list(iter_training(_model(), data, _cfg(hflip=p, steps=8), tmp_path / name, tmp_path / f"{name}.st"))
        right = torch.cat(seen)[..., 4:].mean((1, 2, 3)) > 0.5  # per image: flipped
        assert right.float().mean().item() == pytest.approx(p, abs=0.2 if p == 0.5 else 0.0), (p, right)
    # at its default the key is left out of the saved config (so of every run id) and draws no random number
    assert "hflip" not in TrainConfig().model_dump() and TrainConfig(hflip=0.5).model_dump()["hflip"] == 0.5


def test_color_jitter_reaches_the_training_step_and_needs_rgb(tmp_path, drawn_batches):
    images = torch.full((8, 3, 8, 8), 0.5)
    images[:, 0] = 0.8  # reddish: hue and saturation have something to move
    data = TrainingData(images, torch.rand(8, 2), null_value=0.0)
    seen = drawn_batches
    list(iter_training(_model(), data, _cfg(color_jitter=0.1, steps=8), tmp_path / "j", tmp_path / "j.st"))
    drawn = torch.cat(seen)
    assert not torch.allclose(drawn, images[:1].expand_as(drawn), atol=1e-3)  # jittered, every draw
    assert ((drawn - images[:1]).abs().mean((1, 2, 3)) > 1e-4).all()
    assert (drawn - drawn.new_tensor([0.8, 0.5, 0.5])[None, :, None, None]).abs().max() < 0.3
    grey_data = TrainingData(torch.rand(4, 1, 8, 8), torch.rand(4, 2), null_value=0.0)
    with pytest.raises(ValueError, match="RGB"):
        list(iter_training(_model(), grey_data, _cfg(color_jitter=0.1, steps=8), tmp_path / "g", tmp_path / "g.st"))


@pytest.mark.parametrize("grad_clip", [0.01, None])
def test_a_non_finite_step_is_not_applied_to_the_weights_or_the_ema(tmp_path, monkeypatch, grad_clip):
    """NaN in the data at step 3: TrainingDiverged, and the model and its EMA hold the weights of step 2."""
    import conceptlab.train.trainer as trainer

    emas = []

    class RecordedEMA(trainer.EMA):
        def __init__(self, *args):
            super().__init__(*args)
            emas.append(self)

    monkeypatch.setattr(trainer, "EMA", RecordedEMA)
    model, data = _model(), _data()
    kept = None
    with pytest.raises(trainer.TrainingDiverged, match="step 3: the loss is nan; the last checkpoint, step 2"):
        for record in iter_training(model, data, _cfg(grad_clip=grad_clip, checkpoint_steps=[2, 4]),
                                    tmp_path / "ckpt", tmp_path / "state.safetensors"):
            if record.step == 2:
                kept = ({k: v.clone() for k, v in model.state_dict().items()},
                        {k: v.clone() for k, v in emas[0].model.state_dict().items()})
                data.images[:] = float("nan")  # every image the next step draws
    assert kept is not None
    for now, before in ((model.state_dict(), kept[0]), (emas[0].model.state_dict(), kept[1])):
        assert now.keys() == before.keys() and all(torch.equal(now[k], before[k]) for k in now)


def test_train_step_refuses_to_step_on_a_non_finite_loss():
    from conceptlab.train.trainer import TrainingDiverged, build_optimizer, train_step

    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    images = torch.full((4, 3, 8, 8), float("nan"))
    with pytest.raises(TrainingDiverged, match="training step not taken: the loss is nan"):
        train_step(model, build_optimizer(model, _cfg()), images, torch.rand(4, 2), None, False, "cpu", None)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
