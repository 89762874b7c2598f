"""Sweep rate of the Python package against the CLI's at 1e6 points, and Ray's overhead per shard.

    python python/bench/sweep_rate.py [--ray]

Not a test (performance is reported as ratios, never asserted on timings). Runs from the
repository root; needs the release binary (`cargo build --release`). With --ray it starts a
one-node Ray cluster on loopback (stopped afterwards) and times N shards against one run.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tessera

ROOT = Path(__file__).resolve().parents[2]
os.chdir(ROOT)
SPEC = "architectures/sweeps/gb200-cluster-random.ron"
POINTS = 500_000  # per device count: 1e6 points
BIN = os.environ.get("TESSERA_BIN", str(ROOT / "target/release/tessera"))
REPS = int(os.environ.get("REPS", "3"))


def best(f):
    ts = []
    for _ in range(REPS):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def cli(*extra):
    subprocess.run(
        [BIN, "sweep", SPEC, "--points", str(POINTS), "--backend", "cpu", "--quiet",
         "--format", "json", *extra],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def main():
    n = 2 * POINTS
    tmp = Path(tempfile.mkdtemp())
    rows = {}
    rows["summary only: CLI"] = best(lambda: cli())
    rows["summary only: Python sweep_summary()"] = best(
        lambda: tessera.sweep_summary(SPEC, points=POINTS, backend="cpu"))
    rows["every point: CLI --out .arrow"] = best(lambda: cli("--out", str(tmp / "p.arrow")))
    rows["every point: Python sweep() -> pyarrow.Table"] = best(
        lambda: tessera.sweep(SPEC, points=POINTS, backend="cpu"))
    rows["every point: CLI --out .parquet"] = best(lambda: cli("--out", str(tmp / "p.parquet")))
    rows["every point: Python sweep(out=.parquet)"] = best(
        lambda: tessera.sweep_summary(SPEC, points=POINTS, backend="cpu", out=tmp / "q.parquet"))
    for k, v in rows.items():
        print(f"{k:48s} {v:7.3f} s  {n / v / 1e6:6.2f} M points/s")
    pairs = [("summary only: CLI", "summary only: Python sweep_summary()"),
             ("every point: CLI --out .arrow", "every point: Python sweep() -> pyarrow.Table"),
             ("every point: CLI --out .parquet", "every point: Python sweep(out=.parquet)")]
    for a, b in pairs:
        print(f"Python/CLI rate, {a.split(':')[0]} ({b.split(': ')[1]}): {rows[a] / rows[b]:.3f}")
    if "--ray" in sys.argv:
        ray_overhead()


def ray_overhead():
    import ray
    import tessera.ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster, no token file left
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        spec = {"file": SPEC, "points": POINTS}
        tessera.ray.sweep(spec, shards=2)  # warm the workers
        one = best(lambda: tessera.sweep_summary(SPEC, points=POINTS, backend="cpu"))
        for shards in (2, 8, 32):
            t = best(lambda: tessera.ray.sweep(spec, shards=shards))
            print(f"ray, {shards:2d} shards: {t:.3f} s vs one run {one:.3f} s: "
                  f"{(t - one) / shards * 1e3:+.1f} ms per shard")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
