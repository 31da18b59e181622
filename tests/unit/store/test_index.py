"""The results store: SQL over a toy store, flattened config columns, and concurrent writers never losing a row."""

import json
import multiprocessing
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from toy_runs import write_toy_run  # noqa: E402

from conceptlab.cli import app  # noqa: E402
from conceptlab.store.index import StoreError, open_store  # noqa: E402

STEPS = [100, 200, 300, 400, 500, 600, 700, 800, 900]
ROWS_PER_STEP = 4 * 2  # classes × concepts


@pytest.fixture
def toy_store(tmp_path):
    for i, dc in enumerate([0.2, 0.5, 0.8]):
        for seed in (0, 1, 2):
            write_toy_run(tmp_path / "sweep", f"run-{i}-{seed}", dc, seed, STEPS)
    write_toy_run(tmp_path, "0001-unfinished", 0.3, 0, STEPS[:2], finished=False)
    return tmp_path


def test_runs_table_has_flattened_config_and_summary_columns(toy_store):
    with open_store(toy_store) as store:
        runs = store.runs()
    assert len(runs) == 10
    assert list(runs["run_id"])[:2] == ["0001-unfinished", "sweep/run-0-0"]
    done = runs[runs["status"] == "done"]
    assert len(done) == 9 and set(runs["status"]) == {"done", "incomplete"}
    for column in ["data.color_separation", "data.data_seed", "train.train_seed", "model.widths",
                   "eval.probe.seed", "concept_signal_color", "learning_time_train_color", "final_step"]:
        assert column in runs.columns, column
    assert not [c for c in runs.columns if c.startswith(("data_", "train_", "model_", "eval_"))]  # no old spellings
    row = runs.set_index("run_id").loc["sweep/run-2-1"]
    assert row["data.color_separation"] == 0.8 and row["train.train_seed"] == 1
    assert json.loads(row["model.widths"]) == [64, 128, 256]  # a list: its JSON text
    assert row["learning_time_train_color"] == 200 and row["concept_signal_color"] == pytest.approx(16.0)


def test_one_sql_query_answers_learning_time_per_color_separation(toy_store):
    sql = """
        SELECT r."data.color_separation" AS dc, avg(l.learning_time) AS mean_lt, count(*) AS seeds
        FROM learning_times l JOIN runs r USING (run_id)
        WHERE l.concept = 'color' AND l.split = 'train'
        GROUP BY dc ORDER BY dc
    """
    with open_store(toy_store) as store:
        table = store.query(sql)
        assert table.to_dict("list") == {"dc": [0.2, 0.5, 0.8], "mean_lt": [800.0, 500.0, 200.0], "seeds": [3, 3, 3]}
        counts = store.query("SELECT run_id, count(*) AS n FROM concept_space GROUP BY run_id")
        assert len(counts) == 9 and set(counts["n"]) == {len(STEPS) * ROWS_PER_STEP}
        # eval_steps also covers the unfinished run
        n = store.query("SELECT count(*) AS n FROM eval_steps WHERE run_id = '0001-unfinished'")["n"][0]
        assert n == 2 * ROWS_PER_STEP
        assert store.query("SELECT count(*) AS n FROM eval_steps")["n"][0] == (9 * len(STEPS) + 2) * ROWS_PER_STEP
        with pytest.raises(StoreError, match="query failed"):
            store.query("SELECT nope FROM runs")


def test_a_config_key_spelled_the_old_way_or_unquoted_names_the_quoted_column(toy_store):
    with open_store(toy_store) as store:
        table = store.query('SELECT "data.color_separation", count(*) AS n FROM runs WHERE status = \'done\' '
                            'GROUP BY 1 ORDER BY 1')
        assert table.to_dict("list") == {"data.color_separation": [0.2, 0.5, 0.8], "n": [3, 3, 3]}
        hint = ('no column data_color_separation: config keys are spelled as in the config, quote them: '
                '"data.color_separation"')
        for sql in ("SELECT data_color_separation, count(*) FROM runs GROUP BY 1",
                    "SELECT r.data_color_separation FROM runs r",
                    "SELECT run_id FROM runs WHERE DATA_COLOR_SEPARATION > 0.3"):
            with pytest.raises(StoreError) as err:
                store.query(sql)
            assert str(err.value).lower() == hint.lower(), sql
        with pytest.raises(StoreError, match='^no column train_train_seed: .* quote them: "train.train_seed"$'):
            store.query("SELECT train_train_seed FROM runs")
        with pytest.raises(StoreError, match='^no column eval_probe_seed: .* quote them: "eval.probe.seed"$'):
            store.query("SELECT eval_probe_seed FROM runs")  # any underscore of a nested key
        with pytest.raises(StoreError, match='data.color_separation is one config key, quote it: "data.color_separation"'):
            store.query("SELECT data.color_separation FROM runs")  # unquoted: DuckDB reads table `data`
        with pytest.raises(StoreError, match='quote it: "train.train_seed"'):
            store.query("SELECT r.train.train_seed FROM runs r")
        with pytest.raises(StoreError, match='^query failed: .*"nope" not found'):
            store.query("SELECT nope FROM runs")  # no such key: DuckDB's own line


def test_cli_runs_ls_and_query(toy_store):
    result = CliRunner().invoke(app, ["runs", "ls", str(toy_store)])
    assert result.exit_code == 0, result.output
    assert "sweep/run-1-2" in result.output and "10 runs" in result.output
    assert {"data.color_separation", "train.train_seed"} <= set(result.output.split())  # the keys that differ
    result = CliRunner().invoke(app, ["runs", "query", "--root", str(toy_store), "--csv",
                                      "SELECT count(DISTINCT run_id) AS n FROM concept_space"])
    assert result.exit_code == 0 and result.output.split() == ["n", "9"]
    result = CliRunner().invoke(app, ["runs", "query", "--root", str(toy_store), "--csv",
                                      'SELECT DISTINCT "train.train_seed" FROM runs ORDER BY 1'])
    assert result.exit_code == 0 and result.output.split() == ["train.train_seed", "0", "1", "2"]
    result = CliRunner().invoke(app, ["runs", "query", "--root", str(toy_store), "SELECT train_train_seed FROM runs"])
    assert result.exit_code == 2 and result.output.strip().splitlines() == [
        'error: no column train_train_seed: config keys are spelled as in the config, quote them: "train.train_seed"']
    result = CliRunner().invoke(app, ["runs", "query", "--root", str(toy_store), "SELEC 1"])
    assert result.exit_code == 2 and result.output.startswith("error: query failed")
    result = CliRunner().invoke(app, ["runs", "ls", str(toy_store / "missing")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_empty_root_and_saved_index(tmp_path, toy_store):
    (tmp_path / "empty").mkdir()
    with open_store(tmp_path / "empty") as store:
        assert store.runs().empty and store.query("SELECT count(*) AS n FROM concept_space")["n"][0] == 0
    import duckdb

    with open_store(toy_store) as store:
        path = store.save(tmp_path / "index.duckdb")
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 10
    assert con.execute("SELECT count(*) FROM concept_space").fetchone()[0] == 9 * len(STEPS) * ROWS_PER_STEP


def _writer(root: str, worker: int, runs: int) -> None:
    for k in range(runs):
        write_toy_run(Path(root), f"w{worker:02d}-{k:02d}", 0.1 * (k % 9 + 1), worker, STEPS)
        # A redone run (as after a killed worker) rewrites the same files: still one copy of each row.
        write_toy_run(Path(root), "shared", 0.5, 0, STEPS)


def test_concurrent_writers_lose_and_duplicate_no_row(tmp_path):
    workers, runs = 6, 3
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_writer, args=(str(tmp_path), w, runs)) for w in range(workers)]
    for p in procs:
        p.start()
    snapshots = 0
    while any(p.is_alive() for p in procs):  # readers during the writes see only whole runs
        with open_store(tmp_path) as store:
            per_run = store.query("SELECT run_id, count(*) AS n FROM concept_space GROUP BY run_id")
            assert set(per_run["n"]) <= {len(STEPS) * ROWS_PER_STEP}
            eval_rows = store.query("SELECT run_id, step, class, concept, count(*) AS n FROM eval_steps "
                                    "GROUP BY ALL HAVING n > 1")
            assert eval_rows.empty
        snapshots += 1
    assert all(p.exitcode == 0 for p in procs)
    with open_store(tmp_path) as store:
        runs_table = store.runs()
        assert len(runs_table) == workers * runs + 1 and set(runs_table["status"]) == {"done"}
        total = store.query("SELECT count(*) AS n FROM concept_space")["n"][0]
        assert total == (workers * runs + 1) * len(STEPS) * ROWS_PER_STEP
        dupes = store.query("SELECT run_id, step, class, concept FROM concept_space GROUP BY ALL HAVING count(*) > 1")
        assert dupes.empty
        assert store.query("SELECT count(*) AS n FROM learning_times")["n"][0] == (workers * runs + 1) * 4
    assert snapshots >= 1


def test_sweep_report_prints_the_table_and_saves_the_figure(toy_store, tmp_path):
    sweep = toy_store / "sweep"
    (sweep / "manifest.json").write_text('{"sweep": "toy", "runs": []}')
    figure = tmp_path / "fig.png"
    result = CliRunner().invoke(app, ["sweep-report", str(sweep), "--figure", str(figure)])
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines()]
    assert ["0.2", "color", "4.00", "800", "(800", "±", "0)", "3/3"] in lines  # median of all (mean ± sd, learned)
    assert ["0.8", "color", "16.00", "200", "(200", "±", "0)", "3/3"] in lines
    assert figure.is_file() and figure.stat().st_size > 10_000


def test_odd_tables_keys_and_nulls_read_as_any_other(toy_store):
    """An audit's findings (2026-12-07): a plug-in table named like an SQL keyword (`order.parquet`) broke every
    store command under its root; `matched_naive` and `geometry_controls` were not views where no run had them,
    though the schema says every built-in table always is; a config key set in some runs and absent in others was
    not listed as differing by `runs ls`; an integer or boolean NULL printed as <NA>."""
    import shutil

    import yaml

    run = toy_store / "sweep" / "run-0-0"
    shutil.copy(run / "concept_space.parquet", run / "order.parquet")
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["eval"]["noise_per_run"] = True  # set in this run only
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    with open_store(toy_store) as store:
        assert store.query('SELECT count(DISTINCT run_id) AS n FROM "order"')["n"][0] == 1
        for view in ("matched_naive", "geometry_controls"):
            assert store.query(f"SELECT count(*) AS n FROM {view}")["n"][0] == 0
    listed = CliRunner().invoke(app, ["runs", "ls", str(toy_store)])
    assert listed.exit_code == 0 and "eval.noise_per_run" in listed.output, listed.output
    assert "<NA>" not in listed.output
    result = CliRunner().invoke(app, ["runs", "query", "--root", str(toy_store),
                                      "SELECT 1::INT AS a UNION ALL SELECT NULL ORDER BY a"])
    assert result.exit_code == 0 and result.output.split() == ["a", "1", "—"], result.output


def test_a_killed_local_worker_and_a_torn_summary_read_the_same_in_runs_ls_and_sweep_status(toy_store):
    """`runs ls` said "running" for a run whose local worker was killed, where `sweep status` said "interrupted";
    and a torn summary.json was "done" to `sweep status` (an audit, 2026-12-07). Both commands now read one rule
    (`store.run_folder.RunFolder.live_state`): the killed worker's run is interrupted in both, a run a stopped sweep
    queued is pending if it never started and interrupted if it had, and the torn summary is `done (summary
    unreadable)` in both, its error saying how to write it again."""
    import socket
    import subprocess

    from conceptlab.store.run_folder import SUMMARY_UNREADABLE, RunFolder

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id of this host that no process holds now
    killed = toy_store / "0001-unfinished"
    (killed / "status.json").write_text(json.dumps({"state": "running", "host": socket.gethostname(),
                                                    "pid": gone.pid}))
    assert RunFolder(killed).state() == ("interrupted", None)
    with open_store(toy_store) as store:
        runs = store.runs().set_index("run_id")
    assert runs.loc["0001-unfinished", "status"] == "interrupted"
    (killed / "status.json").write_text(json.dumps({"state": "running", "host": socket.gethostname(),
                                                    "pid": gone.pid, "slurm_job": "7"}))  # a SLURM job: its word
    assert RunFolder(killed).state()[0] == "running"
    queued = toy_store / "sweep" / "run-2-2"  # queued by a local sweep that was stopped (Ctrl-C) before starting it
    (queued / "summary.json").unlink()
    (queued / "status.json").write_text(json.dumps({"state": "queued", "host": socket.gethostname(), "pid": gone.pid}))
    assert RunFolder(queued).state() == ("pending", None)  # nothing of it ever started
    started = toy_store / "sweep" / "run-2-1"  # the same, queued again after an earlier attempt saved a state
    (started / "summary.json").unlink()
    (started / "status.json").write_text(json.dumps({"state": "queued", "host": socket.gethostname(), "pid": gone.pid}))
    (started / "train_state.safetensors").write_bytes(b"")
    assert RunFolder(started).state() == ("interrupted", None)
    torn = toy_store / "sweep" / "run-0-0"
    (torn / "summary.json").write_text('{"learning')
    state, error = RunFolder(torn).state()
    assert state == SUMMARY_UNREADABLE and "summary.json is not valid JSON" in error
    assert f"conceptlab resume {torn}" in error
    assert RunFolder(toy_store / "sweep" / "run-0-1").state() == ("done", None)
    with open_store(toy_store) as store:
        runs = store.runs().set_index("run_id")
    assert runs.loc["sweep/run-0-0", "status"] == SUMMARY_UNREADABLE and runs.loc["sweep/run-0-0", "error"] == error
    assert runs.loc["sweep/run-2-2", "status"] == "pending" and runs.loc["sweep/run-2-1", "status"] == "interrupted"
    assert runs.loc["sweep/run-0-1", "status"] == "done"
