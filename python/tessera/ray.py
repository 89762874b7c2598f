"""Sweeps on a Ray cluster: ``tessera.ray.sweep(spec, shards=N)``.

Each shard (``--shard i/N``: a contiguous slice of the points) is a Ray task that calls the Rust
core and streams its points to one Parquet file of a dataset directory; the driver joins the
shards' summaries with ``sweep merge``'s order-independent merge, so the result equals one run's.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

import tessera

__all__ = ["sweep"]


def _absolute(spec: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    """The spec with its file paths made absolute (a worker's directory is not the driver's)."""
    d: Dict[str, Any] = {}
    if isinstance(spec, dict):
        d.update(spec)
    elif spec is not None:
        d["file"] = spec
    d.update(options)
    for k in ("file", "arch", "workload"):
        if d.get(k) is not None:
            d[k] = os.path.abspath(os.fspath(d[k]))
    m = d.get("mapping")
    if m is not None and m not in ("auto", "published"):
        d["mapping"] = os.path.abspath(os.fspath(m))
    return d


def _shard(spec: Dict[str, Any], i: int, n: int, out: Optional[str], backend: str) -> str:
    text, _ = tessera._run(spec, shard=(i, n), backend=backend, keep_points=False, out=out)
    return text


def sweep(
    spec: Any = None,
    *,
    shards: int,
    out: Optional[os.PathLike] = None,
    backend: str = "cpu",
    num_cpus: float = 1,
    top: Optional[int] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Run a sweep as ``shards`` Ray tasks on the cluster ``ray.init()`` connected to (or a local
    one started on demand) and return the merged summary (what ``tessera sweep merge`` prints as
    JSON). With ``out``, a directory: each shard writes ``part-IIIII.parquet`` there, one Parquet
    dataset of every point (``pyarrow.dataset.dataset(out)``). Paths must be readable from every
    node (a shared file system)."""
    import ray

    if shards < 1:
        raise tessera.TesseraError(f"error: shards={shards}: need at least one")
    d = _absolute(spec, options)
    outdir = None
    if out is not None:
        outdir = os.path.abspath(os.fspath(out))
        os.makedirs(outdir, exist_ok=True)
    if not ray.is_initialized():
        ray.init()
    task = ray.remote(num_cpus=num_cpus)(_shard)
    refs = [
        task.remote(
            d,
            i,
            shards,
            None if outdir is None else os.path.join(outdir, f"part-{i:05d}.parquet"),
            backend,
        )
        for i in range(shards)
    ]
    parts = [json.loads(t) for t in ray.get(refs)]
    merged = tessera.merge(parts, top=top)
    if outdir is not None:
        with open(os.path.join(outdir, "_summary.json"), "w") as f:
            json.dump(merged, f, indent=2)
    return merged
