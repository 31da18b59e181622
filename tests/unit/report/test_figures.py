"""Figures fit for a paper: human names in every label and legend (no class codes, no snake_case), every reference
line in a legend, time encoded in trajectories, the valid-image rule applied and stated, the learning time marked
where the rule puts it, a poor fit flagged, layouts at column/page width, PNG + PDF written."""

import matplotlib

matplotlib.use("Agg")  # the test process draws to files only (the package never sets a backend)

import re

import numpy as np
import pandas as pd
import pytest
import matplotlib.pyplot as plt
from matplotlib.collections import PathCollection

from conceptlab.analysis.concept_space import learning_times
from conceptlab.report.abstraction_figures import plot_abstractions
from conceptlab.report.emergence_figures import plot_intervention_scores, plot_trajectory_turn
from conceptlab.report.figures import plot_accuracy, plot_concept_space, plot_vlb_terms
from conceptlab.report.save import save_figure
from conceptlab.report.style import PAGE
from conceptlab.report.sweep_figures import plot_region_accuracy

NAMES = {"00": "red large", "01": "red small", "10": "blue large", "11": "blue small"}
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


def texts(fig) -> list[str]:
    """Every piece of text a reader sees: titles, labels, tick labels, legend entries, figure texts."""
    out = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return [t for t in out if t.strip()]


def legend_texts(fig) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return [t.get_text() for leg in legends for t in leg.get_texts()]


def concept_table(steps=(100, 200, 300, 400, 500, 600), valid=None) -> pd.DataFrame:
    """A concept-space table of four classes learning over `steps` (class 11 held out); `valid` (class, step) →
    valid fraction."""
    rows = []
    for code in NAMES:
        for k, step in enumerate(steps):
            progress = (k + 1) / len(steps)
            for i, concept in enumerate(("color", "size")):
                target = int(code[i])
                p_one = 0.5 + (target - 0.5) * progress
                vf = (valid or {}).get((code, step), 1.0)
                rows.append({"step": step, "class": code, "split": "held_out" if code == "11" else "train",
                             "concept": concept, "target": target, "p_one": p_one if vf > 0 else np.nan,
                             "accuracy": min(1.0, progress * 2) if code != "11" else progress ** 2,
                             "valid_fraction": vf, "n": 32, "class_name": NAMES[code]})
    return pd.DataFrame(rows)


def test_concept_space_names_classes_encodes_time_and_hides_points_from_few_valid_images():
    table = concept_table(valid={("11", 100): 1 / 32, ("11", 200): 0.0, ("01", 300): 0.5})
    fig = plot_concept_space(table, ["color", "size"], value_names={"color": ["red", "blue"], "size": ["large", "small"]})
    shown = texts(fig)
    assert {"red large", "red small", "blue large", "blue small (held out)"} <= set(legend_texts(fig))
    assert not any(t in NAMES for t in shown)  # no bare class code anywhere
    assert "P(blue)" in shown and "P(small)" in shown
    assert "training step" in shown  # the colour bar: time
    assert any("direction of training" in t for t in legend_texts(fig))
    arrows = [a for a in fig.axes[0].texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) >= 4 * 3  # arrows along every trajectory
    # 1 of 32 valid and 0 valid are hidden (2 points); half valid is drawn, smaller than a fully valid point
    caption = next(t for t in shown if "hidden" in t)
    assert "fewer than 25%" in caption and "(2 of 24 hidden" in caption
    points = [c for c in fig.axes[0].collections if isinstance(c, PathCollection) and len(c.get_offsets()) > 1]
    assert sum(len(c.get_offsets()) for c in points) == 24 - 2
    sizes = np.concatenate([c.get_sizes() for c in points])
    assert sizes.min() < sizes.max()  # area ∝ valid images
    matplotlib.pyplot.close(fig)


def test_accuracy_marks_the_learning_time_where_the_smoothed_rule_puts_it():
    table = concept_table()
    times = learning_times(table, threshold=0.9, smoothing=3, stay=2)
    fig = plot_accuracy(table, 0.9, times, smoothing=3, stay=2)
    legend = legend_texts(fig)
    assert "threshold 0.9" in legend and "learning time, training classes" in legend
    assert "training classes: mean, smoothed (3)" in legend
    assert any("paper's smoothed rule: trailing mean over 3 checkpoints ≥ 0.9 for 2 checkpoints" in t
               for t in texts(fig))
    lt = float(times[(times["split"] == "train") & (times["concept"] == "color")]["learning_time"].iloc[0])
    vertical = [line for line in fig.axes[0].lines if len(set(line.get_xdata())) == 1
                and float(line.get_xdata()[0]) == lt]
    assert vertical, f"no vertical line at the learning time {lt}"
    assert {"red large", "blue small (held out)"} <= set(legend)
    assert not [t for t in texts(fig) if SNAKE.search(t) and "held_out" in t]
    assert fig.get_figwidth() <= PAGE
    matplotlib.pyplot.close(fig)


def scores(seeds=(0, 1, 2)) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for name in ("naive", "over_prompting", "embedding_shift"):
            for step in (100, 200, 300, 400):
                rows.append({"target": "11", "target_name": "blue small", "intervention": name, "step": step,
                             "score": min(1, step / 400 + 0.1 * seed), "n": 24, "seed": seed})
    return pd.DataFrame(rows)


def test_intervention_scores_tell_seeds_apart_and_put_every_line_in_the_legend():
    fig = plot_intervention_scores(scores(), 0.5)
    legend = legend_texts(fig)
    assert {"naive prompting", "over-prompting", "embedding shift", "seed 0", "seed 1", "seed 2",
            "threshold 0.5"} <= set(legend)
    assert not any(SNAKE.search(t) for t in texts(fig))
    ax = fig.axes[0]
    assert "held-out blue small (11), 3 seeds" == ax.get_title()
    naive = [line for line in ax.lines if line.get_color() == "#000000" and len(line.get_xdata()) == 4]
    assert len({(line.get_linestyle(), line.get_marker()) for line in naive}) == 3  # one style per seed
    matplotlib.pyplot.close(fig)
    single = plot_intervention_scores(scores((0,)).drop(columns="seed"), 0.5, {"11": {"over_prompting": 300.0}})
    assert {"Wilson 95% interval", "emergence step (its colour)"} <= set(legend_texts(single))
    matplotlib.pyplot.close(single)


@pytest.mark.parametrize("r2, flagged", [(0.28, True), (0.93, False)])
def test_trajectory_fit_is_drawn_with_its_r2_and_flagged_when_poor(r2, flagged):
    steps = np.arange(100, 1100, 100.0)
    points = np.stack([np.linspace(0.1, 0.95, 10), np.linspace(0.9, 1.0, 10)], 1)
    fit = (steps, points * 0.98, r2)
    fig = plot_trajectory_turn(steps, points, ["color", "size"], "11", 400.0, (300.0, 500.0), fit, "blue small",
                               ["blue", "small"], hidden=1)
    title = fig.axes[1].get_title()
    assert f"R² = {r2:.2f}" in title
    assert ("does not describe the data" in title) is flagged
    legend = legend_texts(fig)
    assert {"P(blue), measured", "P(blue), gated-flow fit", "largest turn, step 400",
            "memorization, steps 300–500", "target: blue small (11)"} <= set(legend)
    assert any("not drawn" in t for t in texts(fig))  # the hidden checkpoint is said
    matplotlib.pyplot.close(fig)
    one = plot_trajectory_turn(steps, points, ["color", "size"], "11", 400.0, (300.0, 300.0), fit, "blue small",
                               ["blue", "small"])
    assert "memorization, step 300" in legend_texts(one)  # one checkpoint, not "steps 300–300"
    matplotlib.pyplot.close(one)
    pinned = plot_trajectory_turn(steps, points, ["color", "size"], "11", 400.0, None, (*fit, ["a", "t0"]))
    assert pinned.axes[1].get_title().endswith("a, t0 at the search bound")  # the best the box allowed, said
    matplotlib.pyplot.close(pinned)


def test_abstractions_panels_wrap_two_across_with_human_names():
    rows, commits = [], []
    for m in ("mutual_information", "mutual_information_bound", "forking_entropy", "linear_probe"):
        for a in ("wall_hue", "shape"):
            for tau in (0.0, 0.5, 1.0):
                rows.append({"measure": m, "attribute": a, "tau": tau, "value": tau, "reference": 1.0})
            commits.append({"measure": m, "attribute": a, "commitment_tau": 0.5 if a == "shape" else 0.3})
    fig = plot_abstractions(pd.DataFrame(rows), pd.DataFrame(commits))
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(axes) == 4 and len({round(ax.get_position().y0, 2) for ax in axes}) == 2  # 2×2, not 1×4
    assert fig.get_figwidth() <= PAGE
    shown = texts(fig)
    assert "wall hue" in legend_texts(fig) and not any("wall_hue" in t for t in shown)
    assert any(t.startswith("forking entropy; commits: wall hue → shape") for t in shown)
    assert any("commitment τ" in t for t in legend_texts(fig))
    matplotlib.pyplot.close(fig)


def test_region_accuracy_draws_no_error_bar_from_one_run_and_names_the_swept_key():
    summary = pd.DataFrame([{"data.color_separation": v, "region": r, "runs": 1,
                             **{f"{m}_mean": 0.5 for m in ("x", "y", "joint")},
                             **{f"{m}_std": np.nan for m in ("x", "y", "joint")}}
                            for v in (0.3, 0.8) for r in ("train", "held_out")])
    fig = plot_region_accuracy(summary)
    shown = [t.replace("\n", " ") for t in texts(fig)]
    assert "colour separation Δc = 0.3" in shown and not any("data.color" in t for t in shown)
    assert any("none where a setting has one run" in t for t in shown)
    assert {"training region", "held-out region"} <= set(legend_texts(fig))
    checked = 0
    for ax in fig.axes:
        for container in ax.containers:
            bars = getattr(container, "errorbar", None)
            if bars is not None:
                checked += 1
                segments = [s for c in bars.lines[2] for s in c.get_segments()]
                assert all(np.asarray(s).size == 0 or np.isnan(np.asarray(s)).any() for s in segments)  # none drawn
    assert checked == 3 * 2  # three panels, two regions    matplotlib.pyplot.close(fig)


def test_vlb_terms_name_every_term_and_schedule_end_and_mark_the_phase_end():
    steps = np.arange(0, 10_000, 100)
    gamma_0 = -5 - steps / 1000
    log = pd.DataFrame({"step": steps, "diffusion_bpd": np.full(len(steps), 0.5), "prior_bpd": np.full(len(steps), 1e-3),
                        "recon_bpd": np.exp(gamma_0) * 7.2e5 - 8.6, "gamma_0": gamma_0, "gamma_1": np.full(len(steps), 10.0)})
    fig = plot_vlb_terms(log, 6300)
    assert set(legend_texts(fig)) == {"diffusion", "prior", "reconstruction", "γ(0)", "γ(1)"}
    assert any("from step 6,300" in t for t in texts(fig)), texts(fig)
    assert fig.axes[0].get_yscale() == "symlog"  # the Gaussian reconstruction term goes below zero
    assert not [t for t in texts(fig) if SNAKE.search(t)], texts(fig)
    bare = plot_vlb_terms(log.drop(columns=["gamma_0", "gamma_1"]), None)  # a fixed schedule's log, no phase end
    assert len(bare.axes) == 1 and not any("from step" in t for t in texts(bare))


def test_save_figure_writes_png_and_a_vector_pdf(tmp_path, vector_figures):
    fig = plot_intervention_scores(scores((0,)), 0.5)
    path = save_figure(fig, tmp_path / "figures" / "scores.png")
    assert path == tmp_path / "figures" / "scores.png"
    assert path.read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "figures" / "scores.pdf").read_bytes().startswith(b"%PDF")
    svg = save_figure(plot_intervention_scores(scores((0,)), 0.5), tmp_path / "s.png", vector=(".svg",))
    assert b"<svg" in svg.with_suffix(".svg").read_bytes()[:500]


def test_vector_formats_follow_the_environment_and_a_figure_saved_again_leaves_no_stale_vector(tmp_path, monkeypatch,
                                                                                            figures):
    from conceptlab.report.save import save_figures, vector_formats

    figures = tmp_path / "figures"
    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "svg, PDF,svg")
    assert vector_formats() == (".svg", ".pdf")
    save_figures({"scores.png": plot_intervention_scores(scores((0,)), 0.5)}, figures)
    assert sorted(p.name for p in figures.iterdir()) == ["scores.pdf", "scores.png", "scores.svg"]
    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "")  # PNG only: the older vector files would show another figure
    assert vector_formats() == ()
    save_figures({"scores.png": plot_intervention_scores(scores((0,)), 0.5)}, figures)
    assert sorted(p.name for p in figures.iterdir()) == ["scores.png"]
    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "pdf,eps")
    plt.close("all")
    with pytest.raises(ValueError, match="CONCEPTLAB_VECTOR_FIGURES='pdf,eps': unknown format 'eps'"):
        save_figures({"other.png": plot_intervention_scores(scores((0,)), 0.5)}, figures)
    assert sorted(p.name for p in figures.iterdir()) == ["scores.png"]  # nothing written
    assert plt.get_fignums() == []  # and the figure closed
    monkeypatch.delenv("CONCEPTLAB_VECTOR_FIGURES")
    assert vector_formats() == (".pdf",)  # outside the tests: PDF


def test_a_figure_saved_where_the_user_names_keeps_what_lies_beside_it(tmp_path, monkeypatch):
    """Only folders the package owns lose a stale vector file (`save_figures`): a path the user names (`--figure`)
    keeps a file of the same name beside it, and a vector target is written whatever the setting."""
    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "")
    own = tmp_path / "x.svg"
    own.write_text("<svg>the user's own</svg>")
    save_figure(plot_intervention_scores(scores((0,)), 0.5), tmp_path / "x.png")
    assert own.read_text() == "<svg>the user's own</svg>" and (tmp_path / "x.png").is_file()
    target = save_figure(plot_intervention_scores(scores((0,)), 0.5), tmp_path / "y.pdf", remove_stale=True)
    assert target.read_bytes().startswith(b"%PDF")  # the file asked for, not removed as stale
    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "svg")
    save_figure(plot_intervention_scores(scores((0,)), 0.5), tmp_path / "z.pdf", remove_stale=True)
    assert (tmp_path / "z.pdf").read_bytes().startswith(b"%PDF") and b"<svg" in (tmp_path / "z.svg").read_bytes()[:500]


def test_loss_axis_is_logarithmic_only_when_every_loss_is_positive_over_a_decade():
    """A VDM's loss in bits per dimension goes below 0 (the Gaussian reconstruction term): a log axis would hide
    the rest of training, so the axis turns symmetric-log and shows the lowest loss. Positive losses within a factor
    of 10 (a short run) get a linear axis: its tick labels are plain numbers."""
    from conceptlab.report.figures import plot_loss

    steps = np.arange(0, 20000, 50)
    loss = np.exp(-5 - 9 * steps / 20000) * 7.2e5 - 8.6 + 2.01  # from thousands down to about −5.9
    fig = plot_loss(pd.DataFrame({"step": steps, "loss": loss}))
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert ax.get_yscale() != "log" and low <= loss.min() and high >= loss.max()
    matplotlib.pyplot.close(fig)
    positive = plot_loss(pd.DataFrame({"step": steps, "loss": np.linspace(1.0, 0.05, len(steps))}))
    assert positive.axes[0].get_yscale() == "log"
    matplotlib.pyplot.close(positive)
    narrow = plot_loss(pd.DataFrame({"step": steps, "loss": np.linspace(0.6, 0.54, len(steps))}))
    narrow.canvas.draw()
    labels = [t.get_text() for t in narrow.axes[0].get_yticklabels() if t.get_text()]
    assert narrow.axes[0].get_yscale() == "linear" and labels and not any("$" in t for t in labels), labels
    matplotlib.pyplot.close(narrow)


def test_intervention_scores_draw_one_line_per_run_when_runs_share_a_seed():
    """Two runs of seed 0 (another evaluation setting, say) are two lines in seed 0's style, never one line that
    zig-zags between them; the title counts runs and seeds."""
    both = pd.concat([scores((0, 1)).assign(run=lambda f: "r" + f["seed"].astype(str)),
                      scores((0,)).assign(run="r0-other", score=0.05)], ignore_index=True)
    fig = plot_intervention_scores(both, 0.5)
    ax = fig.axes[0]
    assert ax.get_title() == "held-out blue small (11), 3 runs of 2 seeds"
    naive = [line for line in ax.lines if line.get_color() == "#000000" and len(line.get_xdata()) > 1]
    assert len(naive) == 3
    for line in naive:  # one point per step
        steps = np.asarray(line.get_xdata())
        assert len(steps) == len(set(steps.tolist())) == 4
    assert len({(line.get_linestyle(), line.get_marker()) for line in naive}) == 2  # styled by seed
    assert {"seed 0 (2 runs)", "seed 1"} <= set(legend_texts(fig))
    matplotlib.pyplot.close(fig)


def test_learning_time_plots_the_median_over_every_run_and_marks_a_median_not_reached():
    """0.3: one run of three learned (at 100), 0.9: all three (400–500). The mean over the runs that learned would
    put 0.3 (100) below 0.9 (450); the median over every run is not reached at 0.3: drawn hollow at the top."""
    from conceptlab.analysis.concept_signal import learning_time_by_axis
    from conceptlab.report.sweep_figures import plot_learning_time_vs_signal

    long = pd.DataFrame({"run_id": list("abcdef"), "axis_value": [0.3] * 3 + [0.9] * 3, "concept": "color",
                         "concept_signal": [5.0] * 3 + [15.0] * 3,
                         "learning_time": [100.0, np.nan, np.nan, 400.0, 450.0, 500.0]})
    fig = plot_learning_time_vs_signal(long, learning_time_by_axis(long), "data.color_separation")
    left = fig.axes[0]
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert any("median" in t for t in legend) and not any("mean" in t for t in legend)
    assert any("median not reached" in t for t in legend)
    at = {}  # axis value → (height, filled) of the median markers
    for line in left.get_lines():
        if line.get_marker() in ("o", "^") and line.get_linestyle() == "None":
            for x, y in zip(line.get_xdata(), line.get_ydata()):
                at[round(float(x), 3)] = (float(y), line.get_markerfacecolor() != "none")
    assert at[0.9] == (450.0, True)
    height, filled = at[0.3]
    assert height > 450.0 and not filled  # above 0.9's, hollow: not reached
    assert "learned earlier" not in fig.axes[1].get_title()  # a neutral title, whatever the data show
    matplotlib.pyplot.close(fig)
