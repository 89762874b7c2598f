import os
from typing import Any, Dict, Optional

def sweep(
    spec: Any = None,
    *,
    shards: int,
    out: Optional[os.PathLike[str]] = None,
    backend: str = "cpu",
    num_cpus: float = 1,
    top: Optional[int] = None,
    **options: Any,
) -> Dict[str, Any]: ...
