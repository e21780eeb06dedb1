"""The other files of a results folder, read as hostile as the records: the
operator measurements (``operators.jsonl``), the measured ceilings
(``peak-<id>.json``) and the run's conditions kept in ``summary.json``.

Each check raises :class:`ResultFileError` naming the file (and line) and
the first value that is wrong, so that the report built from what passes
never meets a missing field or a value of the wrong type.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pyparbench.machine.peak import Peak, PeakPoint
from pyparbench.resultfiles.op_result import OpResult
from pyparbench.resultfiles.values import (
    MAX_COUNT,
    ResultFileError,
    get_int,
    get_number,
    get_object,
    get_text,
    int_ok,
    is_number,
    json_type,
    read_json,
    show,
)

__all__ = ["PEAK_FILE", "check_operator_record", "conditions", "read_peak_file"]

# A peak file's name: the fingerprint id of the machine it measured.
PEAK_FILE = re.compile(r"^peak-([0-9a-f]{12})\.json$")


def check_operator_record(where: str, r: dict[str, Any]) -> None:
    """Raise ResultFileError(where, ...) unless ``r`` is a well-formed
    operator task record: :meth:`OpResult.from_dict
    <pyparbench.resultfiles.op_result.OpResult.from_dict>` reads it."""
    OpResult.from_dict(r, where)


def _peak_fields(where: str, d: dict[str, Any]) -> None:
    for k in ("isa", "measured_at"):
        get_text(where, d, k, k)
    if "fma_warning" in d:
        get_text(where, d, "fma_warning", "fma_warning")
    if "dot_absent" in d:
        absent = get_object(where, d, "dot_absent")
        for k in absent:
            get_text(where, absent, k, f"dot_absent.{show(k)}")
    if "dot_instructions" in d:
        named = get_object(where, d, "dot_instructions")
        for k in named:
            get_text(where, named, k, f"dot_instructions.{show(k)}")
    if not isinstance(d.get("fused"), bool):
        raise ResultFileError(where, f"fused must be true or false, got {show(d.get('fused'))}")
    for k in ("lanes", "chains", "fma_pipes", "gather_dim", "gather_bag"):
        get_int(where, d, k, k)
    for k in ("triad_array_bytes", "gather_table_bytes", "llc_bytes", "measured_clock_mhz",
              "seconds"):
        get_number(where, d, k, k, positive=False)
    get_object(where, d, "fingerprint")
    clock = get_object(where, d, "clock")
    get_number(where, clock, "mhz", "clock.mhz", positive=True)
    get_text(where, clock, "source", "clock.source")
    readings = get_object(where, clock, "readings", "clock.readings")
    for k in readings:
        get_number(where, readings, k, f"clock.readings.{show(k)}", positive=True)
    points = d.get("points")
    if not isinstance(points, list) or not points or len(points) > MAX_COUNT:
        raise ResultFileError(where, "points must be a non-empty list (the ceilings per "
                                     "thread count)")
    for i, p in enumerate(points):
        name = f"points[{i}]"
        if not isinstance(p, dict):
            raise ResultFileError(where, f"{name} must be an object, got a JSON {json_type(p)}")
        get_int(where, p, "threads", f"{name}.threads")
        cpus = p.get("cpus")
        if not isinstance(cpus, list) or len(cpus) > MAX_COUNT or not all(int_ok(c, 0)
                                                                            for c in cpus):
            raise ResultFileError(where, f"{name}.cpus must be a list of CPU numbers")
        for k in ("fma_gflops", "fma_gflops_median", "theoretical_gflops", "triad_gbs",
                  "triad_gbs_median", "gather_gbs", "gather_gbs_median"):
            get_number(where, p, k, f"{name}.{k}", positive=True)
        for k in ("bf16_gflops", "int8_gops"):
            if p.get(k) is not None:
                get_number(where, p, k, f"{name}.{k}", positive=True)


def read_peak_file(path: Path, max_bytes: int) -> Peak:
    """A ``peak-<id>.json`` of a results folder (:func:`pyparbench.harness.folder.load_or_measure`),
    checked value by value.

    Raises
    ------
    ResultFileError
        Not a peak file, naming it and the first wrong value.
    """
    data = read_json(path, max_bytes)
    if not isinstance(data, dict):
        raise ResultFileError(path, f"a JSON {json_type(data)}, not measured ceilings")
    _peak_fields(str(path), data)
    # Only the fields Peak has: a file may carry others (a newer pyparbench's).
    # The dot-product figures are absent from files written before they were measured.
    points = [{k: p[k] for k in PeakPoint.__dataclass_fields__ if k in p}
              for p in data["points"]]
    clock = {k: data["clock"][k] for k in ("mhz", "source", "readings")}
    return Peak.from_dict({**data, "points": points, "clock": clock})


def conditions(value: Any) -> dict[str, Any]:
    """The conditions a summary recorded (what the machine was doing when
    the run started; what a merge was told), the values the report shows
    and nothing else: a value of the wrong type is left out."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    for k in ("busy_cpus_start", "loadavg_start"):
        if is_number(value.get(k)) and 0 <= value[k] <= MAX_COUNT:
            out[k] = float(value[k])
    if int_ok(value.get("cpus"), 1):
        out["cpus"] = value["cpus"]
    for k in ("busy", "forced"):
        if isinstance(value.get(k), str):
            out[k] = value[k][:4096]
        elif k in value and value[k] is None:
            out[k] = None
    return out
