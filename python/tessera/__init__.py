"""tessera from Python: model wafer-scale and multi-chip AI systems.

The Rust library does the work (``tessera._tessera``); this package shapes its results for
notebooks: an estimate as an object with the JSON contract's fields, a comparison as a pandas
DataFrame, a sweep's points as a ``pyarrow.Table`` (built from the Rust Arrow arrays without a
copy). Invalid input raises :class:`TesseraError`, whose message carries the CLI's located
diagnostics (``file:line:col``, the source line, a hint).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _tessera
from ._tessera import System, TesseraError, Workload, __version__

__all__ = [
    "Estimate",
    "System",
    "TesseraError",
    "Workload",
    "__version__",
    "compare",
    "estimate",
    "load_system",
    "load_workload",
    "merge",
    "summary",
    "sweep",
    "sweep_summary",
]

PathLike = Union[str, "os.PathLike[str]"]

SUMMARY_KEY = b"tessera:summary"


def load_system(path: PathLike) -> System:
    """Load and validate an architecture file (``System(...)``)."""
    return _tessera.load_system(os.fspath(path))


def load_workload(path: PathLike) -> Workload:
    """Load and validate a workload file (``Workload(...)``)."""
    return _tessera.load_workload(os.fspath(path))


def _system(s: Union[System, PathLike]) -> System:
    return s if isinstance(s, System) else load_system(s)


def _workload(w: Union[Workload, PathLike]) -> Workload:
    return w if isinstance(w, Workload) else load_workload(w)


class Estimate:
    """One estimate: every key of ``tessera estimate --format json`` as an attribute.

    The fields are the JSON contract's (``step_time_s``, ``throughput_per_s``, ``mfu``, ...);
    ``to_dict()`` gives the JSON object itself.
    """

    __slots__ = ("_d",)

    def __init__(self, d: Dict[str, Any]):
        object.__setattr__(self, "_d", d)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._d[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an Estimate is read-only")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._d))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Estimate) and self._d == other._d

    def to_dict(self) -> Dict[str, Any]:
        """The estimate as ``tessera estimate --format json`` prints it (a copy)."""
        return json.loads(json.dumps(self._d))

    def __repr__(self) -> str:
        d = self._d
        if not d.get("feasible"):
            return f"Estimate({d['system']!r} on {d['workload']!r}: infeasible, {d.get('reason')})"
        return (
            f"Estimate({d['system']!r} on {d['workload']!r}: step {d['step_time_s']:.4g} s, "
            f"{d['throughput_per_s']:.4g} {d['throughput_unit']}/s, MFU {d['mfu']:.1%}, "
            f"{d['average_power_w']:.4g} W, {d['devices']} devices)"
        )


_ESTIMATE_OPTIONS = (
    "devices",
    "objective",
    "power_boundary",
    "slo",
    "min_user_rate",
    "concurrency",
    "software",
    "checkpoint_interval",
    "straggler",
)


def _opt(v: Any) -> Optional[str]:
    return None if v is None else str(v)


def _path(v: Optional[PathLike]) -> Optional[str]:
    return None if v is None else os.fspath(v)


def _power(v: Union[str, float, None]) -> Optional[str]:
    """A power as ``--power-budget`` takes it: a quantity ("20 MW"), or a number of watts."""
    if v is None or isinstance(v, str):
        return v
    return f"{float(v)!r} W"


def _money(v: Union[str, float, None]) -> Optional[str]:
    """An amount as ``--budget`` takes it: a quantity ("$10M"), or a number of US dollars."""
    if v is None or isinstance(v, str):
        return v
    return f"{float(v)!r} USD"


def _pairs(
    fn: str, set: Optional[Mapping[str, Any]], keywords: Mapping[str, Any], options: Sequence[str]
) -> List[Tuple[str, str]]:
    """``set={path: value}`` and path keywords (``device__tdp="400 W"``) as ``--set`` pairs; a
    keyword that is neither an option nor a path raises."""
    pairs = [(str(k), str(v)) for k, v in (set or {}).items()]
    unknown = []
    for key, value in keywords.items():
        if key in options:
            continue
        if "__" in key:
            pairs.append((key.replace("__", "."), str(value)))
        else:
            unknown.append(key)
    if unknown:
        raise TesseraError(
            f"error: {fn}() does not take {', '.join(sorted(unknown))}; "
            f"it takes {', '.join(options)}, set={{path: value}} or path keywords "
            "with __ for the dots (device__tdp=\"400 W\")"
        )
    return pairs


def estimate(
    system: Union[System, PathLike],
    workload: Union[Workload, PathLike],
    mapping: Optional[PathLike] = None,
    set: Optional[Mapping[str, Any]] = None,
    **overrides: Any,
) -> Estimate:
    """Estimate ``workload`` on ``system``, as ``tessera estimate`` does.

    ``mapping``: ``None`` (as the CLI without ``--mapping``: the workload's published mapping,
    else the best), ``"auto"`` (search every legal mapping, as ``--mapping auto``),
    ``"published"`` (the default, named) or a mapping file. Options, as the CLI's:
    ``devices=N`` (default: the whole system), ``objective="time" | "energy"`` (what ``auto``
    minimises), ``power_boundary="device" | "node" | "rack" | "it" | "facility"``; serving, as
    ``--slo``, ``--min-user-rate`` and ``--concurrency``: ``slo="ttft<=2s,tpot<=40ms"``,
    ``min_user_rate="50/s"``, ``concurrency=64`` or ``"max"``;
    ``software="architectures/software/nemo-24.04.ron"`` (the stack the run executes on, as
    ``--software``: its per-step time joins each training step). Overrides by sweep path, as
    ``--set PATH=VALUE``: ``set={"device.tdp": "400 W", "workload.global_batch": 1024}``, or as
    keywords with ``__`` for the dots: ``device__tdp="400 W"``, ``mapping__tp=8``. Training
    goodput, as ``--checkpoint-interval`` and ``--straggler``: ``checkpoint_interval="auto"`` (the
    default) or ``"30min"``, ``straggler="5%"``; the estimate's ``goodput`` carries the figures.
    """
    pairs = _pairs("estimate", set, overrides, _ESTIMATE_OPTIONS)
    text = _tessera.estimate_json(
        _system(system),
        _workload(workload),
        mapping=_path(mapping),
        objective=overrides.get("objective", "time"),
        devices=overrides.get("devices"),
        set=pairs,
        power_boundary=overrides.get("power_boundary", "facility"),
        slo=_opt(overrides.get("slo")),
        min_user_rate=_opt(overrides.get("min_user_rate")),
        concurrency=_opt(overrides.get("concurrency")),
        software=_path(overrides.get("software")),
        checkpoint_interval=str(overrides.get("checkpoint_interval", "auto")),
        straggler=_opt(overrides.get("straggler")),
    )
    return Estimate(json.loads(text))


_COMPARE_OPTIONS = (
    "mapping",
    "objective",
    "devices",
    "slo",
    "min_user_rate",
    "concurrency",
    "software",
    "set",
    "power_budget",
    "power_boundary",
    "budget_basis",
    "budget",
    "checkpoint_interval",
    "straggler",
)


def compare(
    systems: Sequence[Union[System, PathLike]],
    workload: Union[Workload, PathLike],
    mapping: Optional[PathLike] = None,
    objective: str = "time",
    devices: Optional[int] = None,
    slo: Optional[str] = None,
    min_user_rate: Optional[str] = None,
    concurrency: Union[int, str, None] = None,
    software: Optional[PathLike] = None,
    set: Optional[Mapping[str, Any]] = None,
    power_budget: Union[str, float, None] = None,
    power_boundary: str = "facility",
    budget_basis: str = "rated",
    budget: Union[str, float, None] = None,
    checkpoint_interval: str = "auto",
    straggler: Optional[str] = None,
    **path_overrides: Any,
):
    """Compare systems on one workload, as ``tessera compare --format json``; a pandas DataFrame
    with one row per system (the estimate's keys, ``breakdown_s.*`` and ``mapping.*`` flattened)
    and ``ratio_to_baseline.*`` columns (the first system is the baseline).

    Every option of the CLI's ``compare``, with its default: ``mapping=None`` (each system's best
    mapping, as without ``--mapping``; or ``"auto"``, ``"published"`` or a mapping file for
    every system), ``objective``, ``devices`` (capped at each system's size), serving options
    and ``software`` (every system on that stack) as :func:`estimate`'s; ``power_budget="1 MW"``
    (or watts as a number; each system as many whole nodes as the budget holds, as
    ``--power-budget``) at ``power_boundary`` (as ``--power-boundary``, default
    ``"facility"``), held against ``budget_basis`` (as ``--budget-basis``: ``"rated"``, the
    rated power of what each system deploys, the default, or ``"average"``, the run's modelled
    average power); ``budget="$10M"`` (or US dollars as a number: a capital budget, each system
    as many whole nodes as its deployed capital allows, as ``--budget``); ``set={path: value}`` or path keywords with ``__`` for the dots, as
    ``--set`` (applied to every system, each resolving its own paths). The load, target, stack,
    budget and boundary every system is put at are in ``df.attrs`` (``concurrency``, ``slo``,
    ``software``, ``power_budget_w``, ``power_budget_basis``, ``budget_usd``,
    ``power_boundary``). Every row carries ``cost_per_unit_usd``, ``carbon_kg_co2e``,
    ``water_l`` and their parts (``cost.*``; docs/cost.md); ``checkpoint_interval`` and
    ``straggler`` are :func:`estimate`'s (``--checkpoint-interval``, ``--straggler``), every
    system alike, and a system that states its reliability carries ``goodput.*``."""
    import pandas as pd

    pairs = _pairs("compare", set, path_overrides, _COMPARE_OPTIONS)
    text = _tessera.compare_json(
        [_system(s) for s in systems],
        _workload(workload),
        mapping=_path(mapping),
        objective=objective,
        devices=devices,
        slo=_opt(slo),
        min_user_rate=_opt(min_user_rate),
        concurrency=_opt(concurrency),
        software=_path(software),
        set=pairs,
        power_budget=_power(power_budget),
        power_boundary=power_boundary,
        budget_basis=budget_basis,
        budget=_money(budget),
        checkpoint_interval=str(checkpoint_interval),
        straggler=_opt(straggler),
    )
    c = json.loads(text)
    df = pd.json_normalize(c["systems"])
    for key in (
        "workload",
        "baseline",
        "power_boundary",
        "power_budget_w",
        "power_budget_basis",
        "budget_usd",
        "concurrency",
        "slo",
        "software",
    ):
        df.attrs[key] = c.get(key)
    return df


SweepSpec = Union[PathLike, Mapping[str, Any]]

_SPEC_KEYS = (
    "file",
    "arch",
    "workload",
    "mapping",
    "vary",
    "sampling",
    "points",
    "seed",
    "power_budget",
    "memory_floor",
    "objective",
    "pareto",
    "top",
)


def _axis(path: str, values: Any) -> str:
    """``PATH=VALUES`` as ``--vary`` takes it, from a string or a list of values."""
    if isinstance(values, str):
        return f"{path}={values}"
    if isinstance(values, Iterable):
        return f"{path}=[{', '.join(str(v) for v in values)}]"
    return f"{path}={values}"


def _spec_kwargs(spec: Optional[SweepSpec], options: Dict[str, Any]) -> Dict[str, Any]:
    """A sweep file and/or a dict of the sweep's options as ``run_sweep``'s keywords."""
    d: Dict[str, Any] = {}
    if spec is None:
        pass
    elif isinstance(spec, Mapping):
        d.update(spec)
    else:
        d["file"] = os.fspath(spec)
    d.update(options)
    unknown = sorted(set(d) - set(_SPEC_KEYS))
    if unknown:
        raise TesseraError(
            f"error: a sweep takes no `{'`, `'.join(unknown)}`; it takes {', '.join(_SPEC_KEYS)}"
        )
    kw: Dict[str, Any] = {}
    for k in ("file", "arch", "workload", "mapping"):
        if d.get(k) is not None:
            kw[k] = os.fspath(d[k])
    vary = d.get("vary") or {}
    if isinstance(vary, Mapping):
        kw["vary"] = [_axis(p, v) for p, v in vary.items()]
    else:  # already PATH=VALUES strings
        kw["vary"] = [str(v) for v in vary]
    for k in ("sampling", "points", "seed", "objective", "top"):
        if d.get(k) is not None:
            kw[k] = d[k]
    for k in ("power_budget", "memory_floor"):
        if d.get(k) is not None:
            kw[k] = str(d[k])
    if d.get("pareto") is not None:
        p = d["pareto"]
        kw["pareto"] = p.split(",") if isinstance(p, str) else list(p)
    return kw


def _run(
    spec: Optional[SweepSpec],
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    keep_points: bool = True,
    out: Optional[PathLike] = None,
    **options: Any,
):
    kw = _spec_kwargs(spec, options)
    return _tessera.run_sweep(
        shard=shard,
        backend=backend,
        keep_points=keep_points,
        out=None if out is None else os.fspath(out),
        **kw,
    )


def sweep(
    spec: Optional[SweepSpec] = None,
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    out: Optional[PathLike] = None,
    **options: Any,
):
    """Evaluate a design space, as ``tessera sweep``: every point as a ``pyarrow.Table``.

    ``spec``: a sweep file (see ``architectures/sweeps/``), or a dict of the sweep's options
    (``arch``, ``workload``, ``mapping``, ``vary={path: "lo .. hi step s" | [values]}``,
    ``sampling``, ``points``, ``seed``, ``power_budget``, ``memory_floor``, ``objective``,
    ``pareto``, ``top``); keyword options override or extend it. ``shard=(i, n)`` evaluates shard
    ``i`` of ``n``; ``out`` also streams the points to a ``.parquet`` / ``.arrow`` file. The
    summary (best points, Pareto front, counts: what ``sweep --summary`` writes) is in the
    table's schema metadata: ``tessera.summary(table)``. The GIL is released while it runs.
    """
    _, table = _run(spec, shard=shard, backend=backend, keep_points=True, out=out, **options)
    return table


def sweep_summary(
    spec: Optional[SweepSpec] = None,
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    out: Optional[PathLike] = None,
    **options: Any,
) -> Dict[str, Any]:
    """The sweep's summary only (no table in memory; ``out`` still streams every point)."""
    text, _ = _run(spec, shard=shard, backend=backend, keep_points=False, out=out, **options)
    return json.loads(text)


def summary(table_or_path: Any) -> Dict[str, Any]:
    """The summary a ``sweep()`` table, or a Parquet / Arrow file written by a sweep, carries."""
    import pyarrow as pa

    if isinstance(table_or_path, (pa.Table, pa.RecordBatch)):
        meta = table_or_path.schema.metadata or {}
    else:
        p = os.fspath(table_or_path)
        if p.lower().endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            meta = pq.read_metadata(p).metadata or {}
        else:
            import pyarrow.ipc as ipc

            with ipc.open_file(p) as f:
                meta = f.schema.metadata or {}
                # the IPC footer's custom metadata holds the summary
                meta = {**meta, **(getattr(f, "metadata", None) or {})}
    if SUMMARY_KEY not in meta:
        raise TesseraError(f"error: {table_or_path!r} carries no tessera sweep summary")
    return json.loads(meta[SUMMARY_KEY])


def merge(
    summaries: Sequence[Dict[str, Any]], top: Optional[int] = None, allow_partial: bool = False
) -> Dict[str, Any]:
    """Join shard summaries with ``tessera sweep merge``'s verified, order-independent merge: a
    summary edited after it was written, shards of different sweeps, overlaps and (unless
    ``allow_partial``) gaps raise ``TesseraError``; under ``allow_partial`` the result says
    ``complete: False`` with its ``missing`` ranges and the gap is issued as a ``UserWarning``."""
    import warnings

    text, warns = _tessera.merge_json([json.dumps(s) for s in summaries], top, allow_partial)
    for w in warns:
        warnings.warn(w, stacklevel=2)
    return json.loads(text)
