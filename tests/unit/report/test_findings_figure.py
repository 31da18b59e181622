"""A finding's figure: a seed that passes is filled whether or not its value is censored (drawn on the 'never'
line), as the legend under the figure says."""

import matplotlib

matplotlib.use("Agg")  # the test process draws to files only (the package never sets a backend)

import matplotlib.pyplot as plt

from conceptlab.report.findings import finding_figure


def test_a_censored_seed_that_passes_is_filled_and_one_that_fails_is_open():
    inf = float("inf")
    seeds = [{"seed": 100, "value": inf, "control": 500.0, "passed": True, "note": ""},
             {"seed": 101, "value": 700.0, "control": 500.0, "passed": True, "note": ""},
             {"seed": 102, "value": inf, "control": inf, "passed": False, "note": ""}]
    crit = {"name": "c", "direction": "greater", "control": {"path": "a.b"}, "threshold": None, "seeds": seeds,
            "passed": 2, "of": 3, "value": {"path": "emergence.step"}}
    fig = finding_figure({"criteria": [crit]})
    ax = fig.axes[0]
    value_marks = [c for c in ax.collections if abs(c.get_offsets()[0][0] % 1 - 0.92) < 0.01]  # x = seed − 0.08
    filled = {round(float(c.get_offsets()[0][0] + 0.08)): c.get_facecolors()[:, 3].sum() > 0 for c in value_marks}
    assert filled == {0: True, 1: True, 2: False}
    legend = next(t.get_text() for t in fig.texts if "filled" in t.get_text())
    assert "filled: the seed passes" in legend.replace("\n", " ")
    plt.close(fig)


def test_a_statistic_left_open_by_censored_seeds_is_shown_as_its_range():
    """A criterion over the seeds is decided at the least favourable ends of each side's range (censored seeds at any
    step past the last seen); its text shows the ranges, not the one end it was decided at."""
    from conceptlab.report.findings import control_text, value_text

    c = {"seeds": [100, 101, 102, 103, 104], "control": {"runs": "x"},
         "statistic": {"name": "median_absolute_deviation", "value": 200.0, "control": 0.0,
                       "value_range": [0.0, 200.0], "control_range": [0.0, 400.0]}}
    assert value_text(c) == "0–200 (MAD over 5 seeds)" and control_text(c) == "0–400 (MAD over 5 seeds)"
    closed = {**c, "statistic": {**c["statistic"], "value_range": [200.0, 200.0], "control_range": None}}
    assert value_text(closed) == "200 (MAD over 5 seeds)" and control_text(closed) == "0 (MAD over 5 seeds)"
    unbounded = {**c, "statistic": {**c["statistic"], "value_range": [0.0, float("inf")]}}
    assert value_text(unbounded) == "0–∞ (MAD over 5 seeds)"  # a spread, not a step that never came
