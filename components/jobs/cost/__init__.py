"""What jobs cost (``ack-jobs cost``): pod runs priced from a dated, sourced table
(:mod:`.prices`), GPU-hours, spot savings and idle GPU time (:mod:`.ledger`)."""

from .ledger import Cost, PodRun, cost, idle_gpu_hours, pod_runs
from .prices import PriceError, PriceTable, load_table, parse_table

__all__ = [
    "Cost",
    "PodRun",
    "PriceError",
    "PriceTable",
    "cost",
    "idle_gpu_hours",
    "load_table",
    "parse_table",
    "pod_runs",
]
