"""The network footprint measured on the meta device: exact parameter counts, activations that grow with the batch,
and nothing allocated."""

import pytest
import torch

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import build_run_model
from conceptlab.models.diffusion_model import build_network
from conceptlab.models.footprint import activation_peak, module_peak, network_footprint
from conceptlab.studies import study_for


@pytest.mark.parametrize("preset", ["micro", "bumps-micro", "abstractions-micro"])
def test_meta_footprint_counts_the_parameters_of_the_real_model(preset):
    cfg = load_config(preset)
    dgp = study_for(cfg.data.kind).build_data(cfg.data)
    with torch.device("meta"):
        net = build_network(cfg.model, dgp.prompt_dim, dgp.channels, dgp.null_label)
    use = network_footprint(net, (dgp.channels, dgp.image_size, dgp.image_size), dgp.prompt_dim, 8, 16)
    real = build_run_model(cfg, dgp).net
    assert use["parameters"] == sum(p.numel() for p in real.parameters())
    assert all(p.device.type == "meta" for p in net.parameters()) and all(p.grad is None for p in net.parameters())
    assert 0 < use["evaluation"] < use["training"] * 16 / 8  # no-grad holds less per image than a training step


def test_activations_grow_with_the_batch_and_a_training_step_holds_more_than_a_forward():
    cfg = load_config("micro")
    with torch.device("meta"):
        net = build_network(cfg.model, 4, 3)
    small = network_footprint(net, (3, 32, 32), 4, 4, 4)
    large = network_footprint(net, (3, 32, 32), 4, 32, 32)
    assert 6 < large["training"] / small["training"] < 9  # about linear in the batch (fixed costs aside)
    assert large["training"] > large["evaluation"]


def test_activation_peak_counts_live_storages_once():
    x = torch.empty(1000, device="meta")

    def run():
        y = x * 2  # 4 kB alive
        y.view(10, 100).sum()  # a view shares y's storage
        del y
        (x + 1).sum()  # another 4 kB, after y is gone

    peak = activation_peak(run, (x,))
    assert 8000 <= peak <= 8000 + 64  # x and one 4 kB temporary at a time (plus tiny reductions)


def test_footprint_refuses_a_network_on_a_real_device():
    cfg = load_config("micro")
    with pytest.raises(ValueError, match="meta device"):
        network_footprint(build_network(cfg.model, 4, 3), (3, 32, 32), 4, 2, 2)


def test_module_peak_backward_through_a_dict_of_outputs():
    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(10, 3), torch.nn.Linear(10, 2)

        def forward(self, x):
            return {"a": self.a(x), "b": self.b(x)}

    with torch.device("meta"):
        heads = Heads()
    x = torch.empty(64, 10, device="meta")
    assert module_peak(heads, (x,), backward=True) > module_peak(heads, (x,), backward=False) > 0
    assert all(p.grad is None for p in heads.parameters())
