"""Type stubs of the Rust extension (python/src/lib.rs)."""

from typing import List, Optional, Sequence, Tuple

import pyarrow

__version__: str

class TesseraError(Exception):
    """Invalid input; the message carries the located diagnostics (`file:line:col`, hint)."""

class System:
    @property
    def name(self) -> str: ...
    @property
    def devices(self) -> int: ...
    @property
    def path(self) -> str: ...

class Workload:
    @property
    def name(self) -> str: ...
    @property
    def has_published_mapping(self) -> bool: ...
    @property
    def path(self) -> str: ...

def load_system(path: str) -> System: ...
def load_workload(path: str) -> Workload: ...
def estimate_json(
    system: System,
    workload: Workload,
    mapping: Optional[str] = None,
    objective: str = "time",
    devices: Optional[int] = None,
    set: Sequence[Tuple[str, str]] = ...,
    power_boundary: str = "facility",
    slo: Optional[str] = None,
    min_user_rate: Optional[str] = None,
    concurrency: Optional[str] = None,
    software: Optional[str] = None,
    checkpoint_interval: str = "auto",
    straggler: Optional[str] = None,
) -> str: ...
def compare_json(
    systems: Sequence[System],
    workload: Workload,
    mapping: Optional[str] = None,
    objective: str = "time",
    devices: Optional[int] = None,
    slo: Optional[str] = None,
    min_user_rate: Optional[str] = None,
    concurrency: Optional[str] = None,
    software: Optional[str] = None,
    set: Sequence[Tuple[str, str]] = ...,
    power_budget: Optional[str] = None,
    power_boundary: str = "facility",
    budget_basis: str = "rated",
    budget: Optional[str] = None,
    checkpoint_interval: str = "auto",
    straggler: Optional[str] = None,
) -> str: ...
def run_sweep(
    file: Optional[str] = None,
    *,
    arch: Optional[str] = None,
    workload: Optional[str] = None,
    mapping: Optional[str] = None,
    vary: List[str] = ...,
    sampling: Optional[str] = None,
    points: Optional[int] = None,
    seed: Optional[int] = None,
    power_budget: Optional[str] = None,
    memory_floor: Optional[str] = None,
    objective: Optional[str] = None,
    pareto: Optional[List[str]] = None,
    top: Optional[int] = None,
    shard: Optional[Tuple[int, int]] = None,
    backend: str = "auto",
    keep_points: bool = True,
    out: Optional[str] = None,
) -> Tuple[str, Optional[pyarrow.Table]]: ...
def merge_json(
    summaries: List[str], top: Optional[int] = None, allow_partial: bool = False
) -> Tuple[str, List[str]]: ...
def shard_range(total: int, i: int, n: int) -> Tuple[int, int]: ...
