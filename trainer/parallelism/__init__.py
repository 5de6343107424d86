"""How a run is spread over processes: topology, device mesh, DDP/FSDP2/HSDP, tensor and pipeline parallelism, the fabric probe and ``--parallel auto``."""
