"""Write docs/schema.md, the results store's tables and columns, from real run folders.

    PYTHONPATH=src python scripts/schema_doc.py                  # trains the micro runs in a temporary folder
    PYTHONPATH=src python scripts/schema_doc.py --runs /tmp/r    # keeps them there (reused when already made)

It trains one tiny run of each data kind with the shipped micro presets (`micro` with every intervention on,
`bumps-micro` with homology over training and bump counting, `abstractions-micro`, `celeba-micro` on drawn faces;
seconds each on a CPU), opens the store over them
and takes every table's columns and DuckDB types from it; the descriptions (units, ranges, meaning, the files they
come from) are the hand-written ones below, keyed by column. A column the store has and this script does not
describe stops it with the list of them, so the doc cannot silently miss one; `tests/integration/store/
test_schema_doc.py` checks the committed doc against a fresh set of micro runs.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "schema.md"

# kind → (preset, overrides): one run of each, together exposing every built-in table
RUNS = {
    "shapes": ("micro", ["eval.interventions.samples=2", "eval.interventions.over_prompting.scales=[0.5]",
                         "eval.interventions.linear.alphas=[1.0]", "diffusion.cfg_dropout=0.2",
                         "eval.interventions.cfg.scales=[2.0]"]),
    "bumps": ("bumps-micro", ["eval.geometry.homology_over_training=true", "eval.composition.count_peaks=true"]),
    "shapes3d": ("abstractions-micro", []),
    "celeba": ("celeba-micro", []),  # on a folder of drawn faces in CelebA's layout (`write_drawn_celeba`)
}
KINDS = tuple(RUNS)
SECTIONS = ("data", "model", "diffusion", "train", "eval")

# -- the runs table ---------------------------------------------------------------------------------------------------
# column (or pattern, `<...>` standing for a name part) → (file it comes from, unit / range, meaning)
RUN_COLUMNS = {
    "run_id": ("the folder", "text", "the run folder's path relative to the store's root (`sweep/0003-ab12cd`); every "
               "view's first column, the key to join on"),
    "status": ("summary.json, status.json", "`done`, `queued`, `running`, `failed`, `incomplete`, ...",
               "`done` when the run wrote its summary; else the state an executor last wrote to `status.json`, or "
               "`incomplete` (a run started outside an executor and not finished)"),
    "error": ("status.json", "text or NULL", "the last error line of a run that is not done (NULL for a done run)"),
    "path": ("the folder", "text", "the run folder's path as found (the root as given, joined with `run_id`)"),
    "name": ("config.yaml", "text", "the config's top-level `name` key (the only config key without a section, so "
             "without a dot)"),
    "kind": ("summary.json", "`shapes`, `bumps`, `shapes3d`, `celeba`, or a plug-in's", "the data kind, hence the study that "
             "evaluated the run"),
    "final_step": ("summary.json", "steps", "the last training step (that of the final checkpoint)"),
    "checkpoints": ("summary.json", "count", "checkpoints evaluated (shapes and bumps runs)"),
    "parameters": ("summary.json", "count", "trainable parameters of the network"),
    "device": ("summary.json", "`cpu`, `cuda`, `cuda:0`, ...", "the torch device it trained on"),
    "config_hash": ("summary.json", "16 hex digits", "hash of the training-relevant config; a checkpoint resumes or "
                    "loads only under the same hash"),
    "training_images": ("summary.json", "count", "distinct training images of the data (bumps, shapes3d)"),
    "concept_signal_<concept>": ("summary.json `concept_signal`", "L2 pixel distance ≥ 0",
                                 "the concept's signal (Park et al.): mean L2 distance between noise-free renders "
                                 "with the concept at 0 and at 1, all else equal (on celeba's real images: the mean "
                                 "image change between training classes that differ in the concept alone); a larger "
                                 "signal is learned first"),
    "learning_time_<split>_<concept>": ("summary.json `learning_time`", "steps; NULL = not learned",
                                        "the concept's learning time on the split's classes (`train`, `held_out`): "
                                        "as in the learning_times view"),
    "mean_accuracy_<split>_<concept>": ("summary.json `mean_accuracy`", "[0, 1]",
                                        "the concept's accuracy on the split's classes, averaged over checkpoints"),
    "seconds_<phase>": ("summary.json `seconds`", "seconds (wall clock)",
                        "time the invocation that wrote the summary spent in each phase (`train`, `probe`, each "
                        "measurement, `summarize`, `total`; a control's measurement as `<control>__<measure>`); a "
                        "phase found done on disk when the run resumed counts 0"),
}

# -- the views --------------------------------------------------------------------------------------------------------
# view → (kind, where its rows come from, what one row is, {column or pattern: (unit / range, meaning)})
VIEWS = {
    "concept_space": (
        "shapes", "`concept_space.parquet` (written at the end of a run from the per-checkpoint `eval/step_*.parquet`)",
        "checkpoint × class prompt × concept: where the prompt's generations sit in concept space",
        {
            "step": ("steps", "the checkpoint's training step"),
            "class": ("text: one digit per concept", "the class prompted, one digit per concept in `data.concepts` "
                      "order (`\"10\"`: color 1, size 0)"),
            "split": ("`train`, `held_out`", "whether the class was trained on or held out"),
            "concept": ("text", "the concept read (`color`, `size`, ...)"),
            "target": ("0 or 1", "the class's value of the concept"),
            "p_one": ("probability [0, 1]; NULL: no valid image", "mean probe probability that the concept is 1, "
                      "over the generations the probe reads as valid: the concept-space coordinate"),
            "accuracy": ("[0, 1]", "fraction of the generations read as valid and with the concept at its target value"),
            "valid_fraction": ("[0, 1]", "fraction of the generations the probe reads as a valid object"),
            "n": ("count", "generations per class (`eval.samples_per_class`)"),
            "class_name": ("text", "the class in words (`blue small`)"),
        }),
    "learning_times": (
        "shapes", "`learning_times.parquet`", "split × concept of a run",
        {
            "split": ("`train`, `held_out`", "the classes averaged over"),
            "concept": ("text", "the concept"),
            "learning_time": ("steps; NULL = not learned", "the first checkpoint from which the split's accuracy, "
                              "averaged over its classes and smoothed over `eval.smoothing` checkpoints, stays ≥ "
                              "`threshold` for `eval.stay` checkpoints"),
            "final_accuracy": ("[0, 1]", "the split's accuracy at the last checkpoint"),
            "mean_accuracy": ("[0, 1]", "the split's accuracy averaged over checkpoints"),
            "threshold": ("[0, 1]", "the accuracy the rule asks for (`eval.accuracy_threshold`)"),
        }),
    "interventions": (
        "shapes, with `eval.interventions`", "`interventions.parquet` (from the per-checkpoint "
        "`interventions/step_*.parquet`)", "checkpoint × target class × intervention × variant",
        {
            "step": ("steps", "the checkpoint's training step"),
            "target": ("class code", "the class the intervention tries to generate"),
            "intervention": ("`naive`, `naive_repeats`, `over_prompting`, `linear`, `embedding_shift`, `patching`, "
                             "`cfg`, or a plug-in's", "the way of prompting or editing the model"),
            "variant": ("text", "the variant's label (`color+0.50`, `a1,b0.1`, `w2 (ho_salimans)`)"),
            "guidance_scale": ("≥ 0, in diffusion.guidance_convention; NaN = plain conditional sampling", "the classifier-free guidance scale the variant sampled with"),
            "stream": ("index ≥ 0", "the variant's noise stream: variants with the same stream share their noise "
                       "(paired comparisons)"),
            "n": ("count", "images generated per variant (`eval.interventions.samples`)"),
            "score": ("[0, 1]", "mean over images of Π_k P(concept k = its target value), an image read as invalid "
                      "counting 0"),
            "hit_rate": ("[0, 1]", "fraction of images read as valid with every concept at its target value"),
            "valid_fraction": ("[0, 1]", "fraction of images the probe reads as a valid object"),
            "p_<concept>": ("probability [0, 1]; NULL: no valid image", "mean probability that the concept is 1 over "
                            "the valid images (the concept-space coordinate)"),
            "image_scores": ("list of n values in [0, 1]", "the per-image scores `score` averages (what the "
                             "resampled null of the emergence statistics draws from)"),
            "target_name": ("text", "the target class in words"),
        }),
    "emergence": (
        "shapes, with `eval.interventions`", "`emergence.parquet`",
        "target × intervention × checkpoint: its best variant (an intervention scores as its best variant)",
        {
            "target": ("class code", "the target class"),
            "intervention": ("text", "as in interventions"),
            "step": ("steps", "the checkpoint's training step"),
            "variant": ("text", "the variant with the highest score at this checkpoint"),
            "score": ("[0, 1]", "its score"),
            "hit_rate": ("[0, 1]", "its hit rate"),
            "valid_fraction": ("[0, 1]", "its valid fraction"),
            "n": ("count", "images it was scored on"),
        }),
    "matched_naive": (
        "shapes, with `eval.interventions` (naive prompting and `matched_naive` on)", "`matched_naive.parquet`",
        "target × k × checkpoint: the bias-matched naive baseline of an intervention with k variants",
        {
            "step": ("steps", "the checkpoint's training step"),
            "score": ("[0, 1]", "the best score over naive prompting's noise streams 0 … k−1"),
            "n": ("count", "images per stream"),
            "stream": ("index ≥ 0", "the stream that scored best"),
            "target": ("class code", "the target class"),
            "k": ("count ≥ 1", "variants of the interventions matched (the baseline gets as many tries)"),
        }),
    "composition": (
        "bumps", "`composition.parquet` (from the per-checkpoint `composition/step_*.parquet`)",
        "checkpoint × label region: generation accuracy",
        {
            "step": ("steps", "the checkpoint's training step"),
            "region": ("`train`, `held_out`, `unseen`, ...", "the region of 2D labels generated at"),
            "x": ("[0, 1]", "fraction of generations whose located bump is within `eval.composition.tolerance` "
                  "pixels of the label in x"),
            "y": ("[0, 1]", "the same in y"),
            "joint": ("[0, 1]", "the same in x and y at once"),
            "n": ("count", "labels of the region generated at (at most `eval.composition.labels_per_region`)"),
            "region_size": ("count", "labels the region holds"),
            "x_error": ("pixels ≥ 0", "median absolute x error of the located bumps (wrapped on a torus)"),
            "y_error": ("pixels ≥ 0", "the same in y"),
            "located": ("[0, 1]", "fraction of generations in which the locator found a bump"),
            "single": ("[0, 1]", "fraction of generations with exactly one bump (or one stripe per axis; "
                       "probes.locator.count_peaks); with `eval.composition.count_peaks`, else absent"),
            "joint_single": ("[0, 1]", "fraction of generations both jointly correct and single; with "
                             "`eval.composition.count_peaks`, else absent"),
        }),
    "geometry": (
        "bumps", "`geometry.parquet` (from the per-checkpoint `geometry/step_*.parquet`)",
        "checkpoint: the geometry of the representation of the label grid",
        {
            "step": ("steps", "the checkpoint's training step"),
            "hook": ("hook name", "where the activations are read (`eval.geometry.hook`)"),
            "t": ("diffusion time [0, 1], 0 = data, 1 = noise", "the time of the forward pass (`eval.geometry.t`)"),
            "effective_dimension": ("≥ 0", "participation ratio (Σλ)² / Σλ² of the PCA spectrum (0: a point)"),
            "explained_variance_top4": ("[0, 1]", "share of the variance in the top 4 principal components"),
            "points": ("count", "labels (points of the cloud)"),
            "features": ("count", "dimensions of a point (pooled activations)"),
            "eigenvalue_<k>": ("≥ 0, squared activation units", "the k-th largest PCA eigenvalue (k = 1 … 15; 0 "
                               "past the cloud's rank)"),
            "additive_share": ("[0, 1]", "the factorization measure: share of the variance that is additive in x "
                               "and y (1 = f(x) + g(y))"),
            "additive_chance": ("[0, 1]", "its expectation for i.i.d. random vectors per label, (Nx + Ny − 2) / "
                                "(Nx·Ny − 1)"),
            "subspace_overlap": ("[0, 1]", "mean squared cosine of the principal angles between the x and y "
                                 "subspaces (0 = orthogonal)"),
            "subspace_max_cosine": ("[0, 1]", "the largest of those cosines"),
            "betti_<d>": ("count", "Betti number in dimension d = 0, 1, 2 of the cloud (a torus: 1, 2, 1); with "
                          "`eval.geometry.homology_over_training` only"),
            "h1_bar_<k>": ("fraction of the cloud's diameter", "the k-th longest finite H1 bar (k = 1 … 3; 0 if "
                           "fewer); with homology over training only"),
            "h2_bar_<k>": ("fraction of the cloud's diameter", "the k-th longest finite H2 bar; with homology over "
                           "training only"),
            "homology_dims": ("count", "principal components the cloud was reduced to before Vietoris–Rips "
                              "(`eval.geometry.homology_dims`, raised by its `homology_dims_rule`); runs made before "
                              "the column existed lack it"),
            "homology_cut_split": ("0 or 1", "1 where that cut lies inside an eigenspace PCA cannot order (North's rule, "
                                   "`analysis.geometry.cut_splits_eigenspace`): the Betti numbers read an arbitrary "
                                   "projection of it; runs made before the column existed lack it"),
        }),
    "geometry_controls": (
        "bumps", "`geometry_controls.parquet` (the final checkpoint, from `geometry_controls/`)",
        "source at the final checkpoint: the trained representation and each control through the same analyses",
        {
            "step": ("steps", "the final checkpoint's step"),
            "source": ("`trained`, `untrained`, `pixels`, `encoding`, `encoding_map`", "whose cloud: the trained "
                       "network, the network at initialisation, its noised input images, the label encoding, a "
                       "random layer on the encoding"),
            "points": ("count", "labels (points of the cloud)"),
            "features": ("count", "dimensions of a point"),
            "effective_dimension": ("≥ 0", "as in geometry"),
            "explained_variance_top4": ("[0, 1]", "as in geometry"),
            "additive_share": ("[0, 1]", "as in geometry"),
            "additive_chance": ("[0, 1]", "as in geometry"),
            "subspace_overlap": ("[0, 1]", "as in geometry"),
            "subspace_max_cosine": ("[0, 1]", "as in geometry"),
            "orthogonality": ("[0, 1]", "mean |cos| between x and y chords from the same point (0 = orthogonal)"),
            "parallelism_x": ("[−1, 1]", "mean cos between equal x chords at different y (1 = parallel)"),
            "parallelism_y": ("[−1, 1]", "the same for y chords at different x"),
            "parallelism": ("[−1, 1]", "mean of the two (a Clifford torus: orthogonality 0, parallelism 1)"),
            "betti_<d>": ("count", "Betti number in dimension d = 0, 1, 2"),
            "h1_bar_<k>": ("fraction of the cloud's diameter", "the k-th longest finite H1 bar (k = 1 … 3)"),
            "h2_bar_<k>": ("fraction of the cloud's diameter", "the k-th longest finite H2 bar"),
            "torus": ("0 or 1", "1 where the Betti numbers are (1, 2, 1)"),
            "homology_dims": ("count", "principal components the source's cloud was reduced to before "
                              "Vietoris–Rips (as in geometry)"),
            "homology_cut_split": ("0 or 1", "1 where that cut splits an eigenspace (as in geometry)"),
        }),
    "abstractions": (
        "shapes3d", "`abstractions.parquet` (from `abstractions/step_*/<measure>.parquet`)",
        "checkpoint × source × measure × attribute × τ: a point of a measure's curve over generation time",
        {
            "step": ("steps", "the checkpoint's training step"),
            "measure": ("`mutual_information`, `mutual_information_bound`, `forking_entropy`, `linear_probe`",
                        "what is measured along generation"),
            "attribute": ("text", "the Shapes3D attribute (`wall_hue`, `shape`, ...)"),
            "tau": ("τ in [0, 1], 0 = noise, 1 = data", "generation time"),
            "sigma": ("> 0", "the VE process's noise level σ at τ (σ_max at τ = 0, σ_min at τ = 1)"),
            "logsnr": ("nats (log of a ratio)", "log signal-to-noise ratio −2 ln σ at τ"),
            "value": ("mutual information: nats; forking entropy: / ln K in [0, 1]; linear probe: accuracy [0, 1]",
                      "the measure's value at τ"),
            "stderr": ("the value's unit; NULL where not estimated", "its standard error"),
            "reference": ("the value's unit", "the curve's reference: H(V) = ln K for mutual information, 1 (the "
                          "prior) for forking entropy, chance 1/K for the probe"),
            "reference_name": ("text", "what the reference is (`H(V)`, ...)"),
            "source": ("`trained`, `untrained`, `pixels`", "the trained network or a control (the network at "
                       "initialisation; the probe on the noised input pixels)"),
        }),
    "commitment": (
        "shapes3d", "`commitment.parquet`",
        "checkpoint × source × measure × attribute: when along generation the attribute is decided",
        {
            "step": ("steps", "the checkpoint's training step"),
            "measure": ("text", "as in abstractions, plus `mutual_information_final` (mutual information scored "
                        "against its own final value; not a primary measure)"),
            "attribute": ("text", "the attribute"),
            "commitment_tau": ("τ in [0, 1], 0 = noise; NULL: never committed", "the first τ at which the curve has "
                               "covered `level` of the way from `start` to `end`"),
            "commitment_sigma": ("> 0", "σ at that τ"),
            "commitment_logsnr": ("nats", "log-SNR at that τ"),
            "start": ("the measure's unit", "the curve's start level (0 for mutual information, chance for the "
                      "probe, its first value for forking entropy)"),
            "end": ("the measure's unit", "its end level (H(V) for mutual information, its last value otherwise)"),
            "level": ("(0, 1)", "the fraction of the way that counts as committed (`eval.abstractions."
                      "commitment_level`)"),
            "rank": ("1, 2, ...; NULL without a time", "the attribute's place in the measure's commitment order "
                     "(1 = first)"),
            "primary": ("boolean", "whether the measure is a primary one (not `mutual_information_final`)"),
            "source": ("`trained`, `untrained`, `pixels`", "as in abstractions"),
        }),
    "eval_steps": (
        "shapes", "every run's `eval/step_*.parquet` (so runs still training are queryable)",
        "checkpoint × class prompt × concept, as concept_space",
        {
            "step": ("steps", "the checkpoint's training step"),
            "class": ("class code", "as in concept_space"),
            "split": ("`train`, `held_out`", "as in concept_space"),
            "concept": ("text", "as in concept_space"),
            "target": ("0 or 1", "as in concept_space"),
            "p_one": ("probability [0, 1]", "as in concept_space"),
            "accuracy": ("[0, 1]", "as in concept_space"),
            "valid_fraction": ("[0, 1]", "as in concept_space"),
            "n": ("count", "as in concept_space"),
            "class_name": ("text", "as in concept_space"),
        }),
}

HEADER = """\
# Results store schema

<!-- Generated by scripts/schema_doc.py from the tables of one micro run of each data kind and the descriptions in
     the script; do not edit by hand. Regenerate: PYTHONPATH=src python scripts/schema_doc.py
     (tests/integration/store/test_schema_doc.py fails when a column of the store is missing here.) -->

`conceptlab runs query SQL --root DIR` and `conceptlab.store.index.open_store(DIR).query(sql)` answer one `SELECT`
over every run folder under DIR (DuckDB). The files are the source of truth: opening the store reads each run
folder's `config.yaml`, `summary.json` and `status.json` into the `runs` table and defines one view per Parquet
table, the union of every run's file with `run_id` first (the file's own `run` column is dropped). Every view below
is always defined — with `run_id` alone and no rows where no run has its file — and any other run-level
`<name>.parquet` a study or plug-in writes is a view too.

**Two kinds of column.** Config keys are spelled exactly as in the config, dotted: the column of `train.train_seed`
is `train.train_seed`, which SQL must quote, `select "data.color_separation", count(*) from runs group by 1`. Every
other column is a result, in snake_case without dots (`run_id`, `learning_time_train_color`, `p_one`). A query naming
a config key the old way (`data_color_separation`) or unquoted (`data.color_separation`, which DuckDB reads as
table `data`) fails with one line naming the quoted column.

**Types** are DuckDB's, as a store over one micro run of each kind has them. In a store whose runs differ, a column
holds NULL in the runs that lack it, an integer column with NULLs reads as DOUBLE, and a column whose values differ
in kind (number, text, boolean) across runs becomes VARCHAR. `NULL` means no value in that micro run (the key or
section is null for that kind, or an optional key left unset); `—`: that kind has no such column. Lists are stored
as their JSON text. In a column name, `<concept>`, `<split>`, `<phase>`, `<k>` stand for a name part.
"""


def make_runs(root: Path) -> dict[str, Path]:
    """One finished micro run per data kind under `root` (`root/<kind>`); a run already finished there is reused."""
    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import run_experiment

    folders = {}
    for kind, (preset, overrides) in RUNS.items():
        folder = Path(root) / kind
        if not (folder / "summary.json").is_file():
            if kind == "celeba":
                from conceptlab.data.celeba import write_drawn_celeba

                files = write_drawn_celeba(Path(root) / "celeba-files", {c: (12, 4) for c in ("00", "01", "10", "11")})
                overrides = [*overrides, f"data.root={files}"]
            run_experiment(load_config(preset, overrides), folder, progress=False)
        folders[kind] = folder
    return folders


def _columns(store, table: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a table, the type as DuckDB names it (`"NULL"` unquoted)."""
    rows = store.con.execute(f'DESCRIBE SELECT * FROM "{table}"').fetchall()
    return [(r[0], str(r[1]).strip('"')) for r in rows]


def observe(root: Path) -> tuple[dict[str, dict[str, str]], dict[str, list[tuple[str, str]]]]:
    """(runs: column → {kind: type} in a store over each kind's run alone; views: view → [(column, type)] in a store
    over all of them), in the store's column order."""
    from conceptlab.store.index import EVAL_TABLE, open_store

    runs: dict[str, dict[str, str]] = {}
    for kind in KINDS:
        with open_store(Path(root) / kind) as store:
            for column, kind_type in _columns(store, "runs"):
                runs.setdefault(column, {})[kind] = kind_type
    with open_store(root) as store:
        if store.warnings:
            raise SystemExit("\n".join(store.warnings))
        views = {name: _columns(store, name) for name in (*store.tables, EVAL_TABLE)}
    return runs, views


def _pattern(name: str) -> re.Pattern:
    return re.compile("^" + re.sub(r"<[a-z]+>", ".+", re.escape(name).replace(r"\<", "<").replace(r"\>", ">")) + "$")


def describe(column: str, described: dict) -> str | None:
    """The key of `described` that describes `column`: its own name, else the first pattern matching it."""
    if column in described:
        return column
    return next((key for key in described if "<" in key and _pattern(key).match(column)), None)


def is_config(column: str) -> bool:
    return column.split(".")[0] in SECTIONS and "." in column


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _types(kinds: dict[str, set[str]]) -> list[str]:
    return [", ".join(sorted(kinds[k])) if kinds.get(k) else "—" for k in KINDS]


def render(runs: dict[str, dict[str, str]], views: dict[str, list[tuple[str, str]]]) -> str:
    """docs/schema.md; SystemExit naming every column the descriptions miss."""
    missing = [f"runs.{c}" for c in runs if not is_config(c) and describe(c, RUN_COLUMNS) is None]
    missing += [f"{v}: no description of the view" for v in views if v not in VIEWS]
    missing += [f"{v}.{c}" for v, cols in views.items() if v in VIEWS for c, _ in cols
                if c != "run_id" and describe(c, VIEWS[v][3]) is None]
    if missing:
        raise SystemExit("columns without a description in scripts/schema_doc.py: " + ", ".join(missing))
    out = [HEADER]
    out.append("## Tables\n")
    out.append("| table | kind | from | one row per |\n|---|---|---|---|")
    out.append("| [`runs`](#runs) | every | `config.yaml`, `summary.json`, `status.json` | run folder |")
    for view in views:
        kind, source, row, _ = VIEWS[view]
        out.append(f"| [`{view}`](#{view}) | {kind} | {source} | {row} |")
    out.append("")

    out.append("## `runs`\n")
    out.append("One row per run folder under the root (any folder holding a `config.yaml`; hidden folders skipped), "
               "finished or not. Three groups of columns: the folder and its state, the results from "
               "`summary.json` (NULL until the run is done), and the config keys.\n")
    out.append("### Results and state\n")
    out.append(f"| column | from | {' | '.join(KINDS)} | unit / range | meaning |\n|---|---|{'---|' * len(KINDS)}---|---|")
    seen: dict[str, tuple[dict[str, set[str]], list[str]]] = {}
    for column, kinds in runs.items():
        if is_config(column):
            continue
        key = describe(column, RUN_COLUMNS)
        types, names = seen.setdefault(key, ({}, []))
        names.append(column)
        for kind, kind_type in kinds.items():
            types.setdefault(kind, set()).add(kind_type)
    for key, (source, unit, meaning) in RUN_COLUMNS.items():
        if key not in seen:
            continue
        types, names = seen[key]
        here = f" (here: {', '.join(f'`{n}`' for n in names)})" if "<" in key else ""
        out.append(f"| `{key}` | {_cell(source)} | {' | '.join(_types(types))} | {_cell(unit)} | "
                   f"{_cell(meaning)}{_cell(here)} |")
    out.append("")
    out.append("### Config keys\n")
    out.append("One column per leaf key of the run's resolved config (`config.yaml`), spelled as in the config; a "
               "key whose value is a mapping of names (`data.levels`, `data.fixed`) has one column per name, and a "
               "section set to null (an `eval` section of another kind) is one NULL column. What each key means, "
               "its type, bounds and default: [configuration.md](configuration.md). The keys of the micro runs:\n")
    out.append(f"| column | {' | '.join(KINDS)} |\n|---|{'---|' * len(KINDS)}")
    for column, kinds in runs.items():
        if is_config(column):
            out.append(f"| `{column}` | {' | '.join(_types({k: {t} for k, t in kinds.items()}))} |")
    out.append("")

    for view, columns in views.items():
        kind, source, row, described = VIEWS[view]
        out.append(f"## `{view}`\n")
        out.append(f"Kind: {kind}. From: {source}. One row per {row}.\n")
        out.append("| column | type | unit / range | meaning |\n|---|---|---|---|")
        out.append("| `run_id` | VARCHAR | text | the run (`runs.run_id`) |")
        grouped: dict[str, tuple[set[str], list[str]]] = {}
        for column, column_type in columns:
            if column == "run_id":
                continue
            key = describe(column, described)
            types, names = grouped.setdefault(key, (set(), []))
            types.add(column_type)
            names.append(column)
        for key, (types, names) in grouped.items():
            unit, meaning = described[key]
            here = f" (here: {', '.join(f'`{n}`' for n in names)})" if "<" in key else ""
            out.append(f"| `{key}` | {', '.join(sorted(types))} | {_cell(unit)} | {_cell(meaning)}{_cell(here)} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="folder for the micro runs (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.relative_to(REPO)})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.runs or Path(tmp)
        make_runs(root)
        text = render(*observe(root))
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
