"""The package's import graph, read from the source (every import, also those inside functions): each layer imports
only layers below it, and no module imports itself back through others (no cycles).

Layers, lowest first (`README`'s config → data → model → train → evaluate → store → report, with the studies and
the run driver on top): utilities (config base, import paths, atomic files, user messages) · hooks · data · models · train ·
probes, interventions, analysis · store · report · studies · experiments · the CLI and the package's front door.
"""

from __future__ import annotations

from pathlib import Path

import conceptlab
from conceptlab.experiments.code_versions import imported_modules

ROOT = Path(conceptlab.__file__).parent
LAYERS = [
    ("conceptlab.config_base", "conceptlab.plugins", "conceptlab.store.files", "conceptlab.messages"),
    ("conceptlab.hooks",),
    ("conceptlab.data",),
    ("conceptlab.models",),
    ("conceptlab.train",),
    ("conceptlab.probes", "conceptlab.interventions", "conceptlab.analysis"),
    ("conceptlab.store",),
    ("conceptlab.report",),
    ("conceptlab.studies",),
    ("conceptlab.experiments",),
    ("conceptlab.cli", "conceptlab.__main__", "conceptlab"),
]
BELOW_EXPERIMENTS = ("data", "models", "train", "probes", "interventions", "analysis", "hooks", "store")


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ["conceptlab", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def graph() -> dict[str, set[str]]:
    """Every module's package imports, read by the one scanner the code-versions guard uses (every import, also
    inside functions; not those under `if TYPE_CHECKING:`)."""
    return {name: imported_modules(name) for name in modules()}


def rank(module: str) -> int:
    best, best_len = None, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def test_every_module_is_in_a_layer_and_imports_only_its_layer_or_below():
    bad = [f"{m} (layer {rank(m)}) imports {t} (layer {rank(t)})"
           for m, targets in graph().items() for t in sorted(targets) if rank(t) > rank(m)]
    assert not bad, "\n".join(bad)


def test_nothing_below_the_run_driver_imports_experiments_or_the_cli():
    bad = [f"{m} imports {t}" for m, targets in graph().items() for t in targets
           if m.split(".")[1:2] and m.split(".")[1] in BELOW_EXPERIMENTS
           and (t.startswith("conceptlab.experiments") or t == "conceptlab.cli")]
    assert not bad, "\n".join(bad)


def test_there_are_no_import_cycles():
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_walk_sees_lazy_imports():
    """A cycle through an import inside a function counts (the two cycles this test was written against were)."""
    g = graph()
    assert "conceptlab.studies.base" in g["conceptlab.studies.concept_space"]
    assert any(t.startswith("conceptlab.report") for t in g["conceptlab.studies.factorization"])  # imported lazily
