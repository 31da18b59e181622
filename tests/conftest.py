"""Test layout and order.

The tests mirror the package: `unit/` (one module or function at a time, seconds; `make test-fast`), `integration/`
(whole runs, sweeps, the CLI and plug-ins on micro presets) and `acceptance/` (the findings, at CI size; minutes
each). Each test gets the marker of its folder (`-m unit`, `-m "not acceptance"`).

Order for two xdist workers (`make test`: `-n 2 --dist loadgroup --maxschedchunk 1`; a module marked
`xdist_group` runs on one worker, so its module- or session-scoped runs are built once: every module with such a
fixture is marked, and tests/integration/test_test_harness.py checks that the installed pytest-xdist honours the marks): the findings tests take
minutes each, everything else seconds. xdist hands each worker two tests first, then queues the next test on the
worker whose running test ends first, so the findings (acceptance) tests go first in an order that splits them evenly (seconds
at one thread, measured in one `make test` on an AMD EPYC with native bf16; an Intel Xeon without it, in fp32,
took about 2.5× as long for the same tests):

- worker 1: guidance after the transition (≈131: 1,000 steps, CFG doubles sampling, and ≈17 of it training the
  shared concept probe) + underspecification twins (≈56), then composition (≈30);
- worker 2: commitment-order hierarchy (≈72, no concept probe) + color-first (≈54: it asks for the probe after the
  guidance test has cached it), then size-first (≈51) and hidden capability (≈62);
- the rest to whichever is free. Two tests that need the probe started together leave one waiting on the probe's
  lock with a core idle, hence the order.

Serial runs are unaffected apart from the order."""

import pytest

LAYERS = ("unit", "integration", "acceptance")
FIRST = [
    "test_guidance_helps_only_after_over_prompting_reaches_the_held_out_class",
    "test_masked_color_prompts_hide_the_held_out_class_from_naive_prompting_but_not_from_over_prompting",
    "test_three_level_hierarchy_commits_in_signal_order_under_every_measure",
    "test_larger_concept_signal_is_learned_first[concept-signal-color-first-tiny-color-size]",
    "test_larger_concept_signal_is_learned_first[concept-signal-size-first-tiny-size-color]",
    "test_over_prompting_reaches_the_held_out_class_before_naive_prompting",
    "test_composition_generalizes_where_interpolation_fails",
    "test_the_representation_becomes_a_torus_and_its_code_is_factorized_beyond_untrained_and_pixels",
]


def pytest_collection_modifyitems(session, config, items):
    """Findings tests first (those named in FIRST in that order, any others after them), the rest as collected."""
    def rank(item) -> int:
        if "/acceptance/" not in item.path.as_posix():
            return len(FIRST) + 1
        return FIRST.index(item.name) if item.name in FIRST else len(FIRST)

    for item in items:
        for layer in LAYERS:
            if f"/tests/{layer}/" in item.path.as_posix():
                item.add_marker(getattr(pytest.mark, layer))
    items.sort(key=rank)  # stable


# -- a CelebA folder in the official layout, for the `celeba` data kind's tests ----------------------------------------
CELEBA_NAMES = ["5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips",
                "Big_Nose", "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby",
                "Double_Chin", "Eyeglasses", "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male",
                "Mouth_Slightly_Open", "Mustache", "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin",
                "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks", "Sideburns", "Smiling", "Straight_Hair",
                "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick", "Wearing_Necklace",
                "Wearing_Necktie", "Young"]


def write_fake_celeba(root, per_class: dict, concepts=("Male", "Wearing_Hat"), seed: int = 0,
                      partition: bool = True, csv: bool = False):
    """A folder laid out like CelebA (list_attr_celeba.txt or .csv, img_align_celeba/ of 178×218 JPEGs, optionally
    list_eval_partition.txt): `per_class[code]` = (training, other) image counts of each class of `concepts`. Faces
    are drawn so the attributes show: a skin-toned oval on a random background; Male darkens the jaw (a beard);
    Wearing_Hat puts a saturated band over the head; Smiling a light mouth. Other attributes are random labels."""
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    folder = root / "img_align_celeba"
    folder.mkdir(parents=True, exist_ok=True)
    rows, parts, k = [], [], 0
    for code, (n_train, n_other) in sorted(per_class.items()):
        for j in range(n_train + n_other):
            k += 1
            name = f"{k:06d}.jpg"
            values = rng.integers(0, 2, len(CELEBA_NAMES))
            for c, d in zip(concepts, code):
                values[CELEBA_NAMES.index(c)] = int(d)
            on = {n: bool(v) for n, v in zip(CELEBA_NAMES, values)}
            im = Image.new("RGB", (178, 218), tuple(int(x) for x in rng.integers(40, 220, 3)))
            draw = ImageDraw.Draw(im)
            skin = tuple(int(x) for x in np.array([225, 185, 160]) + rng.integers(-20, 20, 3))
            cx, cy = 89 + int(rng.integers(-6, 7)), 120 + int(rng.integers(-6, 7))
            draw.ellipse([cx - 45, cy - 60, cx + 45, cy + 60], fill=skin)
            if on["Male"]:
                draw.chord([cx - 45, cy - 10, cx + 45, cy + 60], 0, 180, fill=(60, 45, 35))
            if on["Smiling"]:
                draw.rectangle([cx - 20, cy + 25, cx + 20, cy + 33], fill=(250, 250, 250))
            if on["Wearing_Hat"]:
                hat = tuple(int(x) for x in rng.permutation([230, 30, int(rng.integers(30, 230))]))
                draw.rectangle([cx - 55, cy - 85, cx + 55, cy - 35], fill=hat)
            pixels = np.asarray(im, dtype=np.int16) + rng.integers(-8, 9, (218, 178, 3))
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / name, quality=92)
            rows.append((name, values))
            parts.append((name, 0 if j < n_train else 2))
    if csv:
        lines = ["image_id," + ",".join(CELEBA_NAMES)]
        lines += [name + "," + ",".join("1" if v else "-1" for v in values) for name, values in rows]
        (root / "list_attr_celeba.csv").write_text("\n".join(lines) + "\n")
    else:
        lines = [str(len(rows)), " ".join(CELEBA_NAMES)]
        lines += [name + " " + " ".join(f"{'1' if v else '-1':>2}" for v in values) for name, values in rows]
        (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    if partition:
        (root / "list_eval_partition.txt").write_text("".join(f"{n} {p}\n" for n, p in parts))
    return root


@pytest.fixture(scope="session")
def fake_celeba():
    """`write_fake_celeba` (call it with a folder and per-class counts)."""
    return write_fake_celeba
