# %% [markdown]
# # tessera from Python: compare three systems, sweep a million design points, plot the front
#
# A percent-format notebook (open it in Jupyter with jupytext, or VS Code / PyCharm run its
# cells); `python python/examples/tour.py` runs it headless and writes `pareto.png`.
# Shipped files are named from the repository root.

# %%
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; remove in a notebook
import matplotlib.pyplot as plt

import tessera

ROOT = Path(__file__).resolve().parents[2] if "__file__" in globals() else Path.cwd()
os.chdir(ROOT)
OUT = Path(os.environ.get("TESSERA_EXAMPLE_OUT", "pareto.png"))

# %% [markdown]
# ## One estimate: the fields of `tessera estimate --format json`

# %%
e = tessera.estimate("architectures/eos-h100.ron", "workloads/llama3.1-405b-pretrain.ron",
                     mapping="published")
print(e)
print(f"step {e.step_time_s:.3f} s, MFU {e.mfu:.1%}, bottleneck: {e.bottleneck}")

# %% [markdown]
# ## Three systems side by side (ratios to the first)

# %%
df = tessera.compare(
    ["architectures/gb200-nvl72.ron", "architectures/cerebras-cs3.ron",
     "architectures/northpole-16.ron"],
    "workloads/granite-3b-northpole.ron",
)
print(df[["system", "devices", "throughput_per_s", "ratio_to_baseline.throughput",
          "average_power_w", "perf_per_watt", "bottleneck"]].to_string())

# %% [markdown]
# ## A million-point sweep as a pyarrow Table
#
# The Latin-hypercube space around the GB200 cluster, 500,000 machine points on each of its two
# device counts: 1e6 points, every one a row.

# %%
t0 = time.perf_counter()
table = tessera.sweep("architectures/sweeps/gb200-cluster-random.ron", points=500_000)
secs = time.perf_counter() - t0
summary = tessera.summary(table)
print(f"{table.num_rows:,} points in {secs:.2f} s ({table.num_rows / secs / 1e6:.2f} M/s), "
      f"{summary['feasible']:,} feasible")
assert table.num_rows == 1_000_000

# %% [markdown]
# ## The Pareto front: throughput against energy per token

# %%
a, b = summary["pareto"]
keys = {"throughput": "throughput_per_s", "energy": "energy_per_unit_j",
        "power": "average_power_w", "step_time": "step_time_s", "mfu": "mfu",
        "perf_per_watt": None}
cloud = table.filter(table.column("feasible")).to_pandas()
cloud = cloud.sample(min(len(cloud), 20_000), random_state=0)
front = summary["front"]
fig, ax = plt.subplots(figsize=(8, 5))
ax.scatter(cloud[keys[a]], cloud[keys[b]], s=2, alpha=0.3, label="feasible points (sample)")
ax.plot([p[keys[a]] for p in front], [p[keys[b]] for p in front], "r.-",
        label=f"Pareto front ({len(front)} points)")
ax.set_xlabel(f"{a} ({summary['unit']}/s)")
ax.set_ylabel(f"{b} (J per {summary['unit'].rstrip('s')})")
ax.set_title(summary["name"], fontsize=9)
ax.legend()
fig.tight_layout()
fig.savefig(OUT, dpi=100)
print(f"wrote {OUT}")
