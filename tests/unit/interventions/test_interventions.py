"""Interventions on a micro model: variants, edits confined to their own rows, batching, scores and bad input."""

import pytest
import torch

from conceptlab.studies import build_data
from conceptlab.data.shapes import ShapesDataConfig
from conceptlab.models.processes import DiffusionConfig
from conceptlab.models.unet import ModelConfig
from conceptlab.hooks import HookNameError, cache_activations, hook_points
from conceptlab.interventions import (
    ClassifierFreeGuidance,
    EmbedderPatching,
    InterventionContext,
    InterventionError,
    EmbeddingShift,
    LatentEdit,
    LinearLatentIntervention,
    NaivePrompting,
    OverPrompting,
    Variant,
    build_variants,
    concept_embeddings,
    evaluate_interventions,
    sample_variants,
    score_images,
)
from conceptlab.models.diffusion_model import build_model
from conceptlab.interventions.prompting import AUTHORS_BLUE_COLORS
from conceptlab.probes.concept_classifier import ConceptReading

N, STEPS = 3, 4


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("interventions")


def _micro_model(seed: int):
    torch.manual_seed(seed)
    cfg = ModelConfig(widths=[8, 16], blocks_per_level=1, mid_attention=False, dropout=0.0, pixel_unshuffle=2,
                      norm_groups=4, prompt_shift=0.5, prompt_scale=4.0)
    model = build_model(cfg, DiffusionConfig(process="cosine", prediction="v"), prompt_dim=4, image_size=8)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # zero-initialised output convs would hide every edit
    return model.eval()


@pytest.fixture(scope="module")
def dgp():
    return build_data(ShapesDataConfig(concepts=["color", "size"], image_size=8, images_per_class=4))


@pytest.fixture(scope="module")
def model():
    return _micro_model(0)


def _context(dgp, model, reference=None, cfg_trained=False) -> InterventionContext:
    return InterventionContext(
        concepts=list(dgp.concepts),
        classes=list(dgp.classes),
        train_classes=list(dgp.train_classes),
        class_prompt=dgp.class_prompt,
        null_prompt=torch.zeros(dgp.prompt_dim),
        embed=lambda p: concept_embeddings(model, p),
        embed_reference=(lambda p: concept_embeddings(reference, p)) if reference is not None else None,
        trained_with_null_prompt=cfg_trained,
        canonical_prompt=dgp.canonical_prompt,
        prompt_slices=dgp.prompt_slices(),
    )


def _sample(model, variants, seed=5, max_batch=1024):
    return sample_variants(model, variants, N, STEPS, torch.Generator().manual_seed(seed), torch.zeros(4), max_batch)


def test_over_prompting_moves_only_the_chosen_concept_beyond_the_target(dgp, model):
    ctx = _context(dgp, model)
    target = dgp.class_prompt("11")
    variants = OverPrompting(("color",), (0.0, 0.5)).variants("11", ctx)
    assert [v.label for v in variants] == ["color+0.00", "color+0.50"]
    assert torch.equal(variants[0].prompt, target)
    moved = variants[1].prompt - target
    color = dgp.prompt_slices()["color"]
    # red channel down, green (the same for red and blue) unchanged, blue up: half a separation of Δc = 0.4
    assert moved[color].tolist() == pytest.approx([-0.2, 0.0, 0.2], abs=1e-6)
    assert moved[dgp.prompt_slices()["size"]].abs().max() == 0  # size untouched


def test_over_prompting_with_the_authors_colors_sets_the_color_entries_to_each_color(dgp, model):
    """The authors' grid (get_capability.py): the color entries take each RGB color, green falling with red;
    every other entry stays the target's."""
    ctx = _context(dgp, model)
    target = dgp.class_prompt("11")
    variants = OverPrompting(("color",), colors=AUTHORS_BLUE_COLORS).variants("11", ctx)
    assert [v.label for v in variants] == ["rgb(0.40,0.40,0.60)", "rgb(0.35,0.35,0.65)", "rgb(0.25,0.25,0.75)",
                                           "rgb(0.15,0.15,0.85)", "rgb(0.05,0.05,0.95)"]
    color, size = dgp.prompt_slices()["color"], dgp.prompt_slices()["size"]
    for v, rgb in zip(variants, AUTHORS_BLUE_COLORS):
        assert v.intervention == "over_prompting"
        assert v.prompt[color].tolist() == pytest.approx(list(rgb))
        assert torch.equal(v.prompt[size], target[size])
    # the blue class mean (Δc 0.4: 0.3, 0.3, 0.7) lies on the authors' path (1 − b, 1 − b, b): green moves too,
    # unlike our contrast direction
    assert target[color].tolist() == pytest.approx([0.3, 0.3, 0.7])
    ours = OverPrompting(("color",), (1.0,)).variants("11", ctx)[0]
    assert ours.prompt[color][1] == pytest.approx(0.3) and variants[-1].prompt[color][1] == pytest.approx(0.05)


def test_over_prompting_colors_bad_input_is_one_clear_error(dgp, model):
    ctx = _context(dgp, model)
    with pytest.raises(InterventionError, match="concepts must be \\[color\\]"):
        OverPrompting(("size",), colors=((0.1, 0.1, 0.9),))
    with pytest.raises(InterventionError, match="each color is 3 numbers"):
        OverPrompting(("color",), colors=((0.1, 0.9),))
    with pytest.raises(InterventionError, match="colors is empty"):
        OverPrompting(("color",), colors=())
    blind = InterventionContext(**{**ctx.__dict__, "prompt_slices": None})
    with pytest.raises(InterventionError, match="no prompt_slices"):
        OverPrompting(("color",), colors=((0.1, 0.1, 0.9),)).variants("11", blind)
    # the authors' grid is for a blue target: on a red one it would prompt toward blue, away from the target
    assert dgp.class_prompt("01")[dgp.prompt_slices()["color"]][0] > 0.5  # class 01: red
    with pytest.raises(InterventionError, match="no nearer class 01's color"):
        OverPrompting(("color",), colors=AUTHORS_BLUE_COLORS).variants("01", ctx)
    red = tuple((b, 1 - b, 1 - b) for b in (0.6, 0.95))  # the same grid mirrored for red
    assert len(OverPrompting(("color",), colors=red).variants("01", ctx)) == 2
    # and the run refuses it before training (the study's check), not at the first checkpoint's measurement
    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import prepare_run

    with pytest.raises(InterventionError, match="no nearer class 01's color"):
        prepare_run(load_config("hidden-emergence-paper-tiny", ["eval.interventions.targets=['01']"]))


def test_over_prompting_colors_config_keeps_old_run_ids_and_builds_the_authors_grid():
    from conceptlab.interventions.config import InterventionsConfig, OverPromptingConfig, build_interventions

    assert "colors" not in OverPromptingConfig().model_dump()  # at its default: configs saved before keep their ids
    cfg = InterventionsConfig(over_prompting={"colors": [list(c) for c in AUTHORS_BLUE_COLORS]}, linear=None,
                              patching=None)
    (naive, over) = build_interventions(cfg)
    assert over.colors == AUTHORS_BLUE_COLORS
    with pytest.raises(ValueError, match="each color is 3 numbers"):
        OverPromptingConfig(colors=[[0.1, 0.9]])


def test_embedding_shift_moves_its_own_rows_by_alpha_times_the_embedding_change(dgp, model):
    ctx = _context(dgp, model)
    shift = EmbeddingShift(boost=("color",), suppress=("size",), alphas=(2.0,), betas=(0.5,))
    (variant,) = shift.variants("11", ctx)
    assert variant.intervention == "embedding_shift"
    naive = NaivePrompting().variants("11", ctx)[0]
    emb = concept_embeddings(model, torch.stack([dgp.class_prompt(c) for c in ("11", "01", "10")]))
    name = "down.0.blocks.0.hook_concept"
    expected = emb[name][0] + 2.0 * (emb[name][0] - emb[name][1]) + 0.5 * (emb[name][0] - emb[name][2])
    (edit,) = variant.edits
    assert edit.sites(name) and not edit.sites("down.0.blocks.0.hook_out")
    edited = edit.fn(emb[name][:1].expand(N, -1), hook_points(model.net)[name])
    assert torch.allclose(edited, expected.expand(N, -1), atol=1e-5)
    with cache_activations(model.net, name) as cache:  # attached first, so it reads the unedited embedding
        _sample(model, [naive, variant])
    first = cache[name][0]  # first sampler step, rows [naive × N, shifted × N]
    assert torch.allclose(first, emb[name][0].expand(2 * N, -1), atol=1e-5)


class _Embeddings:
    """A context's `embed` over synthetic embeddings: canonical prompts (told apart by their entries) → fixed vectors."""

    def __init__(self, table: dict[tuple, torch.Tensor]):
        self.table = table

    def __call__(self, prompts):
        rows = [self.table[tuple(round(v, 4) for v in p.tolist())] for p in prompts]
        return {"site": torch.stack(rows)}


def _synthetic_context(dgp, u, v):
    """u: the embedding of the blue canonical prompt, v: of the large one (what the authors' linear reads)."""
    blue, large = dgp.canonical_prompt("color", 1, 0.45), dgp.canonical_prompt("size", 0, 0.15)
    embed = _Embeddings({tuple(round(x, 4) for x in blue.tolist()): 3.0 * u,  # not unit: the intervention normalises
                         tuple(round(x, 4) for x in large.tolist()): 0.5 * v})
    return InterventionContext(concepts=list(dgp.concepts), classes=list(dgp.classes),
                               train_classes=list(dgp.train_classes), class_prompt=dgp.class_prompt,
                               null_prompt=torch.zeros(dgp.prompt_dim), embed=embed,
                               canonical_prompt=dgp.canonical_prompt)


class _Hook:
    name = "site"


def test_authors_linear_scales_the_component_along_u_and_leaves_the_rest(dgp):
    """h = a·u + b·w with w ⟂ u, v and β = 0: the edit gives (1 + α)·a·u + b·w."""
    u, v, w = torch.eye(4)[0], torch.eye(4)[1], torch.eye(4)[2]
    ctx = _synthetic_context(dgp, u, v)
    linear = LinearLatentIntervention(alphas=(0.1, 1.0, 2.0), betas=(0.0,))
    h = (1.5 * u + 0.7 * w)[None]
    for variant, alpha in zip(linear.variants("11", ctx), (0.1, 1.0, 2.0)):
        (edit,) = variant.edits
        assert torch.allclose(edit.fn(h, _Hook()), ((1 + alpha) * 1.5 * u + 0.7 * w)[None])
        assert variant.intervention == "linear" and torch.equal(variant.prompt, dgp.class_prompt("11"))


def test_authors_linear_takes_vs_component_after_the_first_edit(dgp):
    """u and v not orthogonal: h₂ = h₁ − β (h₁·v) v with h₁ = h + α (h·u) u, not with h."""
    u = torch.tensor([1.0, 0.0, 0.0, 0.0])
    v = torch.tensor([0.6, 0.8, 0.0, 0.0])
    ctx = _synthetic_context(dgp, u, v)
    (variant,) = LinearLatentIntervention(alphas=(2.0,), betas=(0.5,)).variants("11", ctx)
    h = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    h1 = h + 2.0 * (h @ u) * u
    expected = h1 - 0.5 * (h1 @ v) * v
    wrong = h1 - 0.5 * (h @ v) * v  # v's component of the unedited h
    got = variant.edits[0].fn(h, _Hook())
    assert torch.allclose(got, expected) and not torch.allclose(got, wrong)
    assert [x.label for x in LinearLatentIntervention(alphas=(1.0, 2.0), betas=(0.1,)).variants("11", ctx)] == \
        ["a1,b0.1", "a2,b0.1"]


def test_authors_linear_reads_the_canonical_prompts_of_the_target(dgp, model):
    """For blue-small: boost blue (0.05, 0.05, 0.95), suppress large (radius 0.6); for red-small: boost red."""
    ctx = _context(dgp, model)
    canon = LinearLatentIntervention().canonical_prompts("11", ctx)
    assert [(role, c) for role, c, _ in canon] == [("boost", "color"), ("suppress", "size")]
    color, size = dgp.prompt_slices()["color"], dgp.prompt_slices()["size"]
    assert canon[0][2][color].tolist() == pytest.approx([0.05, 0.05, 0.95]) and canon[0][2][size].abs().max() == 0
    assert canon[1][2][size].tolist() == pytest.approx([0.6]) and canon[1][2][color].abs().max() == 0
    red = LinearLatentIntervention().canonical_prompts("01", ctx)
    assert red[0][2][color].tolist() == pytest.approx([0.95, 0.05, 0.05])
    # on the real network: the edit at every block's site is the projection rule on that block's own embeddings
    (variant,) = LinearLatentIntervention(alphas=(2.0,), betas=(0.1,)).variants("11", ctx)
    name = "down.0.blocks.0.hook_concept"
    emb = concept_embeddings(model, torch.stack([dgp.class_prompt("11"), canon[0][2], canon[1][2]]))[name]
    u, v = emb[1] / emb[1].norm(), emb[2] / emb[2].norm()
    h1 = emb[0] + 2.0 * (emb[0] @ u) * u
    expected = h1 - 0.1 * (h1 @ v) * v
    got = variant.edits[0].fn(emb[:1], hook_points(model.net)[name])
    assert torch.allclose(got[0], expected, atol=1e-5)


def test_edits_never_leak_into_other_rows(dgp, model):
    ctx = _context(dgp, model)
    naive = NaivePrompting().variants("11", ctx)[0]
    strong = EmbeddingShift(alphas=(3.0,), betas=(1.0,)).variants("11", ctx)[0]
    zero = EmbeddingShift(alphas=(0.0,), betas=(0.0,)).variants("11", ctx)[0]
    a, b = _sample(model, [naive, strong]), _sample(model, [naive, zero])
    assert torch.equal(a[:N], b[:N])  # the naive rows do not see the other variant's edit
    assert not torch.allclose(a[N:], b[N:])  # the edit itself changes the generations
    assert torch.allclose(b[N:], _sample(model, [naive, naive])[N:], atol=1e-5)  # α = β = 0 is naive prompting
    assert not torch.allclose(b[:N], b[N:])  # (variants get their own noise)
    assert not any(hp.has_hooks for hp in hook_points(model.net).values())


def test_patching_with_the_same_weights_is_naive_and_with_other_weights_is_not(dgp, model):
    naive = NaivePrompting().variants("11", _context(dgp, model))[0]
    same = EmbedderPatching().variants("11", _context(dgp, model, reference=model))[0]
    other = EmbedderPatching().variants("11", _context(dgp, model, reference=_micro_model(1)))[0]
    base = _sample(model, [naive])  # same seed, same layout: the same noise in every call
    assert torch.allclose(_sample(model, [same]), base, atol=1e-5)
    assert not torch.allclose(_sample(model, [other]), base, atol=1e-3)


def test_batching_groups_guidance_scales_and_chunks_without_changing_shapes(dgp, model):
    ctx = _context(dgp, model, cfg_trained=True)
    variants = [v for _, v in build_variants([NaivePrompting(), ClassifierFreeGuidance((0.0, 2.0))], ["11"], ctx)]
    passes: list[int] = []
    images = sample_variants(model, variants, N, STEPS, torch.Generator().manual_seed(5), torch.zeros(4),
                             max_batch=N, on_pass=passes.append)
    assert images.shape == (3 * N, 3, 8, 8)
    assert passes == [N, N, N]  # plain conditional (naive), w = 0 and w = 2: one pass each at max_batch = N
    assert not torch.allclose(images[:N], images[2 * N :])


def test_with_per_variant_seeds_no_image_depends_on_the_pass_size(dgp, model):
    # what lets a CPU cap the pass size (`eval.interventions.cpu_max_batch`) without changing a result beyond rounding
    ctx = _context(dgp, model, cfg_trained=True)
    variants = [v for _, v in build_variants([NaivePrompting(), OverPrompting(["color"], [0.5, 1.0])], ["11"], ctx)]
    seeds = list(range(10, 10 + len(variants)))
    passes: list[int] = []
    one = sample_variants(model, variants, N, STEPS, None, torch.zeros(4), 1024, seeds=seeds)
    small = sample_variants(model, variants, N, STEPS, None, torch.zeros(4), N, on_pass=passes.append, seeds=seeds)
    assert passes == [N] * len(variants)
    assert torch.allclose(one, small, rtol=0, atol=1e-5)  # batch-size-dependent kernels: float rounding (2e-7)
    shared = sample_variants(model, variants, N, STEPS, torch.Generator().manual_seed(5), torch.zeros(4), N)
    assert (shared - _sample(model, variants)).abs().max() > 0.01  # one generator in turn: the packing moves the draws


def test_score_counts_invalid_images_as_zero(monkeypatch):
    import conceptlab.interventions.evaluate as evaluate

    reading = ConceptReading(
        p_valid=torch.tensor([0.9, 0.9, 0.1]),
        p_one={"color": torch.tensor([0.8, 0.4, 1.0]), "size": torch.tensor([0.5, 1.0, 1.0])},
        predicted={"color": torch.tensor([1, 0, 1]), "size": torch.tensor([1, 1, 1])},
        valid=torch.tensor([True, True, False]),
    )
    monkeypatch.setattr(evaluate, "read_concepts", lambda probe, images: reading)
    row = score_images(torch.zeros(3, 3, 8, 8), "11", ["color", "size"], probe=None)
    assert row["score"] == pytest.approx((0.8 * 0.5 + 0.4 * 1.0 + 0.0) / 3)
    assert row["hit_rate"] == pytest.approx(1 / 3) and row["valid_fraction"] == pytest.approx(2 / 3)
    assert row["p_color"] == pytest.approx(0.6)


def test_evaluate_interventions_returns_one_row_per_variant(dgp, model, monkeypatch):
    import conceptlab.interventions.evaluate as evaluate

    def fake_read(probe, images):
        n = images.shape[0]
        half = torch.full((n,), 0.5)
        return ConceptReading(half, {"color": half, "size": half}, {"color": half.long(), "size": half.long()},
                              torch.ones(n, dtype=torch.bool))

    monkeypatch.setattr(evaluate, "read_concepts", fake_read)
    ctx = _context(dgp, model, reference=model)
    interventions = [NaivePrompting(), OverPrompting(("color", "size"), (0.5,)), EmbedderPatching()]
    table, images = evaluate_interventions(model, interventions, ["11", "01"], ctx, None, N, STEPS,
                                           torch.Generator().manual_seed(0))
    assert len(table) == 2 * 4 and images.shape[0] == 8 * N
    assert list(table["intervention"][:4]) == ["naive", "over_prompting", "over_prompting", "patching"]
    assert table["score"].tolist() == pytest.approx([0.25] * 8)


def test_bad_input_is_one_clear_error(dgp, model):
    ctx = _context(dgp, model)
    with pytest.raises(InterventionError, match="over_prompting.scales is empty"):
        OverPrompting(("color",), ())
    with pytest.raises(InterventionError, match="linear.alphas is empty"):
        LinearLatentIntervention(alphas=())
    with pytest.raises(InterventionError, match="embedding_shift.alphas is empty"):
        EmbeddingShift(alphas=())
    with pytest.raises(InterventionError, match="unknown concept 'shape'"):
        OverPrompting(("shape",)).variants("11", ctx)
    with pytest.raises(InterventionError, match="no concept embedding site 'mid.hook_nope'"):
        LinearLatentIntervention(sites=("mid.hook_nope",)).variants("11", ctx)
    with pytest.raises(InterventionError, match="reference checkpoint"):
        EmbedderPatching().variants("11", ctx)
    with pytest.raises(InterventionError, match="cfg_dropout"):
        ClassifierFreeGuidance().variants("11", ctx)
    with pytest.raises(InterventionError, match="both boosted and suppressed"):
        LinearLatentIntervention(boost=("color",), suppress=("color",))
    no_canon = InterventionContext(**{**ctx.__dict__, "canonical_prompt": None})
    with pytest.raises(InterventionError, match="no canonical prompts"):
        LinearLatentIntervention().variants("11", no_canon)
    with pytest.raises(ValueError, match="unknown target class '2'"):
        build_variants([NaivePrompting()], ["2"], ctx)
    bad_site = Variant("custom", "x", dgp.class_prompt("11"), edits=(LatentEdit("down.9.hook_concept", lambda h, k: h),))
    with pytest.raises(HookNameError, match="no hook point 'down.9.hook_concept'"):
        _sample(model, [bad_site])
    assert not any(hp.has_hooks for hp in hook_points(model.net).values())


def test_plain_variants_sample_the_conditional_model_under_either_guidance_convention(dgp, model):
    # Under `diffusers` a guidance scale of 0 is the unconditional model; a variant without guidance (naive,
    # over-prompting, latent edits, patching) must still sample the conditional one, as under `ho_salimans`.
    ctx = _context(dgp, model, cfg_trained=True)
    naive = [v for _, v in build_variants([NaivePrompting()], ["11"], ctx)]
    guided = [v for _, v in build_variants([ClassifierFreeGuidance((0.0, 1.0), "diffusers")], ["11"], ctx)]
    assert naive[0].guidance_scale is None and torch.equal(naive[0].prompt, guided[0].prompt)

    def sample(variants):
        return sample_variants(model, variants, N, STEPS, torch.Generator().manual_seed(5), torch.zeros(4),
                               seeds=[11] * len(variants))

    old = model.guidance_convention
    try:
        model.guidance_convention = "ho_salimans"
        plain_hs = sample(naive)
        model.guidance_convention = "diffusers"
        plain_d, cfg_d = sample(naive), sample(guided)
    finally:
        model.guidance_convention = old
    assert torch.equal(plain_hs, plain_d)  # the convention does not change plain conditional sampling
    assert torch.equal(cfg_d[N:], plain_d)  # diffusers w = 1: the plain conditional model
    assert not torch.allclose(cfg_d[:N], plain_d)  # diffusers w = 0: the unconditional model


@pytest.mark.parametrize("preset", ["hidden-emergence-paper-tiny", "hidden-underspecified-paper-tiny",
                                    "hidden-guidance-paper-tiny", "hidden-emergence-paper"])
def test_the_paper_setup_presets_over_prompt_with_the_authors_colors(preset):
    from conceptlab.experiments.loading import load_config

    over = load_config(preset).eval.interventions.over_prompting
    assert [tuple(c) for c in over.colors] == list(AUTHORS_BLUE_COLORS)


def test_latent_edits_follow_the_activations_device(dgp, model):
    """Directions and embeddings are computed once (on the CPU); the edit must move them to the activation's device.
    The meta device stands in for an accelerator: mixing it with CPU tensors raises, as CUDA does (the GPU device
    check found `linear` failing so)."""
    ctx = _context(dgp, model, reference=_micro_model(1))
    name = "down.0.blocks.0.hook_concept"
    h = concept_embeddings(model, dgp.class_prompt("11")[None])[name].to("meta")
    for intervention in (LinearLatentIntervention(), EmbeddingShift(boost=("color",), suppress=("size",)),
                         EmbedderPatching()):
        for variant in intervention.variants("11", ctx):
            (edit,) = variant.edits
            out = edit.fn(h, hook_points(model.net)[name])
            assert out.device.type == "meta" and out.shape == h.shape, intervention
