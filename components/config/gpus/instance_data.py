"""The ECS GPU instance types as Alibaba Cloud's family page lists them: plain data, read by
:mod:`components.config.gpus.types` and printed as the table in docs/configuration.md
(``python -m components.package.reference --write``).

Source: Alibaba Cloud documentation, Elastic GPU Service, "GPU-accelerated compute-optimized
instance families" (gn series and ECS Bare Metal Instance families),
https://www.alibabacloud.com/help/en/egs/gpu-accelerated-compute-optimized-instance-families,
read 2026-11-28 from a stored copy of the page; the Chinese edition (GPU计算型实例规格族) was read
the same day and lists the same figures for gn8v, gn8is, gn7e, gn7i, gn7s, gn7, gn6i, gn6e and gn6v.

Each family gives, as its table on the page does: the GPU model where the page names it (the
page names none for gn8v, gn7e, gn7 and their bare metal kin: ``None``), the memory of each
GPU in GB as written, whether the page says the family supports elastic RDMA interfaces
(ERIs), a note where the page restricts it, and its instance types as
(name, vCPUs, memory GiB, GPUs). vGPU families (fractions of a GPU) are left out.
To change a row, read the page again and update the date above with the row.
"""

from __future__ import annotations

SOURCE_URL = "https://www.alibabacloud.com/help/en/egs/gpu-accelerated-compute-optimized-instance-families"
SOURCE_TITLE = 'Alibaba Cloud Elastic GPU Service: "GPU-accelerated compute-optimized instance families"'
READ_ON = "2026-11-28"

_REGIONS = "available in specific regions only, including regions outside China; ask Alibaba Cloud sales"
_PREVIEW = "invitational preview; submit a ticket to use it"
_NOT_RECOMMENDED = "not recommended by the page, which offers it for when the recommended families are sold out"

FAMILIES: dict[str, dict] = {
    "gn8v": {
        "gpu": None,
        "gpu_memory_gb": 96,
        "eri": True,
        "note": _REGIONS,
        "types": [
            ("ecs.gn8v.4xlarge", 16, 96, 1),
            ("ecs.gn8v.6xlarge", 24, 128, 1),
            ("ecs.gn8v-2x.8xlarge", 32, 192, 2),
            ("ecs.gn8v-4x.8xlarge", 32, 384, 4),
            ("ecs.gn8v-2x.12xlarge", 48, 256, 2),
            ("ecs.gn8v-8x.16xlarge", 64, 768, 8),
            ("ecs.gn8v-4x.24xlarge", 96, 512, 4),
            ("ecs.gn8v-8x.48xlarge", 192, 1024, 8),
        ],
    },
    "gn8v-tee": {
        "gpu": None,
        "gpu_memory_gb": 96,
        "eri": True,
        "note": _REGIONS + "; Alibaba Cloud Linux 3 images only",
        "types": [
            ("ecs.gn8v-tee.4xlarge", 16, 96, 1),
            ("ecs.gn8v-tee.6xlarge", 24, 128, 1),
            ("ecs.gn8v-tee-8x.16xlarge", 64, 768, 8),
            ("ecs.gn8v-tee-8x.48xlarge", 192, 1024, 8),
        ],
    },
    "gn8is": {
        "gpu": "NVIDIA L20",
        "gpu_memory_gb": 48,
        "eri": True,
        "note": _REGIONS,
        "types": [
            ("ecs.gn8is.2xlarge", 8, 64, 1),
            ("ecs.gn8is.4xlarge", 16, 128, 1),
            ("ecs.gn8is-2x.8xlarge", 32, 256, 2),
            ("ecs.gn8is-4x.16xlarge", 64, 512, 4),
            ("ecs.gn8is-8x.32xlarge", 128, 1024, 8),
        ],
    },
    "gn7e": {
        "gpu": None,
        "gpu_memory_gb": 80,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn7e-c16g1.4xlarge", 16, 125, 1),
            ("ecs.gn7e-c16g1.8xlarge", 32, 250, 2),
            ("ecs.gn7e-c16g1.16xlarge", 64, 500, 4),
            ("ecs.gn7e-c16g1.32xlarge", 128, 1000, 8),
        ],
    },
    "gn7i": {
        "gpu": "NVIDIA A10",
        "gpu_memory_gb": 24,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn7i-c8g1.2xlarge", 8, 30, 1),
            ("ecs.gn7i-c16g1.4xlarge", 16, 60, 1),
            ("ecs.gn7i-c32g1.8xlarge", 32, 188, 1),
            ("ecs.gn7i-c32g1.16xlarge", 64, 376, 2),
            ("ecs.gn7i-c32g1.32xlarge", 128, 752, 4),
            ("ecs.gn7i-c48g1.12xlarge", 48, 310, 1),
            ("ecs.gn7i-c56g1.14xlarge", 56, 346, 1),
            ("ecs.gn7i-2x.8xlarge", 32, 128, 2),
            ("ecs.gn7i-4x.8xlarge", 32, 128, 4),
            ("ecs.gn7i-4x.16xlarge", 64, 256, 4),
            ("ecs.gn7i-8x.32xlarge", 128, 512, 8),
            ("ecs.gn7i-8x.16xlarge", 64, 256, 8),
        ],
    },
    "gn7s": {
        "gpu": "NVIDIA A30",
        "gpu_memory_gb": 24,
        "eri": False,
        "note": _NOT_RECOMMENDED + "; submit a ticket to use it",
        "types": [
            ("ecs.gn7s-c8g1.2xlarge", 8, 60, 1),
            ("ecs.gn7s-c16g1.4xlarge", 16, 120, 1),
            ("ecs.gn7s-c32g1.8xlarge", 32, 250, 1),
            ("ecs.gn7s-c32g1.16xlarge", 64, 500, 2),
            ("ecs.gn7s-c32g1.32xlarge", 128, 1000, 4),
            ("ecs.gn7s-c48g1.12xlarge", 48, 380, 1),
            ("ecs.gn7s-c56g1.14xlarge", 56, 440, 1),
        ],
    },
    "gn7": {
        "gpu": None,
        "gpu_memory_gb": 40,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn7-c12g1.3xlarge", 12, 94, 1),
            ("ecs.gn7-c13g1.13xlarge", 52, 378, 4),
            ("ecs.gn7-c13g1.26xlarge", 104, 756, 8),
        ],
    },
    "gn6i": {
        "gpu": "NVIDIA T4",
        "gpu_memory_gb": 16,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn6i-c4g1.xlarge", 4, 15, 1),
            ("ecs.gn6i-c8g1.2xlarge", 8, 31, 1),
            ("ecs.gn6i-c16g1.4xlarge", 16, 62, 1),
            ("ecs.gn6i-c24g1.6xlarge", 24, 93, 1),
            ("ecs.gn6i-c40g1.10xlarge", 40, 155, 1),
            ("ecs.gn6i-c24g1.12xlarge", 48, 186, 2),
            ("ecs.gn6i-c24g1.24xlarge", 96, 372, 4),
        ],
    },
    "gn6e": {
        "gpu": "NVIDIA V100",
        "gpu_memory_gb": 32,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn6e-c12g1.3xlarge", 12, 92, 1),
            ("ecs.gn6e-c12g1.6xlarge", 24, 184, 2),
            ("ecs.gn6e-c12g1.12xlarge", 48, 368, 4),
            ("ecs.gn6e-c12g1.24xlarge", 96, 736, 8),
        ],
    },
    "gn6v": {
        "gpu": "NVIDIA V100",
        "gpu_memory_gb": 16,
        "eri": False,
        "note": None,
        "types": [
            ("ecs.gn6v-c8g1.2xlarge", 8, 32, 1),
            ("ecs.gn6v-c8g1.4xlarge", 16, 64, 2),
            ("ecs.gn6v-c8g1.8xlarge", 32, 128, 4),
            ("ecs.gn6v-c8g1.16xlarge", 64, 256, 8),
            ("ecs.gn6v-c10g1.20xlarge", 82, 336, 8),
        ],
    },
    "gn5i": {
        "gpu": "NVIDIA P4",
        "gpu_memory_gb": 8,
        "eri": False,
        "note": _NOT_RECOMMENDED,
        "types": [
            ("ecs.gn5i-c2g1.large", 2, 8, 1),
            ("ecs.gn5i-c4g1.xlarge", 4, 16, 1),
            ("ecs.gn5i-c8g1.2xlarge", 8, 32, 1),
            ("ecs.gn5i-c16g1.4xlarge", 16, 64, 1),
            ("ecs.gn5i-c16g1.8xlarge", 32, 128, 2),
            ("ecs.gn5i-c28g1.14xlarge", 56, 224, 2),
        ],
    },
    "gn5": {
        "gpu": "NVIDIA P100",
        "gpu_memory_gb": 16,
        "eri": False,
        "note": _NOT_RECOMMENDED,
        "types": [
            ("ecs.gn5-c4g1.xlarge", 4, 30, 1),
            ("ecs.gn5-c8g1.2xlarge", 8, 60, 1),
            ("ecs.gn5-c4g1.2xlarge", 8, 60, 2),
            ("ecs.gn5-c8g1.4xlarge", 16, 120, 2),
            ("ecs.gn5-c28g1.7xlarge", 28, 112, 1),
            ("ecs.gn5-c8g1.8xlarge", 32, 240, 4),
            ("ecs.gn5-c28g1.14xlarge", 56, 224, 2),
            ("ecs.gn5-c8g1.14xlarge", 54, 480, 8),
        ],
    },
    "ebmgn9g": {
        "gpu": None,
        "gpu_memory_gb": 48,
        "eri": True,
        "note": _PREVIEW,
        "types": [("ecs.ebmgn9g.64xlarge", 256, 2304, 8)],
    },
    "ebmgn9ge": {
        "gpu": None,
        "gpu_memory_gb": 72,
        "eri": True,
        "note": _PREVIEW,
        "types": [("ecs.ebmgn9ge.64xlarge", 256, 2304, 8)],
    },
    "ebmgn9gc": {
        "gpu": None,
        "gpu_memory_gb": 72,
        "eri": True,
        "note": _PREVIEW,
        "types": [("ecs.ebmgn9gc.64xlarge", 256, 1536, 8)],
    },
    "ebmgn8v": {
        "gpu": None,
        "gpu_memory_gb": 96,
        "eri": True,
        "note": _REGIONS,
        "types": [("ecs.ebmgn8v.48xlarge", 192, 1024, 8)],
    },
    "ebmgn8ia": {
        "gpu": "NVIDIA L20",
        "gpu_memory_gb": 48,
        "eri": True,
        "note": _REGIONS,
        "types": [("ecs.ebmgn8ia.64xlarge", 256, 1536, 4)],
    },
    "ebmgn8is": {
        "gpu": "NVIDIA L20",
        "gpu_memory_gb": 48,
        "eri": True,
        "note": _REGIONS,
        "types": [("ecs.ebmgn8is.32xlarge", 128, 1024, 8)],
    },
    "ebmgn7e": {
        "gpu": None,
        "gpu_memory_gb": 80,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn7e.32xlarge", 128, 1024, 8)],
    },
    "ebmgn7i": {
        "gpu": "NVIDIA A10",
        "gpu_memory_gb": 24,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn7i.32xlarge", 128, 768, 4)],
    },
    "ebmgn7": {
        "gpu": None,
        "gpu_memory_gb": 40,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn7.26xlarge", 104, 768, 8)],
    },
    "ebmgn6e": {
        "gpu": "NVIDIA V100",
        "gpu_memory_gb": 32,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn6e.24xlarge", 96, 768, 8)],
    },
    "ebmgn6v": {
        "gpu": "NVIDIA V100",
        "gpu_memory_gb": 16,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn6v.24xlarge", 96, 384, 8)],
    },
    "ebmgn6i": {
        "gpu": "NVIDIA T4",
        "gpu_memory_gb": 16,
        "eri": False,
        "note": None,
        "types": [("ecs.ebmgn6i.24xlarge", 96, 384, 4)],
    },
}
"""Family name (without ``ecs.``) to what the page says of it and its instance types."""

LEFT_OUT = ("gn8ia", "gu8tf", "gu8tef")
"""GPU families that no Alibaba Cloud page read gives vCPUs, memory and GPUs for (ECI's GPU page,
https://help.aliyun.com/en/eci/user-guide/create-an-instance-by-specifying-the-gpu-type, read
2026-11-28, names gn8ia without them; docs/known-limits.md says what was searched): the jobs on
a pool of them give their own ``cpu`` and ``memory``, checked against ECS's figures at ``pulumi
preview``, unless the pool gives ``gpuPool.nodeCapacity``."""
