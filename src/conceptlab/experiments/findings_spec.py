"""The findings suite's spec: every finding this bench claims, its runs, binding control and pass criterion, as
data — the schema, loading and validation (`experiments.findings` plans, runs and evaluates it).

The suite (`conceptlab/experiments/findings.yaml`, or a user's YAML of the same shape) has two parts:

    runs:                                   # named run sets, each a preset or a shipped sweep over report seeds
      hidden-emergence:
        sweep: hidden-emergence-tiny        # or preset: NAME, or analytic: package.module:function (+ args)
        seeds: [100, 101, 102, 103, 104]    # report seeds, declared before they were run
        settings_seeds: [0, 1, 2, 3, 4, 5]  # the seeds the settings were chosen on (refused as report seeds)
        overrides: []                       # key=value applied to every run of the set
        quick: {overrides: [...], seeds: [100]}      # the CI-size variant (`--quick`; default: the first seed)
        paper: {preset: hidden-emergence-paper}      # the paper-scale variant (`--scale paper`), if there is one
    findings:
      - name: hidden-emergence
        paper: Park et al. 2024
        claim: "..."
        setup: fast                         # paper | fast: checked against the configs (concept-space runs)
        control: "the bias-matched naive baseline"    # the binding control, or `none` with a `reason`
        criteria:
          - name: over-prompting-before-matched-naive
            statement: "..."
            value: {runs: hidden-emergence, path: emergence.targets.11.matched.over_prompting.gap_low,
                    censored: low}
            threshold: 0                    # or control: {runs: ..., path: ...}
            direction: greater              # greater | less | holds (analysis.finding_criteria)
            margin: 1
            min_seeds: null                 # seeds that must pass (default: every report seed)
            over_seeds: null                # or median_absolute_deviation: compare the seeds' spread, once

A value is read per report seed from each run's `summary.json` (`path`), from a run-level table (`table`,
`column`, `where`, `step`: first | last | a step), from a function of the set's runs (`compute`: an import path),
or as a trend over one seed's runs (`across`: a config key; Spearman's ρ). `config:` picks runs of a sweep by
their config values. `claims_from: RUNSET` takes every claim of that sweep's `controls` block as a criterion.

`load_suite` validates everything it can before a run starts and names the first problem in one line: an unknown
preset or sweep, a run set no finding uses or a finding uses without defining, a summary section or table column
the study does not write, a `config:` or `across` key the set's configs do not have, a finding with neither a
control nor a reason, a declared setup the configs contradict, a `min_seeds` (a `claims_from` claim's too) above the
seeds, a claim over the seeds on fewer than 3 of them, a quick or paper seed that chose the settings.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from conceptlab.analysis.finding_criteria import MIN_SEEDS_OVER, OVER_SEEDS
from conceptlab.config_base import StrictConfig as _Strict
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import ConfigError, load_config, parse_yaml, preset_names, read_text_file
from conceptlab.experiments.sweep import parse_spec, sweep_names
from conceptlab.messages import one_line, shown
from conceptlab.plugins import PluginError, is_import_path, resolve
from conceptlab.report.readme import HEADLINE_FIELD

SUITE = "findings.yaml"
SCALES = ("quick", "full", "paper")
_NAME = re.compile(r"^[a-z0-9][a-z0-9\-]*$")
# keys the run driver writes into every run's summary, whatever its study (reconstruction_phase: a VDM's runs only)
COMMON_SECTIONS = frozenset({"run", "name", "kind", "config_hash", "training_images", "parameters", "device", "bf16",
                             "precision", "threads", "provenance", "seconds", "invocations", "seconds_all_invocations",
                             "disk_bytes", "figures", "final_step", "checkpoints", "reconstruction_phase"})


# -- the spec ----------------------------------------------------------------------------------------------------------

def _check_name(what: str, name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"{what} name {name!r}: lower-case letters, digits and '-' only")


class Variant(_Strict):
    """A run set at another scale: `quick` adds its overrides to the set's and runs its seeds (default: the first
    report seed); `paper` replaces the preset or sweep (and its overrides) and runs its seeds (default: the set's)."""

    preset: str | None = None
    sweep: str | None = None
    overrides: list[str] = Field(default_factory=list)
    seeds: list[int] | None = Field(None, min_length=1)
    skip: str = Field("", description="not run at this scale, and why")


class RunSetSpec(_Strict):
    """Runs of one preset, one shipped sweep or one analytic function, over report seeds."""

    description: str = ""
    preset: str | None = None
    sweep: str | None = None
    analytic: str | None = Field(None, description="package.module:function(seed=..., **args) → a summary dict")
    args: dict[str, Any] = Field(default_factory=dict)
    overrides: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(min_length=1)
    settings_seeds: list[int] = Field(default_factory=list)
    quick: Variant = Field(default_factory=Variant)
    paper: Variant | None = None
    data_env: str | None = Field(None, description="an environment variable that must name the folder of the real "
                                 "data the runs read (e.g. CONCEPTLAB_CELEBA); without it the findings using the set "
                                 "are skipped, and the report says what to set")

    @model_validator(mode="after")
    def _one_source(self) -> "RunSetSpec":
        given = [k for k in ("preset", "sweep", "analytic") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, sweep or analytic (got {given or 'none'})")
        if self.args and self.analytic is None:
            raise ValueError("args are for an analytic run set")
        if self.analytic is not None and (self.overrides or self.quick.overrides):
            raise ValueError("an analytic run set has args, not overrides")
        reused = sorted(set(self.seeds) & set(self.settings_seeds))
        if reused:
            raise ValueError(f"seeds {reused} chose the settings (settings_seeds): report on other seeds")
        for label, variant in (("quick", self.quick), ("paper", self.paper)):
            reused = sorted(set(variant.seeds or []) & set(self.settings_seeds)) if variant is not None else []
            if reused:
                raise ValueError(f"{label}.seeds {reused} chose the settings (settings_seeds): report on other seeds")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"report seeds repeat: {self.seeds}")
        if self.paper is not None and (self.paper.preset is None) == (self.paper.sweep is None):
            raise ValueError("paper: give exactly one of preset or sweep")
        return self


class StepBefore(_Strict):
    """A checkpoint chosen by another quantity of the same table: the last one before the rows matching `where` first
    reach `reaches` in `column` (e.g. the last checkpoint before over-prompting's capability appears). No checkpoint
    when they reach it at the first one; the last checkpoint when they never do."""

    where: dict[str, Any] = Field(default_factory=dict)
    column: str
    reaches: float


class StepWindow(_Strict):
    """The table's last `last` checkpoints, one matching row each, read as one value: their `statistic` (the
    median). A reading that a single checkpoint's noise cannot decide alone, where consecutive checkpoints swing
    (the paper setup's no-EMA networks). Not measured when the run has fewer checkpoints than `last` or one of them
    has no matching row or value (the window never moves to earlier checkpoints)."""

    last: int = Field(..., ge=1)
    statistic: Literal["median"] = "median"


class Selector(_Strict):
    """Where a criterion's value comes from, per report seed."""

    runs: str
    path: str | None = Field(None, description="a dotted path into each run's summary.json")
    table: str | None = Field(None, description="a run-level table (<name>.parquet)")
    column: str | None = None
    where: dict[str, Any] = Field(default_factory=dict, description="table rows: column → value")
    step: Literal["first", "last"] | int | StepBefore | StepWindow | None = Field(
        None, description="table rows: the checkpoint to read (first, last, a step, before: a StepBefore rule) or "
        "a window of the last checkpoints read as one value (StepWindow)")
    compute: str | None = Field(None, description="package.module:function(runs, **args) → {seed: value}")
    args: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict, description="pick the set's runs by config value")
    across: str | None = Field(None, description="a config key: the value is Spearman's ρ of the value against it")
    censored: Literal["none", "high", "low"] = "none"

    @model_validator(mode="after")
    def _one_source(self) -> "Selector":
        given = [k for k in ("path", "table", "compute") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a value needs exactly one of path, table or compute (got {given or 'none'})")
        if self.table is not None and self.column is None:
            raise ValueError(f"table {self.table!r}: name the column to read")
        if self.table is None and (self.column or self.where or self.step is not None):
            raise ValueError("column, where and step are for a table value")
        if self.compute is not None and self.across is not None:
            raise ValueError("a computed value is already one per seed; across is for a path or table value")
        if self.compute is None and self.args:
            raise ValueError("args are for a computed value")
        return self


class CriterionSpec(_Strict):
    """One pass criterion of a finding, written before its report seeds were run."""

    name: str
    statement: str
    value: Selector
    control: Selector | None = None
    threshold: float | None = None
    direction: Literal["greater", "less", "holds"]
    margin: float = Field(0.0, description="≥ margin passes; a negative margin is a tolerance (\"not more than\")")
    min_seeds: int | None = Field(None, ge=1)
    over_seeds: Literal[OVER_SEEDS] | None = Field(  # type: ignore[valid-type]
        None, description="a claim about the report seeds as a group: compare this statistic of the values over the "
        "seeds with the same statistic of the controls' (analysis.finding_criteria.evaluate_over_seeds), decided once")
    restated: str = Field("", description="what holds instead when the criterion is not reproduced")

    @model_validator(mode="after")
    def _consistent(self) -> "CriterionSpec":
        _check_name("criterion", self.name)
        if self.direction == "holds":
            if self.control is not None or self.threshold is not None:
                raise ValueError(f"criterion {self.name}: a 'holds' criterion has no control or threshold")
        elif (self.control is None) == (self.threshold is None):
            raise ValueError(f"criterion {self.name}: direction {self.direction!r} needs exactly one of control "
                             "(a binding control's value) or threshold (a fixed number)")
        if self.over_seeds is not None:
            if self.direction == "holds":
                raise ValueError(f"criterion {self.name}: over_seeds compares a statistic of numbers; "
                                 "direction must be greater or less")
            if self.min_seeds is not None:
                raise ValueError(f"criterion {self.name}: over_seeds is decided once over every seed; drop min_seeds")
        return self


class FindingSpec(_Strict):
    """One finding: what it claims, the setup, its binding control and its criteria."""

    name: str
    paper: str
    claim: str
    setup: Literal["paper", "fast"] | None = None
    status: Literal["implemented", "not implemented"] = "implemented"
    control: str | None = Field(None, description="the binding control, or 'none' (then give a reason)")
    control_label: str | None = Field(None, max_length=90, description="a few words naming the binding control for "
                                      "the verdict table (the full `control` text is in the finding's section)")
    title: str | None = Field(None, max_length=90, description="the finding's name in the README's findings table "
                              "(findings sharing a title are one row group: 'the same' for the later ones)")
    headline: str | None = Field(None, description="the README row's headline, a template over the evaluation: "
                                 "{criterion} is its 'k of n', {criterion:value} / {criterion:control} the values' "
                                 "spread, {criterion:failing} the seeds it fails on, {glob*} the weakest count of the "
                                 "criteria matching a glob (report.readme.render_headline)")
    see_also: list[str] = Field(default_factory=list, description="Markdown links for the README row's details")
    reason: str = ""
    criteria: list[CriterionSpec] = Field(default_factory=list)
    claims_from: str | None = Field(None, description="a run set (a sweep with a controls block): its claims")

    @model_validator(mode="after")
    def _consistent(self) -> "FindingSpec":
        _check_name("finding", self.name)
        if self.status == "not implemented":
            if not self.reason or self.criteria or self.claims_from:
                raise ValueError(f"finding {self.name}: a finding not implemented gives a reason and no criteria")
            return self
        if self.setup is None:
            raise ValueError(f"finding {self.name}: say which setup made it (setup: paper | fast)")
        if not self.criteria and not self.claims_from:
            raise ValueError(f"finding {self.name}: no criteria (give criteria or claims_from)")
        if self.control is None:
            raise ValueError(f"finding {self.name}: name its binding control, or write 'control: none' with a reason")
        if self.control == "none" and not self.reason.strip():
            raise ValueError(f"finding {self.name}: 'control: none' needs a reason (why no control applies)")
        if self.control != "none" and not self.claims_from and not any(c.control for c in self.criteria):
            raise ValueError(f"finding {self.name}: its binding control {self.control!r} is compared by no "
                             "criterion (give a criterion a control value)")
        names = [c.name for c in self.criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"finding {self.name}: criterion names repeat: {names}")
        return self


class Suite(_Strict):
    description: str = ""
    runs: dict[str, RunSetSpec]
    findings: list[FindingSpec] = Field(min_length=1)


# -- loading and validation --------------------------------------------------------------------------------------------

def suite_text(source: str | None = None) -> tuple[str, str]:
    """(where, YAML text) of the shipped suite or a YAML file."""
    if source is None:
        return f"the shipped suite ({SUITE})", (resources.files("conceptlab.experiments") / SUITE).read_text()
    return f"suite {shown(source)}", read_text_file(Path(source), "findings suite")


def _first_error(err: ValidationError, where: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"].removeprefix("Value error, ")
    return one_line(f"{where}: {loc}: {msg}" if loc else f"{where}: {msg}")


def load_suite(source: str | None = None, check_configs: bool = True) -> Suite:
    """The suite, validated (ConfigError, one line, on the first problem). `check_configs` also loads every run
    set's config to check the summary sections, tables and setups the criteria name."""
    where, text = suite_text(source)
    data = parse_yaml(text, where)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping with runs and findings")
    try:
        suite = Suite.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_first_error(err, where)) from None
    names = [f.name for f in suite.findings]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: finding names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    used: set[str] = set()
    for finding in suite.findings:
        for sel_where, sel in selectors_of(finding):
            if sel.runs not in suite.runs:
                raise ConfigError(f"{where}: finding {finding.name}: {sel_where}: unknown run set {sel.runs!r}; "
                                  f"defined: {', '.join(sorted(suite.runs))}")
            used.add(sel.runs)
        if finding.claims_from is not None:
            if finding.claims_from not in suite.runs:
                raise ConfigError(f"{where}: finding {finding.name}: claims_from: unknown run set "
                                  f"{finding.claims_from!r}")
            used.add(finding.claims_from)
    for finding in suite.findings:
        try:
            criteria = claim_criteria(suite, finding) if finding.status == "implemented" else []
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
        names_here = [c.name for c in criteria]
        for braces in re.findall(r"\{[^{}]*\}", finding.headline or ""):
            if not HEADLINE_FIELD.fullmatch(braces):
                raise ConfigError(f"{where}: finding {finding.name}: headline field {braces} is not {{criterion}}, "
                                  "{criterion:value}, {criterion:control}, {criterion:failing} or {glob*}")
        for field_, part in HEADLINE_FIELD.findall(finding.headline or ""):
            shown_field = f"{{{field_}{':' + part if part else ''}}}"
            if "*" in field_ and part:
                raise ConfigError(f"{where}: finding {finding.name}: headline field {shown_field}: a glob gives the "
                                  "weakest pass count and takes no part")
            if not (fnmatch.filter(names_here, field_) if "*" in field_ else field_ in names_here):
                raise ConfigError(f"{where}: finding {finding.name}: headline field {shown_field} names no criterion "
                                  f"of it; its criteria: {', '.join(names_here) or 'none'}")
        for c in criteria:  # its own and its claims_from sweep's
            lacking = sorted(set(suite.runs[c.value.runs].seeds) - set(suite.runs[c.control.runs].seeds)) \
                if c.control is not None else []
            if lacking:
                raise ConfigError(f"{where}: finding {finding.name}: criterion {c.name}: the control's run set "
                                  f"{c.control.runs} lacks report seeds {lacking} of the value's run set "
                                  f"{c.value.runs}: those seeds could never pass")
            value_set = suite.runs[c.value.runs]
            n = len(value_set.seeds)
            if c.min_seeds is not None and c.min_seeds > n:
                raise ConfigError(f"{where}: finding {finding.name}: criterion {c.name}: min_seeds {c.min_seeds} > the "
                                  f"{n} report seeds of run set {c.value.runs}")
            paper_seeds = value_set.paper.seeds if value_set.paper is not None else None
            if c.min_seeds is not None and paper_seeds and c.min_seeds > len(paper_seeds):  # --scale paper
                raise ConfigError(f"{where}: finding {finding.name}: criterion {c.name}: min_seeds {c.min_seeds} > the "
                                  f"{len(paper_seeds)} paper-scale seeds of run set {c.value.runs}: never reproduced "
                                  "at that scale")
            if c.over_seeds is not None:
                for label, count in (("report", n), ("paper-scale", len(paper_seeds or value_set.seeds))):
                    if count < MIN_SEEDS_OVER:
                        raise ConfigError(f"{where}: finding {finding.name}: criterion {c.name}: over_seeds needs at "
                                          f"least {MIN_SEEDS_OVER} seeds, run set {c.value.runs} has {count} "
                                          f"{label} seeds: it could only be undefined")
    unused = sorted(set(suite.runs) - used)
    if unused:
        raise ConfigError(f"{where}: run set {unused[0]!r} is used by no finding")
    for name, runs in suite.runs.items():
        _check_source(runs, f"{where}: run set {name}")
    if check_configs:
        _check_against_configs(suite, where)
    return suite


def selectors_of(finding: FindingSpec) -> list[tuple[str, Selector]]:
    out = []
    for c in finding.criteria:
        out.append((f"criterion {c.name} value", c.value))
        if c.control is not None:
            out.append((f"criterion {c.name} control", c.control))
    return out


def _function(path: str, what: str, where: str) -> None:
    """Refuse, in one line naming `where`, an import path (`what`: analytic | compute) that does not resolve to a
    function."""
    try:
        fn = resolve(path, f"{what} function")
    except PluginError as err:
        raise ConfigError(f"{where}: {err}") from None
    if not callable(fn):
        raise ConfigError(f"{where}: {what} {path!r} is not a function")


def _check_source(runs: RunSetSpec, where: str) -> None:
    for label, variant in (("", runs), ("paper: ", runs.paper)):
        if variant is None:
            continue
        if variant.preset is not None and variant.preset not in preset_names() and not Path(variant.preset).is_file():
            raise ConfigError(f"{where}: {label}unknown preset {shown(variant.preset)}; see `conceptlab preset ls`")
        if variant.sweep is not None and variant.sweep not in sweep_names() and not Path(variant.sweep).is_file():
            raise ConfigError(f"{where}: {label}unknown sweep {shown(variant.sweep)}; see `conceptlab sweep ls`")
    if runs.analytic is not None:
        if not is_import_path(runs.analytic):
            raise ConfigError(f"{where}: analytic {shown(runs.analytic)} is not an import path (package.module:function)")
        _function(runs.analytic, "analytic", where)


def base_config(runs: RunSetSpec, overrides: list[str] | None = None) -> RunConfig | None:
    """The config a run set's runs share before their axes (None for an analytic set)."""
    if runs.analytic is not None:
        return None
    extra = list(runs.overrides) + list(overrides or [])
    if runs.preset is not None:
        return load_config(runs.preset, extra)
    spec = parse_spec(runs.sweep)
    return load_config(spec.base, spec.overrides + extra)


PAPER_SWITCHES: dict[str, Any] = {  # docs/setups.md: every training switch on the authors' side (not the network size)
    "diffusion.process": "vdm", "diffusion.prediction": "eps", "diffusion.time_input": "normalized_gamma",
    "diffusion.reconstruction": "gaussian", "diffusion.data_noise": 1e-3, "diffusion.guidance_convention": "diffusers",
    "data.null_value": -1.0, "data.prompt_layout": "paper11",
    "model.prompt_shift": 0.0, "model.prompt_scale": 1.0, "model.embedding_final_gelu": True, "model.norm_eps": 1e-6,
    "model.dropout": 0.1,
    "train.lr": 1e-3, "train.weight_decay": 0.01, "train.ema_decay": None, "eval.use_ema": False,
}


def paper_setup_differences(cfg: RunConfig) -> list[str]:
    """The switches of `PAPER_SWITCHES` where a config is not on the authors' side, as "key: value (paper: value)"."""
    out = []
    for key, paper in PAPER_SWITCHES.items():
        node: Any = cfg
        for part in key.split("."):
            node = getattr(node, part)
        same = node is None if paper is None else (
            node is not None and (math.isclose(float(node), float(paper), rel_tol=1e-9)
                                  if isinstance(paper, float) else node == paper))
        if not same:
            out.append(f"{key}: {node!r} (paper: {paper!r})")
    return out


def setup_of(cfg: RunConfig) -> str | None:
    """`paper` when a concept-space config has every training switch of Park et al. on the authors' side
    (`PAPER_SWITCHES`, docs/setups.md; the network size and the checkpoint schedule may differ), `fast` when any
    is not, None for other studies (their setups are told apart by the preset, not by switches)."""
    if cfg.data.kind != "shapes":
        return None
    return "fast" if paper_setup_differences(cfg) else "paper"


def _check_against_configs(suite: Suite, where: str) -> None:
    from conceptlab.studies import study_for

    kinds: dict[str, str | None] = {}
    configs: dict[str, RunConfig | None] = {}
    for name, runs in suite.runs.items():
        try:
            cfg = base_config(runs)
        except ConfigError as err:
            raise ConfigError(f"{where}: run set {name}: {err}") from None
        configs[name] = cfg
        kinds[name] = None if cfg is None else cfg.data.kind
    for finding in suite.findings:
        if finding.status != "implemented":
            continue
        sets = {s.runs for _, s in selectors_of(finding)} | ({finding.claims_from} if finding.claims_from else set())
        for name in sorted(sets):
            cfg = configs[name]
            made = None if cfg is None else setup_of(cfg)
            if made is not None and made != finding.setup:
                why = "; ".join(paper_setup_differences(cfg)[:3]) if finding.setup == "paper" else "every switch"
                raise ConfigError(f"{where}: finding {finding.name}: declared setup {finding.setup!r}, but run set "
                                  f"{name}'s config is the {made!r} setup (experiments.findings_spec.setup_of: {why})")
        for sel_where, sel in selectors_of(finding):
            _check_config_keys(sel, suite.runs[sel.runs], configs[sel.runs], f"{where}: finding {finding.name}: "
                               f"{sel_where}")
            kind = kinds[sel.runs]
            if kind is None:
                continue
            study = study_for(kind)
            label = f"{where}: finding {finding.name}: {sel_where}"
            if sel.path is not None:
                sections = set(getattr(study, "summary_sections", ()) or ())
                head = sel.path.split(".")[0]
                if sections and head not in sections | COMMON_SECTIONS:
                    raise ConfigError(f"{label}: a {kind} run's summary has no section {head!r} (it has: "
                                      f"{', '.join(sorted(sections | COMMON_SECTIONS))})")
            if sel.table is not None:
                tables = dict(getattr(study, "run_tables", {}) or {})
                if tables and sel.table not in tables:
                    raise ConfigError(f"{label}: a {kind} run writes no table {sel.table!r} (it writes: "
                                      f"{', '.join(sorted(tables))})")
                columns = tables.get(sel.table, ())
                extra = [sel.step.column, *sel.step.where] if isinstance(sel.step, StepBefore) else []
                for col in [sel.column, *sel.where, *extra]:
                    if columns and not column_declared(col, columns):
                        raise ConfigError(f"{label}: table {sel.table} has no column {col!r} (it has: "
                                          f"{', '.join(sorted(columns))})")
            if sel.compute is not None:
                _function(sel.compute, "compute", label)
        if finding.claims_from is not None:
            runs = suite.runs[finding.claims_from]
            if runs.sweep is None or parse_spec(runs.sweep).controls is None:
                raise ConfigError(f"{where}: finding {finding.name}: claims_from {finding.claims_from!r} must be a "
                                  "run set of a sweep with a controls block")


def config_keys(runs: RunSetSpec, cfg: RunConfig | None) -> set[str]:
    """The keys a selector's `config:` filter or `across` may name for a run set's runs, as the suite reads their
    configs (`experiments.findings.RunRecord.config`): an analytic set's `seed` and `args.<name>`, else every
    flattened key of the set's config and every axis of its sweep."""
    from conceptlab.store.index import flatten

    if cfg is None:
        return {"seed", *(f"args.{k}" for k in runs.args)}
    keys = set(flatten(cfg.model_dump(mode="json")))
    if runs.sweep is not None:
        spec = parse_spec(runs.sweep)
        keys |= set(spec.grid) | {k for z in spec.zip for k in z}
    return keys


def _check_config_keys(sel: Selector, runs: RunSetSpec, cfg: RunConfig | None, label: str) -> None:
    """Refuse a `config:` or `across` key that no run of the set has (a typo would pick no run: every seed not
    measured)."""
    known = config_keys(runs, cfg)
    for key in [*sel.config, *([sel.across] if sel.across is not None else [])]:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            raise ConfigError(f"{label}: config key {key!r} is not a key of run set {sel.runs}'s configs"
                              + (f" (did you mean {', '.join(close)}?)" if close else "")
                              + "; name a flattened config key, e.g. data.image_size")


def column_declared(column: str, declared) -> bool:
    """Whether `column` is one of a table's declared columns (`<name>` in a declared column matches a name part)."""
    return any(re.fullmatch(re.sub(r"<[^>]+>", r"[A-Za-z0-9_]+", re.escape(d).replace(r"\<", "<").replace(r"\>", ">")),
                            column) for d in declared)


def select(suite: Suite, names: list[str] | None) -> list[FindingSpec]:
    """The findings named (all when none); ConfigError naming an unknown one."""
    if not names:
        return list(suite.findings)
    known = {f.name: f for f in suite.findings}
    for n in names:
        if n not in known:
            raise ConfigError(f"unknown finding {shown(n)}; the suite has: {', '.join(known)}")
    return [known[n] for n in names]


def claim_criteria(suite: Suite, finding: FindingSpec) -> list[CriterionSpec]:
    """The finding's own criteria and, with claims_from, every claim of that sweep's controls block."""
    out = list(finding.criteria)
    if finding.claims_from is None:
        return out
    sweep = suite.runs[finding.claims_from].sweep
    spec = None if sweep is None else parse_spec(sweep).controls
    if spec is None:
        raise ConfigError(f"finding {finding.name}: claims_from {finding.claims_from!r} must be a run set of a sweep "
                          "with a controls block")
    for claim in spec.claims:
        value = Selector(runs=finding.claims_from, path=".".join(spec.value_path(claim, "trained")))
        control = (None if claim.control is None else
                   Selector(runs=finding.claims_from, path=".".join(spec.value_path(claim, claim.control))))
        out.append(CriterionSpec(name=re.sub(r"[^a-z0-9\-]", "-", claim.name.lower()), statement=claim.statement,
                                 value=value, control=control, direction=claim.direction, margin=claim.margin,
                                 min_seeds=claim.min_seeds, restated=claim.restated))
    return out
