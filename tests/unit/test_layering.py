"""The package's import graph, read from the source (every import, also those inside functions): each layer imports
only layers below it, and no module imports itself back through others (no cycles).

Layers, lowest first (`README`'s config → data → model → train → evaluate → store → report, with the studies and
the run driver on top): utilities (config base, import paths, atomic files, user messages) · hooks · data · models · train ·
probes, interventions, analysis · store · report · studies · experiments · the CLI and the package's front door.
"""

from __future__ import annotations

import ast
from pathlib import Path

import conceptlab

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


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports (a `from pkg import x` where pkg.x is a module counts as pkg.x)."""
    tree = ast.parse(path.read_text())
    skipped = {id(n) for block in ast.walk(tree) if _type_checking_only(block) for n in ast.walk(block)}
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t == "conceptlab" or t.startswith("conceptlab."))
    return {t for t in found if t in known and t != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


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
