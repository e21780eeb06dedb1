"""What an input becomes: rows matched across inputs, and the machine that
measured them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyparbench.resultfiles.fingerprint import fingerprint_fields, usable_cores
from pyparbench.resultfiles.values import ResultFileError, show

__all__ = ["Kind", "ResultSet", "Row", "RowName", "set_machine"]


Kind = Literal["pyparbench", "pytest-benchmark"]


@dataclass(frozen=True)
class RowName:
    """A row's label in parts, so that a table can show a short key (its
    group and chooser, or a settings number) with the full settings in a
    legend."""

    group: str  # what it measures: "mlp-512 b1", "op gemm 1024x700x512"
    runner: str = ""  # a framework's run: "torch (script)"; "" for the native executor
    chooser: str = ""  # the preset or name it ran under
    setting: str = ""  # its full settings, the name left out
    item: str = ""  # its place in the group when it is not a setting: "t2"


@dataclass(frozen=True)
class Row:
    """One measured thing (a configuration, or a pytest-benchmark test), its
    per-run times in nanoseconds and what is needed to compare it.

    ``processes``: the median of each process that measured the row's
    setting (one per confirmation round, and those of the same setting
    under other names), when the file tells them apart; ``median_ns`` is
    then the median of these, and ``samples_ns`` every process's runs."""

    key: str  # identity used to match rows across files
    label: str  # what a person reads
    status: str  # "ok", or why there is no timing ("error", "timeout", "skipped")
    median_ns: float | None
    samples_ns: tuple[float, ...] = ()
    threads: int | None = None  # threads it ran with, when known
    sweep: str | None = None  # its key with the thread count left out (thread-sweep curves)
    gflop: float | None = None  # work per run, when the file says
    error: str = ""
    sweep_label: str = ""  # what a person reads for its thread sweep
    processes: tuple[float, ...] = ()
    # Run counts of the blocks ``samples_ns`` was timed in, in order (the
    # pytest plugin's ``ppb_bench`` records them), when the file says.
    blocks: tuple[int, ...] = ()
    name: RowName | None = None  # the label in parts, where the file gives them
    # The run's precision (Settings.precision; "fp32" for a file without it):
    # per-peak normalisation divides by that precision's ceiling.
    precision: str = "fp32"


@dataclass
class ResultSet:
    """The rows of one input and the machine that measured them."""

    path: str  # as given
    source: str  # the file the rows were read from
    kind: Kind
    rows: dict[str, Row]
    machine: dict[str, Any] | None  # the raw fingerprint, None when the file has none
    fields: dict[str, str]  # significant fingerprint fields, as text
    cores: int | None  # physical cores the process could use, when known
    peak_gflops: dict[int, float] | None = None  # measured FMA peak per thread count
    notes: list[str] = field(default_factory=list)
    # Each setting's process medians (ns), one group per setting whatever
    # names it ran under, when the file tells processes apart: what the
    # input's spread between processes is pooled from
    # (pyparbench.stats.input_spread).
    process_groups: list[tuple[float, ...]] = field(default_factory=list)
    # Runs read as this one input (pyparbench.resultfiles.merged): 1 for a
    # file or a results folder.
    runs: int = 1
    # Measured bf16 dot-product peak per thread count, where the file has it.
    peak_bf16_gflops: dict[int, float] | None = None
    # Measured int8 dot-product peak (GOP/s) per thread count, where the file has it.
    peak_int8_gops: dict[int, float] | None = None


def set_machine(rs: ResultSet, where: str | Path, name: str, machine: Any) -> None:
    """Give ``rs`` the fingerprint ``machine`` (read from ``name`` at ``where``)."""
    if not isinstance(machine, dict):
        raise ResultFileError(where, f"{name} must be an object, got {show(machine)}")
    rs.machine = machine
    rs.fields = fingerprint_fields(str(where), machine)
    rs.cores = usable_cores(machine)
