"""Unit tests for HookPoint and the hooks API on a toy model."""

import pytest
import torch
from torch import nn

from conceptlab.hooks import HookPoint, cache_activations, hook_points, name_hook_points, run_with_hooks


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hook_in = HookPoint()
        self.layer = nn.Sequential(nn.Linear(3, 3), HookPoint())
        self.hook_out = HookPoint()
        name_hook_points(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hook_out(self.layer(self.hook_in(x)) * 2)


def test_names_and_order():
    model = Toy()
    points = hook_points(model)
    assert list(points) == ["hook_in", "layer.1", "hook_out"]
    assert all(hp.name == name for name, hp in points.items())


def test_hook_point_returns_none_keeps_and_tensor_replaces():
    hp = HookPoint()
    x = torch.randn(2, 3)
    seen = []
    remove_seen = hp.add_hook(lambda a, h: seen.append(a))
    assert hp(x) is x and len(seen) == 1
    remove_double = hp.add_hook(lambda a, h: a * 2)
    remove_add = hp.add_hook(lambda a, h: a + 1)  # runs after the doubling
    assert torch.equal(hp(x), x * 2 + 1)
    remove_double()
    assert torch.equal(hp(x), x + 1)
    remove_add()
    remove_seen()
    assert not hp.has_hooks


def test_run_with_hooks_by_name_and_predicate():
    model = Toy()
    x = torch.randn(4, 3)
    base = model(x)
    with run_with_hooks(model, [("hook_out", lambda a, h: torch.zeros_like(a))]):
        assert torch.equal(model(x), torch.zeros_like(base))
    calls = []
    with run_with_hooks(model, [(lambda name: name.startswith("hook_"), lambda a, h: calls.append(h.name))]):
        model(x)
    assert calls == ["hook_in", "hook_out"]
    assert torch.equal(model(x), base)
    assert not any(hp.has_hooks for hp in hook_points(model).values())


def test_hooks_removed_after_exception():
    model = Toy()
    with pytest.raises(RuntimeError, match="boom"):
        with run_with_hooks(model, [("hook_in", lambda a, h: a * 0)], context={"t": 0.5}):
            assert hook_points(model)["layer.1"].context == {"t": 0.5}
            raise RuntimeError("boom")
    assert not any(hp.has_hooks or hp.context is not None for hp in hook_points(model).values())


def test_unknown_name_is_a_clear_error():
    model = Toy()
    with pytest.raises(KeyError, match="hook_out"):
        with run_with_hooks(model, [("hook_outt", lambda a, h: None)]):
            pass
    assert not any(hp.has_hooks for hp in hook_points(model).values())


def test_cache_collects_detached_copies_per_call():
    model = Toy()
    xs = [torch.randn(2, 3, requires_grad=True) for _ in range(3)]
    with cache_activations(model, ["hook_in", "hook_out"]) as cache:
        outs = [model(x) for x in xs]
    assert list(cache) == ["hook_in", "hook_out"]
    assert len(cache["hook_out"]) == 3
    for x, out, cached_in, cached_out in zip(xs, outs, cache["hook_in"], cache["hook_out"]):
        assert torch.equal(cached_in, x) and torch.equal(cached_out, out)
        assert not cached_out.requires_grad and cached_in.data_ptr() != x.data_ptr()
    assert not any(hp.has_hooks for hp in hook_points(model).values())
