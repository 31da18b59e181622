"""`--findings-seed SEED` (tests/acceptance/conftest.py): every config a findings test loads gets the sweep's seed
keys set to SEED; without the option the configs keep their own seeds. Loads configs only (no training, < 1 s);
run it with and without the option to check both branches."""

from conceptlab.experiments import loading
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.sweep import SEED_KEYS


def _seeds(cfg) -> dict[str, int]:
    return {key: getattr(getattr(cfg, key.split(".")[0]), key.split(".")[1]) for key in SEED_KEYS.values()}


def test_findings_seed_reaches_every_seed_key_of_a_loaded_config(request):
    seed = request.config.getoption("--findings-seed")
    cfg = load_config("hidden-guidance-tiny", ["train.steps=10"])  # this module's name: patched under the option
    own = loading.load_config("hidden-guidance-tiny", ["train.steps=10"])  # the loader itself: never patched
    assert cfg.train.steps == 10  # the test's own overrides are kept
    expected = _seeds(own) if seed is None else dict.fromkeys(SEED_KEYS.values(), seed)
    assert _seeds(cfg) == expected, (seed, _seeds(cfg))
