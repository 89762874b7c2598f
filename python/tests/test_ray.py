"""`tessera.ray.sweep` on a real two-node Ray cluster (started on loopback by the fixture): the
merged shards equal one run, and the shards' files are one Parquet dataset of every point."""

import json

import pyarrow.dataset as ds

import tessera
import tessera.ray

GRID = "architectures/sweeps/gb200-cluster-llama405b.ron"


def test_ray_sweep_equals_one_run(ray_cluster, tmp_path):
    ray = ray_cluster
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    whole = tessera.sweep_summary(GRID, backend="cpu")
    out = tmp_path / "points"
    m = tessera.ray.sweep(GRID, shards=4, out=out)
    for k in ("top", "front", "evaluated", "feasible", "infeasible", "infeasible_by_code",
              "fingerprint", "total_points"):
        assert m[k] == whole[k], k
    assert sorted(s["index"] for s in m["shards"]) == [0, 1, 2, 3]
    d = ds.dataset(out, format="parquet")
    t = d.to_table()
    assert t.num_rows == whole["total_points"]
    assert sorted(t.column("index").to_pylist()) == list(range(whole["total_points"]))
    assert t.column("feasible").to_numpy().sum() == whole["feasible"]
    assert json.loads((out / "_summary.json").read_text())["top"] == whole["top"]


def test_ray_sweep_of_options(ray_cluster):
    spec = {
        "arch": "architectures/gb200-nvl72.ron",
        "workload": "workloads/llama3-70b-serving.ron",
        "vary": {"device.peak.fp8": "2.5 PFLOP/s..10 PFLOP/s log 4"},
    }
    m = tessera.ray.sweep(spec, shards=3, top=2)
    whole = tessera.sweep_summary(spec, backend="cpu", top=2)
    assert m["top"] == whole["top"] and m["front"] == whole["front"]
