"""Type stubs of the tessera package (the implementation is __init__.py)."""

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import pandas
import pyarrow

from ._tessera import System as System
from ._tessera import TesseraError as TesseraError
from ._tessera import Workload as Workload
from ._tessera import __version__ as __version__

PathLike = Union[str, os.PathLike[str]]
SweepSpec = Union[PathLike, Mapping[str, Any]]

class Estimate:
    """The fields of `tessera estimate --format json` (the contract pinned in tests/it/contracts.rs)."""

    system: str
    workload: str
    feasible: bool
    reason: Optional[str]
    reason_code: Optional[str]
    step_time_s: Optional[float]
    throughput_per_s: Optional[float]
    throughput_unit: str
    time_to_train_s: Optional[float]
    mfu: Optional[float]
    average_power_w: Optional[float]
    rated_power_w: Optional[float]
    error_band: Optional[Dict[str, Any]]
    energy_j: Optional[float]
    energy_per_step_j: Optional[float]
    breakdown_s: Optional[Dict[str, float]]
    bottleneck: Optional[str]
    bottleneck_detail: Optional[str]
    mapping: Optional[Dict[str, Any]]
    devices: int
    idle_devices: int
    scaling_efficiency: Optional[float]
    placement: Optional[str]
    memory_per_device_bytes: Optional[float]
    host_memory_per_device_bytes: Optional[float]
    mappings_tried: Optional[int]
    perf_per_watt: Optional[float]
    energy_per_unit_j: Optional[float]
    latency_per_token_s: Optional[float]
    power_boundary: str
    power_limited: Optional[bool]
    throttle: Optional[float]
    device_power_w: Optional[float]
    demanded_device_power_w: Optional[float]
    device_power_limit_w: Optional[float]
    concurrency: Optional[int]
    prompt_tokens: Optional[int]
    output_tokens: Optional[int]
    ttft_s: Optional[float]
    tpot_s: Optional[float]
    user_tokens_per_s: Optional[float]
    system_tokens_per_s: Optional[float]
    prefill_time_s: Optional[float]
    max_concurrency: Optional[int]
    slo: Optional[str]
    slo_met: Optional[bool]
    ttft_p99_s: Optional[float]
    tpot_p99_s: Optional[float]
    arrival_rate_per_s: Optional[float]
    utilization: Optional[float]
    disaggregated: Optional[bool]
    prefill_pool_devices: Optional[int]
    # training with a precision schedule: [{share, compute, scaling, step_time_s,
    # energy_per_step_j}], the run's own precision last; null without one
    precision_schedule: Optional[List[Dict[str, Any]]]
    # training on a system with reliability and storage figures: {fraction,
    # expected_time_to_train_s, effective_throughput_per_s, checkpoint_interval_s,
    # checkpoint_interval_auto, young_daly_interval_s, mtbf_s, expected_interruptions,
    # checkpoint_bytes, checkpoint_write_s, checkpoint_read_s, restart_s, straggler_slowdown,
    # failures_included, reliability, failure_classes}; null otherwise (serving included)
    goodput: Optional[Dict[str, Any]]
    # the system's figures by where they come from: sourced, assumed, fitted, defaulted.
    figures: Dict[str, int]
    # the system's vendor execution mode the run kept (one line), null where none or lifted
    execution_mode: Optional[str]
    # training: samples per step as run, and the stated batch where a comparison scaled it
    global_batch: Optional[int]
    global_batch_scaled_from: Optional[int]
    # what a unit costs (USD: per run with a training target, else per 1M units) and emits
    # (kg CO2e), and their parts ({per, time_s, energy_kwh, capital_usd, energy_usd, ...});
    # null where the system gives no capital figures or the estimate is infeasible
    cost_per_unit_usd: Optional[float]
    carbon_kg_co2e: Optional[float]
    # water the same unit consumes (litres): on site at the facility's WUE and off site
    # generating its electricity (cost.water_onsite_l, cost.water_offsite_l)
    water_l: Optional[float]
    cost: Optional[Dict[str, Any]]
    def __init__(self, d: Dict[str, Any]) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...

def load_system(path: PathLike) -> System: ...
def load_workload(path: PathLike) -> Workload: ...
def estimate(
    system: Union[System, PathLike],
    workload: Union[Workload, PathLike],
    mapping: Optional[PathLike] = None,
    set: Optional[Mapping[str, Any]] = None,
    *,
    devices: Optional[int] = None,
    objective: str = "time",
    power_boundary: str = "facility",
    slo: Optional[str] = None,
    min_user_rate: Optional[str] = None,
    concurrency: Union[int, str, None] = None,
    software: Optional[PathLike] = None,
    checkpoint_interval: str = "auto",
    straggler: Optional[str] = None,
    **path_overrides: Any,
) -> Estimate:
    """Estimate `workload` on `system`, as `tessera estimate --format json`.

    `mapping`: None (as the CLI without `--mapping`: the workload's published mapping, else the
    best), "auto" (search, as `--mapping auto`), "published" (the default, named) or a mapping
    file. `set` and path keywords (`device__tdp="400 W"`): `--set PATH=VALUE` overrides.
    """
    ...
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
) -> pandas.DataFrame:
    """Compare systems on one workload, as `tessera compare --format json`: one row per system.

    Every option of the CLI's `compare`, with its default. `mapping`: None (each system's best,
    as without `--mapping`), "auto", "published" or a mapping file. `power_budget`: a power
    ("1 MW") or watts, each system as many whole nodes as it holds (`--power-budget`), at
    `power_boundary` ("device" | "node" | "rack" | "it" | "facility", `--power-boundary`),
    held against `budget_basis` ("rated": what each system deploys at its rated power, the
    default; "average": the run's modelled average power; `--budget-basis`).
    `set`: `--set PATH=VALUE` overrides as {path: value}, or path keywords with `__` for the
    dots (`device__tdp="400 W"`), applied to every system. `df.attrs` holds `workload`,
    `baseline`, `power_boundary`, `power_budget_w`, `power_budget_basis`, `concurrency`, `slo` and `software`.
    """
    ...

def sweep(
    spec: Optional[SweepSpec] = None,
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    out: Optional[PathLike] = None,
    **options: Any,
) -> pyarrow.Table: ...
def sweep_summary(
    spec: Optional[SweepSpec] = None,
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    out: Optional[PathLike] = None,
    **options: Any,
) -> Dict[str, Any]: ...
def summary(table_or_path: Union[pyarrow.Table, PathLike]) -> Dict[str, Any]: ...
def merge(
    summaries: Sequence[Dict[str, Any]], top: Optional[int] = None, allow_partial: bool = False
) -> Dict[str, Any]: ...
def _run(
    spec: Optional[SweepSpec],
    *,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    keep_points: bool = True,
    out: Optional[PathLike] = None,
    **options: Any,
) -> Tuple[str, Optional[pyarrow.Table]]: ...
