"""What pyparbench runs on: oneDNN build and ISA, OpenMP runtime, CPUs."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from pyparbench._core import runtime as _rt
from pyparbench._version import __version__
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.settings import allowed_layout
from pyparbench.threading.topology import topology, topology_dict


def info() -> dict[str, Any]:
    """Build and machine information as a plain, JSON-serialisable dict."""
    rt = dict(_rt.runtime_info())
    topo = topology()  # hwloc, loaded once
    return {
        "pyparbench": _version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "onednn": {
            "version": rt["onednn_version"],
            "hash": rt["onednn_hash"],
            "cpu_runtime": rt["onednn_cpu_runtime"],
            "isa": rt["onednn_isa"],
            "api_major": rt["onednn_api_major"],
        },
        "openmp": {
            "library": rt["openmp_library"],
            "spec": rt["openmp_spec"],
            "max_threads": rt["openmp_max_threads"],
            "num_procs": rt["openmp_num_procs"],
        },
        "cpu": cpu_features(),
        "cpus": {
            "logical": len(topo.pus),
            "physical_cores": len(topo.cores),
            "sockets": max(1, len(topo.packages)),
            "numa_nodes": max(1, len(topo.numa_nodes)),
            "allowed": list(topo.allowed_cpus),
            "allowed_layout": allowed_layout(topo),
            "os_cpu_count": os.cpu_count(),
        },
        "compiler": rt["compiler"],
        "default_threads": int(_rt.get_default_threads()),
        "topology": topology_dict(topo),
    }


def _version() -> str:
    return __version__
