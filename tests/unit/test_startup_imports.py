"""What every command pays before it works: importing the config (and with it the studies) must not import the
heavy libraries only some analyses use — ripser (and scikit-learn, which it imports), scipy.stats,
scipy.integrate, scipy.optimize, scipy.ndimage — each is imported where it is used (`bench/startup.py`: 1.50×
faster start-up, docs/benchmarks.md). Checked in a fresh process, whose modules nothing else has imported."""

import json
import subprocess
import sys

HEAVY = ("ripser", "sklearn", "scipy.stats", "scipy.integrate", "scipy.optimize", "scipy.ndimage")


def test_importing_the_config_imports_no_heavy_analysis_library():
    code = ("import sys, json, conceptlab.experiments.config, conceptlab.cli; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], done.stdout


def test_the_analyses_that_use_them_still_run():
    """The moved imports resolve where they are used (one small call each)."""
    import numpy as np
    import pandas as pd

    from conceptlab.analysis import commitment, concept_space, emergence_stats, finding_criteria, geometry, phenomenology

    assert emergence_stats.sign_test([(1, 2), (1, 3), (-2, -1)])["positive"] == 2
    assert emergence_stats.median_interval([(0, 1), (1, 2), (2, 3)])["median_low"] == 1
    assert finding_criteria.trend([1, 2, 3], [3, 2, 1]) == -1
    agreement = commitment.measure_agreement(pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [1.0, 3.0, 2.0]}))
    assert agreement["spearman"].iloc[0] == 0.5
    curve = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert commitment.departure(curve, [c + 0.5 for c in curve], margin=0.1, trained_stderr=[0.01] * 5,
                                control_stderr=[0.01] * 5)["departs"]
    assert concept_space.authors_learning_index(np.array([0, 0, 0, 1, 1, 1, 1.0]), sigma=0.0, consistent=3) == 4
    steps = np.linspace(0, 100, 8)
    path = phenomenology.simulate(phenomenology.GatedFlowParams(a=2.0, k=0.2, t0=50.0, eta=0.1), steps)
    assert path.shape == (8, 2) and phenomenology.fit_independent_sigmoids(steps, path) is not None
    angle = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    circle = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    assert geometry.persistent_homology(circle, max_dim=1, n_components=2)["betti"] == (1, 1)
