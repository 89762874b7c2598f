"""The Python API against the CLI: the same estimate, comparison and sweep, bad input raising with
the CLI's located diagnostics, the points as typed Arrow/Parquet columns."""

import ast
import json
import re
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tessera

ARCH = "architectures/eos-h100.ron"
WORKLOAD = "workloads/llama3.1-405b-pretrain.ron"
GRID = "architectures/sweeps/gb200-cluster-llama405b.ron"
THREE = [
    "architectures/gb200-nvl72.ron",
    "architectures/cerebras-cs3.ron",
    "architectures/northpole-16.ron",
]
SMALL = "workloads/granite-3b-northpole.ron"


def test_estimate_is_the_cli_json(cli):
    # "published": the CLI without --mapping (the workload's own mapping, else auto)
    for mapping, opt in (("published", []), ("auto", ["--mapping", "auto"])):
        e = tessera.estimate(ARCH, WORKLOAD, mapping=mapping)
        want = json.loads(
            cli("estimate", "--arch", ARCH, "--workload", WORKLOAD, *opt, "--format", "json").stdout
        )
        assert e.to_dict() == want
        assert e.step_time_s == want["step_time_s"]
        assert e.feasible and e.step_time_s > 0


def test_estimate_default_is_the_cli_default(cli):
    # issue 40: without a mapping, Python runs what `tessera estimate` runs without --mapping
    # (the workload's published mapping), not a search
    want = json.loads(
        cli("estimate", "--arch", ARCH, "--workload", WORKLOAD, "--format", "json").stdout
    )
    e = tessera.estimate(ARCH, WORKLOAD)
    assert e.step_time_s == want["step_time_s"] and e.to_dict() == want
    assert e.mappings_tried is None  # given, not searched
    assert e.to_dict() == tessera.estimate(ARCH, WORKLOAD, mapping="published").to_dict()
    auto = tessera.estimate(ARCH, WORKLOAD, mapping="auto")
    assert auto.mappings_tried and auto.step_time_s != e.step_time_s
    # a mapping.* override sets the published mapping, as `--set mapping.tp=...` does
    tp = e.mapping["tp"]
    want = json.loads(
        cli("estimate", "--arch", ARCH, "--workload", WORKLOAD, "--set", f"mapping.tp={tp // 2}",
            "--format", "json").stdout
    )
    assert tessera.estimate(ARCH, WORKLOAD, mapping__tp=tp // 2).to_dict() == want


def test_estimate_overrides_and_objects(cli):
    s, w = tessera.load_system(ARCH), tessera.load_workload(WORKLOAD)
    assert s.devices > 512 and w.has_published_mapping
    e = tessera.estimate(s, w, mapping="published", devices=512)
    want = json.loads(
        cli("estimate", "--arch", ARCH, "--workload", WORKLOAD, "--devices", "512",
            "--format", "json").stdout
    )
    assert e.to_dict() == want and e.devices == 512
    with pytest.raises(tessera.TesseraError, match="does not take width"):
        tessera.estimate(s, w, width=3)
    with pytest.raises(tessera.TesseraError, match="objective `fastest`"):
        tessera.estimate(s, w, objective="fastest")


def test_path_overrides_are_the_cli_set(cli):
    # the CLI's --set, by dict or by keywords with __ for the dots, and the power boundary
    arch, wl = "architectures/dgx-b200.ron", "workloads/llama3.1-8b-pretrain.ron"
    want = json.loads(
        cli("estimate", "--arch", arch, "--workload", wl, "--set", "device.tdp=400 W",
            "--power-boundary", "device", "--format", "json").stdout
    )
    by_dict = tessera.estimate(arch, wl, mapping="published", set={"device.tdp": "400 W"},
                               power_boundary="device")
    by_kw = tessera.estimate(arch, wl, mapping="published", device__tdp="400 W",
                             power_boundary="device")
    assert by_dict.to_dict() == want == by_kw.to_dict()
    assert want["power_limited"] and want["power_boundary"] == "device"
    full = tessera.estimate(arch, wl, mapping="published")
    assert by_dict.throughput_per_s < full.throughput_per_s
    # a bad path: the CLI's located diagnostic, with its hint
    with pytest.raises(tessera.TesseraError, match=r"--set device\.tpd"):
        tessera.estimate(arch, wl, mapping="published", device__tpd="400 W")


def test_stub_fields_are_the_contract():
    """The .pyi names exactly the keys the estimate JSON has (no drift either way)."""
    stub = Path(tessera.__file__).with_name("__init__.pyi").read_text()
    cls = next(
        n for n in ast.parse(stub).body if isinstance(n, ast.ClassDef) and n.name == "Estimate"
    )
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    keys = set(tessera.estimate(ARCH, WORKLOAD).to_dict())
    assert fields == keys
    assert (Path(tessera.__file__).parent / "py.typed").exists()


def test_compare_is_a_dataframe(cli):
    df = tessera.compare(THREE, SMALL)
    assert isinstance(df, pd.DataFrame) and len(df) == 3
    want = json.loads(cli("compare", *THREE, "--workload", SMALL, "--format", "json").stdout)
    assert list(df["system"]) == [r["system"] for r in want["systems"]]
    for i, r in enumerate(want["systems"]):
        assert df["feasible"][i] == r["feasible"]
        if r["feasible"]:
            assert df["throughput_per_s"][i] == r["throughput_per_s"]
            assert df["ratio_to_baseline.throughput"][i] == r["ratio_to_baseline"]["throughput"]
    assert df["ratio_to_baseline.throughput"][0] == 1.0
    assert df.attrs["baseline"] == want["baseline"]


def _rows(want):
    """The CLI's compare JSON rows as the DataFrame `tessera.compare` makes of them."""
    return pd.json_normalize(want["systems"])


# The README's second main-job command: training at one facility power budget
BUDGET = [
    "architectures/gb200-nvl72.ron",
    "architectures/cerebras-cs3-cluster.ron",
    "architectures/northpole-16.ron",
]
BUDGET_WORKLOAD = "workloads/llama3.1-8b-pretrain.ron"


def test_compare_power_budget_is_the_cli(cli):
    # issue 45: --power-budget and --power-boundary from Python, the same rows as the CLI's JSON
    want = json.loads(
        cli("compare", *BUDGET, "--workload", BUDGET_WORKLOAD, "--power-budget", "1 MW",
            "--power-boundary", "facility", "--format", "json").stdout
    )
    df = tessera.compare(BUDGET, BUDGET_WORKLOAD, power_budget="1 MW", power_boundary="facility")
    pd.testing.assert_frame_equal(df, _rows(want))
    assert df.attrs["power_budget_w"] == want["power_budget_w"] == 1e6
    assert df.attrs["power_boundary"] == want["power_boundary"] == "facility"
    assert list(df["feasible"]) == [True, True, False]  # no training state fits NorthPole
    assert (df["average_power_w"][:2] <= 1e6).all()
    # a budget in watts is the same budget
    by_watts = tessera.compare(BUDGET[:1], BUDGET_WORKLOAD, power_budget=1e6)
    pd.testing.assert_frame_equal(by_watts, _rows({"systems": want["systems"][:1]}))
    with pytest.raises(tessera.TesseraError, match="power_budget `lots`"):
        tessera.compare(BUDGET, BUDGET_WORKLOAD, power_budget="lots")


def test_compare_budget_basis_is_the_cli(cli):
    # issue 42: the budget against rated power (default) or modelled average power, as the CLI
    for basis in ("rated", "average"):
        want = json.loads(
            cli("compare", *BUDGET, "--workload", BUDGET_WORKLOAD, "--power-budget", "1 MW",
                "--budget-basis", basis, "--format", "json").stdout
        )
        df = tessera.compare(BUDGET, BUDGET_WORKLOAD, power_budget="1 MW", budget_basis=basis)
        pd.testing.assert_frame_equal(df, _rows(want))
        assert df.attrs["power_budget_basis"] == want["power_budget_basis"] == basis
    assert (df["rated_power_w"][:2] >= df["average_power_w"][:2]).all()
    with pytest.raises(tessera.TesseraError, match="budget_basis `peak`"):
        tessera.compare(BUDGET, BUDGET_WORKLOAD, power_budget="1 MW", budget_basis="peak")


def test_compare_goodput_and_water_are_the_cli(cli):
    # issue 46: --checkpoint-interval and --straggler from Python, the same rows as the CLI's
    # JSON; every row carries its water with its parts
    two = ["architectures/llama3-h100-16k.ron", "architectures/eos-h100.ron"]
    wl = "workloads/llama3.1-405b-pretrain.ron"
    want = json.loads(
        cli("compare", *two, "--workload", wl, "--checkpoint-interval", "1h",
            "--straggler", "5%", "--format", "json").stdout
    )
    df = tessera.compare(two, wl, checkpoint_interval="1h", straggler="5%")
    pd.testing.assert_frame_equal(df, _rows(want))
    assert (df["goodput.checkpoint_interval_s"] == 3600.0).all()
    assert (df["goodput.straggler_slowdown"] == 0.05).all()
    parts = df["cost.water_onsite_l"] + df["cost.water_offsite_l"]
    assert ((df["water_l"] - parts).abs() <= 1e-9 * df["water_l"]).all()
    e = tessera.estimate(two[0], wl)
    assert e.water_l == pytest.approx(e.cost["water_onsite_l"] + e.cost["water_offsite_l"])
    with pytest.raises(tessera.TesseraError, match="straggler slowdown `fast`"):
        tessera.compare(two, wl, straggler="fast")


def test_set_reaches_compare(cli):
    # --set on every system (each resolving its own paths), at a device power boundary
    two = ["architectures/dgx-h100.ron", "architectures/dgx-b200.ron"]
    wl = "workloads/llama3.1-8b-pretrain.ron"
    opts = ["--devices", "8", "--power-boundary", "device"]
    want = json.loads(
        cli("compare", *two, "--workload", wl, *opts, "--set", "device.tdp=400 W",
            "--set", "workload.global_batch=64", "--format", "json").stdout
    )
    by_dict = tessera.compare(two, wl, devices=8, power_boundary="device",
                              set={"device.tdp": "400 W", "workload.global_batch": 64})
    by_kw = tessera.compare(two, wl, devices=8, power_boundary="device",
                            device__tdp="400 W", workload__global_batch=64)
    pd.testing.assert_frame_equal(by_dict, _rows(want))
    pd.testing.assert_frame_equal(by_kw, _rows(want))
    full = tessera.compare(two, wl, devices=8, power_boundary="device",
                           set={"workload.global_batch": 64})
    assert (by_dict["average_power_w"] < full["average_power_w"]).all()
    assert list(by_dict["power_limited"]) == [True, True]
    # a bad path: the CLI's located diagnostic, for each system
    with pytest.raises(tessera.TesseraError, match=r"--set device\.tpd") as e:
        tessera.compare(two, wl, device__tpd="400 W")
    assert str(e.value).count("--set device.tpd") == 2
    with pytest.raises(tessera.TesseraError, match="compare\\(\\) does not take width"):
        tessera.compare(two, wl, width=3)


def test_software_stack_is_the_cli_flag(cli):
    # --software: the same stack file, read and checked by the same library code
    arch, wl = "architectures/dgx-h100.ron", "workloads/llama2-70b-lora.ron"
    sw = "architectures/software/nemo-24.04.ron"
    want = json.loads(
        cli("estimate", "--arch", arch, "--workload", wl, "--software", sw, "--format",
            "json").stdout
    )
    e = tessera.estimate(arch, wl, mapping="published", software=Path(sw))
    assert e.to_dict() == want and want["software"].startswith("NVIDIA NeMo")
    assert e.step_time_s > tessera.estimate(arch, wl, mapping="published").step_time_s
    two = ["architectures/dgx-h100.ron", "architectures/dgx-b200.ron"]
    want = json.loads(
        cli("compare", *two, "--workload", wl, "--software", sw, "--format", "json").stdout
    )
    df = tessera.compare(two, wl, software=sw)
    assert df.attrs["software"] == want["software"] == want["systems"][0]["software"]
    assert list(df["step_time_s"]) == [r["step_time_s"] for r in want["systems"]]
    with pytest.raises(tessera.TesseraError, match="no such file"):
        tessera.estimate(arch, wl, software="architectures/software/none.ron")


def test_serving_options_are_the_cli_flags(cli):
    # --slo, --min-user-rate and --concurrency, parsed and set by the same library code
    arch, wl = "architectures/dgx-h100.ron", "workloads/llama3.1-8b-serving.ron"
    want = json.loads(
        cli("estimate", "--arch", arch, "--workload", wl, "--mapping", "auto", "--slo",
            "tpot<=5ms", "--concurrency", "1", "--format", "json").stdout
    )
    e = tessera.estimate(arch, wl, mapping="auto", slo="tpot<=5ms", concurrency=1)
    assert e.to_dict() == want and want["slo"] and want["concurrency"] == 1
    want = json.loads(
        cli("estimate", "--arch", arch, "--workload", wl, "--mapping", "auto",
            "--min-user-rate", "100/s", "--format", "json").stdout
    )
    assert tessera.estimate(arch, wl, mapping="auto", min_user_rate="100/s").to_dict() == want
    three = ["architectures/dgx-h100.ron", "architectures/dgx-b200.ron"]
    want = json.loads(
        cli("compare", *three, "--workload", wl, "--slo", "tpot<=20ms", "--format", "json").stdout
    )
    df = tessera.compare(three, wl, slo="tpot<=20ms")
    assert df.attrs["slo"] == want["slo"] and df.attrs["concurrency"] == want["concurrency"]
    assert list(df["throughput_per_s"]) == [r["throughput_per_s"] for r in want["systems"]]
    with pytest.raises(tessera.TesseraError, match="apply to transformer inference"):
        tessera.estimate(ARCH, WORKLOAD, slo="tpot<=5ms")
    with pytest.raises(tessera.TesseraError, match="error: "):
        tessera.estimate(arch, wl, concurrency="lots")


def test_bad_file_raises_the_cli_diagnostics(cli):
    bad = "tests/bad/multi-error-system.ron"
    with pytest.raises(tessera.TesseraError) as e:
        tessera.load_system(bad)
    msg = str(e.value)
    assert re.search(re.escape(bad) + r":\d+:\d+: error: ", msg), msg
    assert "hint:" in msg
    # the same diagnostics, character for character, as `tessera check` prints
    printed = cli("check", bad, check=False).stderr
    for line in msg.splitlines():
        assert line in printed
    assert msg.count(": error: ") >= 2  # every error at once


def test_bad_sweep_option_is_located():
    with pytest.raises(tessera.TesseraError) as e:
        tessera.sweep(GRID, vary={"device.tdpp": "1000 W .. 1200 W step 100 W"}, backend="cpu")
    assert "device.tdpp" in str(e.value) and "vary=" in str(e.value)
    with pytest.raises(tessera.TesseraError, match="sampling need `points= N`"):
        tessera.sweep(GRID, sampling="lhs")


def test_sweep_table_equals_the_cli(cli, tmp_path):
    t = tessera.sweep(GRID, backend="cpu")
    assert isinstance(t, pa.Table)
    s = tessera.summary(t)
    want = json.loads(cli("sweep", GRID, "--backend", "cpu", "--quiet", "--format", "json").stdout)
    assert s == want
    assert t.num_rows == want["total_points"]
    assert t.schema.field("index").type == pa.uint64()
    assert t.schema.field("feasible").type == pa.bool_()
    assert pa.types.is_dictionary(t.schema.field("mapping").type)
    assert t.schema.field("device.tdp").metadata[b"unit"] == b"W"
    assert t.column("feasible").to_numpy().sum() == want["feasible"]
    df = t.to_pandas()
    assert df["index"].tolist() == list(range(t.num_rows))
    best = df.loc[df["index"] == want["top"][0]["index"]].iloc[0]
    assert best["throughput_per_s"] == want["top"][0]["throughput_per_s"]
    assert best["step_time_s"] == want["top"][0]["step_time_s"]


def test_parquet_and_arrow_files_read_back(cli, tmp_path):
    p = tmp_path / "points.parquet"
    a = tmp_path / "points.arrow"
    s = tessera.sweep_summary(GRID, backend="cpu", out=p)
    df = pd.read_parquet(p)
    assert len(df) == s["total_points"] and df["feasible"].sum() == s["feasible"]
    assert tessera.summary(p) == s
    # the CLI's files
    cli("sweep", GRID, "--backend", "cpu", "--quiet", "--out", str(a))
    cli("sweep", GRID, "--backend", "cpu", "--quiet", "--out", str(tmp_path / "cli.parquet"))
    t = pa.ipc.open_file(a).read_all()
    assert t.num_rows == s["total_points"]
    t2 = pq.read_table(tmp_path / "cli.parquet")
    assert t2.num_rows == s["total_points"]
    assert pq.read_table(p).drop_columns([]).equals(t2)
    assert tessera.summary(a)["top"] == s["top"]


def test_points_files_appear_only_when_complete(tmp_path):
    # written under a temporary name and renamed when complete, as the CLI does (issue 44)
    p = tmp_path / "points.parquet"
    s = tessera.sweep_summary(GRID, backend="cpu", out=p)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["points.parquet"]
    assert len(pd.read_parquet(p)) == s["total_points"]
    with pytest.raises(tessera.TesseraError, match="cannot create"):
        tessera.sweep_summary(GRID, backend="cpu", out=tmp_path / "no-such-dir" / "p.parquet")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["points.parquet"]


def test_dict_spec_and_options(cli):
    spec = {
        "arch": "architectures/gb200-nvl72.ron",
        "workload": "workloads/llama3-70b-serving.ron",
        "vary": {
            "device.peak.fp8": "2.5 PFLOP/s..10 PFLOP/s log 4",
            "scale_up.bandwidth": ["0.9 TB/s", "1.8 TB/s"],
        },
    }
    t = tessera.sweep(spec, backend="cpu")
    want = json.loads(
        cli("sweep", "--arch", spec["arch"], "--workload", spec["workload"],
            "--vary", "device.peak.fp8=2.5 PFLOP/s..10 PFLOP/s log 4",
            "--vary", "scale_up.bandwidth=[0.9 TB/s, 1.8 TB/s]",
            "--backend", "cpu", "--quiet", "--format", "json").stdout
    )
    assert tessera.summary(t) == want and t.num_rows == want["total_points"] == 8 * len(want["programs"])
    shard = tessera.sweep_summary(GRID, backend="cpu", shard=(1, 3), top=3)
    assert shard["shards"][0]["index"] == 1 and len(shard["top"]) == 3


def test_merge_equals_one_run():
    whole = tessera.sweep_summary(GRID, backend="cpu")
    parts = [tessera.sweep_summary(GRID, backend="cpu", shard=(i, 4)) for i in (2, 0, 3, 1)]
    m = tessera.merge(parts)
    for k in ("top", "front", "evaluated", "feasible", "infeasible", "infeasible_by_code"):
        assert m[k] == whole[k], k
    assert m["complete"] and m["missing"] == []
    with pytest.raises(tessera.TesseraError, match="allow-partial"):
        tessera.merge(parts[:2])
    with pytest.warns(UserWarning, match="cover"):
        p = tessera.merge(parts[:2], allow_partial=True)
    assert not p["complete"] and p["missing"]
    edited = json.loads(json.dumps(parts[0]))
    edited["feasible"] += 1
    with pytest.raises(tessera.TesseraError, match="checksum"):
        tessera.merge([edited] + parts[1:])


def test_sweep_releases_the_gil():
    ticks = 0
    done = threading.Event()

    def run():
        tessera.sweep_summary(
            "architectures/sweeps/gb200-cluster-random.ron", backend="cpu", points=400_000
        )
        done.set()

    th = threading.Thread(target=run)
    th.start()
    start = time.perf_counter()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    elapsed = time.perf_counter() - start
    th.join()
    # with the GIL held for the whole sweep this loop could not run during it (a tick or two)
    assert ticks >= 20, (ticks, elapsed)


def test_compare_csv_is_numeric_data(cli):
    # issue 45 item 2: `--format csv` is data: one row per system, the JSON keys as columns,
    # numbers in SI units that pandas reads as numbers (never "8.51 M tokens/s")
    import io

    text = cli("compare", *THREE, "--workload", SMALL, "--format", "csv").stdout
    df = pd.read_csv(io.StringIO(text))
    want = json.loads(cli("compare", *THREE, "--workload", SMALL, "--format", "json").stdout)
    assert len(df) == len(want["systems"])
    assert list(df["system"]) == [r["system"] for r in want["systems"]]
    for col in ["throughput_per_s", "step_time_s", "average_power_w", "ratio_to_baseline.throughput"]:
        assert pd.api.types.is_numeric_dtype(df[col]), (col, df[col].dtype)
    for i, r in enumerate(want["systems"]):
        if r["feasible"]:
            assert df["throughput_per_s"][i] == pytest.approx(r["throughput_per_s"], rel=1e-12)
    assert len(set(df.columns)) == len(df.columns)


def test_a_serving_sweep_converts_to_pandas():
    # issue 45: mappings that print alike made the `mapping` dictionary repeat labels, and
    # pandas refused it ("Categorical categories must be unique")
    t = tessera.sweep(
        {
            "arch": "architectures/gb200-nvl72.ron",
            "workload": "workloads/llama3.1-70b-serving.ron",
            "vary": {"device.tdp": "800 W .. 1200 W step 200 W"},
        },
        backend="cpu",
    )
    df = t.to_pandas()
    assert len(df) == t.num_rows > 0
    labels = t.column("mapping").combine_chunks().dictionary.to_pylist()
    assert len(labels) == len(set(labels))
    assert df["mapping"].nunique() == len(set(df["mapping"].astype(str)))
