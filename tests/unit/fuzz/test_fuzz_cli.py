"""Fuzzing the other commands: hostile and malformed SQL against a toy store (nothing outside it is read or written),
malformed run folders for `show` and `resume`, malformed sweep manifests for `sweep-status`, bad `percolation`
numbers, and command-line usage errors — each in-process, each refused with exit 2 and one line naming the culprit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "store"))
from toy_runs import write_toy_run  # noqa: E402

SECRET = "TOPSECRET-7f3a"


def fuzz_settings(examples: int):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture
def store(fuzzer):
    """A toy store under the root (two runs), and files beside it that no query may read or change."""
    write_toy_run(fuzzer.root / "store", "r1", 0.3, 0, [10, 20])
    write_toy_run(fuzzer.root / "store", "r2", 0.6, 1, [10, 20])
    outside = fuzzer.root / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text(f"a\n{SECRET}\n")
    (outside / "secret.json").write_text(json.dumps({"a": SECRET}))
    import pandas as pd

    pd.DataFrame({"a": [SECRET]}).to_parquet(outside / "secret.parquet")
    return fuzzer.root / "store"


READERS = ["read_csv", "read_csv_auto", "read_text", "read_blob", "read_json", "read_json_auto", "read_ndjson",
           "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema", "glob", "sniff_csv"]
STATEMENTS = [
    "COPY (SELECT 1) TO '{p}'", "COPY runs TO '{p}' (FORMAT csv)", "COPY concept_space TO '{p}' (FORMAT parquet)",
    "ATTACH '{p}' AS other", "EXPORT DATABASE '{p}'", "IMPORT DATABASE '{p}'", "INSTALL httpfs", "LOAD httpfs",
    "FORCE INSTALL '{p}'", "SET enable_external_access = true", "SET allowed_paths = ['/']", "RESET lock_configuration",
    "PRAGMA enable_profiling", "CREATE TABLE t AS SELECT 1", "CREATE VIEW v AS SELECT * FROM read_csv('{p}')",
    "DROP TABLE runs", "DELETE FROM runs", "UPDATE runs SET status = 'x'", "INSERT INTO runs (run_id) VALUES ('x')",
    "ALTER TABLE runs ADD COLUMN z INT", "CALL pragma_version()", "EXPLAIN ANALYZE COPY (SELECT 1) TO '{p}'",
    "CHECKPOINT", "VACUUM", "DETACH memory", "USE system", "SELECT 1; COPY (SELECT 1) TO '{p}'",
    "SELECT 1 -- \n; DROP TABLE runs", "BEGIN TRANSACTION", "SELECT * FROM runs; SELECT 2",
]


def _paths(root: Path) -> list[str]:
    return ["/etc/passwd", "/proc/self/environ", "outside/secret.csv", "outside/secret.parquet", "outside/secret.json",
            str(root / "outside" / "secret.csv"), "store/../outside/secret.csv", "store/r1/config.yaml",
            "store/r1/summary.json", "outside/*", "/*", "store/**", "new-file.csv", "store/r1/new.parquet"]


@given(reader=st.sampled_from(READERS), which=st.integers(0, 13))
@fuzz_settings(35)
def _file_function(fuzzer, reader, which):
    path = _paths(fuzzer.root)[which]
    out = fuzzer.refuse(["runs", "query", f"SELECT * FROM {reader}('{path}')", "--root", "store"], ["query"])
    assert SECRET not in out.output


def test_a_file_function_reaches_no_file_outside_the_views(fuzzer, store):
    _file_function(fuzzer)
    assert fuzzer.count >= 35


@given(statement=st.sampled_from(STATEMENTS), which=st.integers(0, 13))
@fuzz_settings(35)
def _statement(fuzzer, statement, which):
    sql = statement.format(p=_paths(fuzzer.root)[which])
    out = fuzzer.refuse(["runs", "query", sql, "--root", "store"], ["query"])
    assert SECRET not in out.output


def test_no_statement_but_one_select_runs(fuzzer, store):
    _statement(fuzzer)
    assert fuzzer.count >= 35


GARBAGE = st.one_of(
    st.text(min_size=0, max_size=60).map(lambda t: ")" + t),  # never valid SQL: a stray closing parenthesis first
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12).map(lambda t: f"SELECT * FROM zz{t}"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12).map(lambda t: f"SELECT zz{t} FROM runs"),
    st.sampled_from(["", "   ", ";", ";;", "-- only a comment", "/* */", "SELECT * FROM range(2000000)",
                     "SELECT 1/0::INT FROM range(1) WHERE error('boom') IS NULL", "SELECT error('[/red]x[/b]') FROM runs"]),
)


@given(sql=GARBAGE)
@fuzz_settings(30)
def _garbage(fuzzer, sql):
    fuzzer.refuse(["runs", "query", sql, "--root", "store"], ["query"])


def test_a_malformed_query_fails_in_one_line(fuzzer, store):
    _garbage(fuzzer)
    assert fuzzer.count >= 30


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=12)
BAD_SUMMARY = st.one_of(
    st.dictionaries(st.text(alphabet="xyz_", min_size=1, max_size=6).map(lambda k: "zz" + k), JSON, max_size=5),
    st.lists(JSON, max_size=4), st.integers(), st.text(max_size=10), st.none(),
    st.fixed_dictionaries({"name": st.text(max_size=5), "kind": st.just("shapes")}, optional={"learning_time": JSON}),
)
BAD_TEXT = st.sampled_from(["{", "{'a': 1}", "[1, 2", "", "nan", "\x00\x01", "[" * 5000 + "]" * 5000])


@given(summary=st.one_of(BAD_SUMMARY.map(json.dumps), BAD_TEXT), raw=st.binary(max_size=20))
@fuzz_settings(40)
def _bad_summary(fuzzer, summary, raw):
    folder = fuzzer.root / "run"
    folder.mkdir(exist_ok=True)
    path = folder / "summary.json"
    if summary == "":
        path.write_bytes(raw + b"\xff")
    else:
        path.write_text(summary)
    fuzzer.refuse(["runs", "show", "run"], ["summary.json"])


def test_show_refuses_a_malformed_summary_in_one_line(fuzzer):
    _bad_summary(fuzzer)
    assert fuzzer.count >= 40


BAD_MANIFEST = st.one_of(
    JSON.filter(lambda v: not (isinstance(v, dict) and isinstance(v.get("runs"), list))),
    st.lists(st.one_of(
        st.fixed_dictionaries({"run_id": st.sampled_from(["../x", "", "a/b", "/abs", ".hidden", "x" * 101]),
                               "values": st.just({})}),
        st.fixed_dictionaries({"run_id": st.integers() | st.none(), "values": st.just({})}),
        st.fixed_dictionaries({"run_id": st.just("0123456789abcdef"), "values": JSON.filter(lambda v: not isinstance(v, dict))}),
        JSON.filter(lambda v: not isinstance(v, dict)),
    ), min_size=1, max_size=3).map(lambda runs: {"sweep": "s", "runs": runs}),
)


@given(manifest=st.one_of(BAD_MANIFEST.map(json.dumps), BAD_TEXT))
@fuzz_settings(40)
def _bad_manifest(fuzzer, manifest):
    folder = fuzzer.root / "sweep"
    folder.mkdir(exist_ok=True)
    (folder / "manifest.json").write_text(manifest or "{")
    fuzzer.refuse(["sweep", "status", "sweep"], ["manifest.json"])


def test_sweep_status_refuses_a_malformed_manifest_in_one_line(fuzzer):
    _bad_manifest(fuzzer)
    assert fuzzer.count >= 40


BAD_CONFIG = st.sampled_from([
    "a: [1, 2\n", "[1, 2]\n", "train: {lr: .nan}\n", "train: {steps: 0}\n", "zz_key: 1\n", "a: &r [1, *r]\n",
    "model: {widths: [0]}\n", "train: {lr: 1}\ntrain: {lr: 2}\n", "data: {kind: zz_kind}\n", "extends: zz_missing.yaml\n",
])


@given(config=st.one_of(BAD_CONFIG, st.binary(min_size=1, max_size=30).map(lambda b: b + b"\xfe")),
       threads=st.none() | st.integers(-5, 0) | st.integers(1025, 10**6))
@fuzz_settings(30)
def _bad_resume(fuzzer, config, threads):
    folder = fuzzer.root / "run"
    folder.mkdir(exist_ok=True)
    path = folder / "config.yaml"
    (path.write_bytes if isinstance(config, bytes) else path.write_text)(config)
    args = ["resume", "run", *([] if threads is None else ["--threads", str(threads)])]
    culprits = ["--threads"] if threads is not None else ["config.yaml", "train.lr", "train.steps", "zz_key",
                                                          "model.widths", "data.kind", "zz_missing.yaml", "train"]
    fuzzer.refuse(args, culprits)


def test_resume_refuses_a_malformed_run_folder_in_one_line(fuzzer):
    _bad_resume(fuzzer)
    assert fuzzer.count >= 30


NUMBERS = st.sampled_from(["0", "-1", "nan", "inf", "-inf", "x", "1,,2", "1e999", "", " ", "8,nan", "1;2"])
PERCOLATION = st.one_of(
    st.tuples(st.just("--sizes"), NUMBERS),
    st.tuples(st.just("--fractions"), st.sampled_from(["0", "1.5", "-0.1", "nan", "0,0.5", "x", "2"])),
    st.tuples(st.just("--thresholds"), st.sampled_from(["0", "1", "1.5", "-1", "nan", "x"])),
    st.tuples(st.sampled_from(["--spacing", "--sigma"]), st.sampled_from(["0", "-1", "nan", "inf", "x"])),
    st.tuples(st.just("--trials"), st.sampled_from(["0", "-3", "100001", "x", "1.5"])),
    st.tuples(st.just("--target"), st.sampled_from(["0", "1.5", "nan", "-0.5", "x"])),
    st.tuples(st.just("--seed"), st.sampled_from(["-1", str(2**63), "x"])),
    st.tuples(st.just("--sizes"), st.sampled_from(["1e9", "100000,8"])),  # lattices too large for the memory
    st.tuples(st.just("--out"), st.sampled_from(["afile", "afile/below"])),
)


@given(case=PERCOLATION)
@fuzz_settings(40)
def _bad_percolation(fuzzer, case):
    option, value = case
    (fuzzer.root / "afile").write_text("x")
    fuzzer.refuse(["percolation", option, value, "--trials", "2"] if option != "--trials" else ["percolation", option, value],
                  [option])


def test_percolation_refuses_bad_numbers_naming_the_option(fuzzer):
    _bad_percolation(fuzzer)
    assert fuzzer.count >= 40


USAGE = st.one_of(
    st.tuples(st.sampled_from([["run", "micro"], ["runs", "show", "x"], ["sweep", "run", "s"], ["runs", "ls"], ["percolation"],
                               ["runs", "query", "SELECT 1"], ["resume", "x"], ["sweep", "status", "x"]]),
              st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=2, max_size=10).map(lambda t: f"--zz{t}"))
    .map(lambda c: (c[0] + [c[1]], c[1])),
    st.sampled_from([(["run", "micro", "--threads", "x"], "--threads"), (["run", "micro", "--threads", "1.5"], "--threads"),
                     (["run", "micro", "--threads", "0", "--dry-run"], "--threads"),
                     (["run", "micro", "--threads", "100000", "--dry-run"], "--threads"),
                     (["sweep", "run", "hidden-emergence-tiny", "--workers", "0"], "--workers"),
                     (["sweep", "run", "hidden-emergence-tiny", "--workers", "x"], "--workers"),
                     (["sweep", "run", "hidden-emergence-tiny", "--executor", "zzcloud", "--dry-run"], "zzcloud"),
                     (["report", "x", "--split", "zz"], "--split"), (["run"], "source"), (["runs", "show"], "run_dir"),
                     (["runs", "query"], "sql"), (["zzcommand"], "zzcommand"), (["runs", "zzsub"], "zzsub"),
                     (["run", "micro", "--runs-dir", "afile", "--dry-run"], "--runs-dir"),
                     (["run", "micro", "--runs-dir", "afile/sub", "--dry-run"], "--runs-dir"),
                     (["run", "micro", "runs_dir=afile", "--dry-run"], "runs_dir"),
                     (["runs", "ls", "--root", "afile"], "afile"), (["runs", "ls", "--root", "zz-missing"], "zz-missing"),
                     (["runs", "query", "SELECT 1", "--root", "afile"], "afile"), (["runs", "show", "afile"], "afile"),
                     (["resume", "afile"], "afile"), (["report", "afile"], "afile"),
                     (["sweep", "status", "zz-missing.yaml"], "zz-missing.yaml"), (["report", "afile"], "afile"),
                     (["run", "zz-no-such-preset"], "zz-no-such-preset"), (["run", "zz-missing.yaml"], "zz-missing.yaml"),
                     (["run", "micro", "train.steps"], "train.steps"), (["run", "micro", "=3"], "=3"),
                     (["run", "micro", "train..steps=3"], "train..steps"), (["run", "micro", "train.steps.x=3"], "train.steps"),
                     (["sweep", "run", "zz-no-such-sweep"], "zz-no-such-sweep"), (["sweep", "run", "hidden-emergence-tiny", "--slurm", "zz=1"], "zz")]),
)


@given(case=USAGE)
@fuzz_settings(50)
def _usage(fuzzer, case):
    args, culprit = case
    (fuzzer.root / "afile").write_text("x")
    fuzzer.refuse(list(args), [culprit])


def test_a_usage_error_is_one_line_naming_the_argument(fuzzer):
    _usage(fuzzer)
    assert fuzzer.count >= 50


def test_a_path_that_is_not_there_is_called_missing_not_unfinished_or_an_unknown_sweep(fuzzer):
    """`runs show` said "has no summary.json (run unfinished? resume it …)" and `report` "unknown sweep" for a
    folder that does not exist; each now says it is not there."""
    fuzzer.refuse(["runs", "show", "nowhere/run"], ["nowhere/run: no such run folder"])
    (fuzzer.root / "a-file").write_text("x")
    fuzzer.refuse(["runs", "show", "a-file"], ["a-file is not a folder"])
    for target in ("nowhere/run", "nowhere.yaml"):
        fuzzer.refuse(["report", target], [f"{target}': no such file or folder"])
    fuzzer.refuse(["report", "no-such-sweep"], ["unknown sweep 'no-such-sweep'"])  # a bare name: the sweeps listed
    for command in (["sweep", "run"], ["sweep", "status"]):  # the sweep commands resolve a path the same way
        fuzzer.refuse([*command, "nowhere/sweep"], ["sweep spec 'nowhere/sweep' does not exist"])
