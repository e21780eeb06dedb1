"""Reading untrusted JSON and checking the values taken from it: every check
raises :class:`ResultFileError`, one line naming the file (and line or
field) and what is wrong."""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_COUNT",
    "MAX_MEASURE",
    "MAX_NS",
    "JsonlRead",
    "ResultFileError",
    "canonical",
    "duration",
    "durations",
    "first_line_is_object",
    "get_choice",
    "get_int",
    "get_number",
    "get_object",
    "get_string",
    "get_text",
    "int_ok",
    "is_number",
    "is_plain",
    "is_scalar",
    "json_error",
    "json_type",
    "loads",
    "parse_json",
    "parse_jsonl",
    "parse_size",
    "printable",
    "read_bytes",
    "read_json",
    "read_json_object",
    "read_jsonl",
    "read_text",
    "reject_constant",
    "show",
]


DEFAULT_MAX_BYTES = 256 << 20


# Timings beyond these are not measurements but corrupt or hostile values.
MAX_NS = 1e15  # about 11.6 days per run


# FLOPs, bytes, GFLOP/s, GB/s beyond this are not measurements.
MAX_MEASURE = 1e18


MAX_COUNT = 1 << 20  # batches, threads, repeats, samples per row: generous upper bounds


class ResultFileError(ValueError):
    """A file that is not a usable result; the message is one line naming the file."""

    def __init__(self, path: str | Path, what: str) -> None:
        super().__init__(printable(f"{path}: {what}"))
        self.path = str(path)
        self.what = what


def printable(text: str) -> str:
    """``text`` with control characters (newlines, terminal escapes) shown
    escaped, so that text from a file stays one harmless line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def parse_size(text: str) -> int:
    """A byte count such as ``1000``, ``64K``, ``256M`` or ``1G``.

    Raises
    ------
    ValueError
        Anything else, or zero.
    """
    t = text.strip()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:].lower(), 1)
    digits = t[:-1] if scale > 1 else t
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 15 or int(digits) < 1:
        raise ValueError(f"a size is a positive number of bytes such as 256M, got {text!r}")
    return int(digits) * scale


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` bytes."""
    try:
        st = path.stat()
    except OSError as e:
        raise ResultFileError(path, f"cannot read it ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ResultFileError(path, "not a regular file")
    if st.st_size > max_bytes:
        raise ResultFileError(path, f"{st.st_size} bytes, over the {max_bytes}-byte limit "
                                    "(--max-bytes)")
    try:
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)  # the file may have grown since stat
    except OSError as e:
        raise ResultFileError(path, f"cannot read it ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise ResultFileError(path, f"over the {max_bytes}-byte limit (--max-bytes)")
    return data


def read_text(path: Path, max_bytes: int) -> str:
    """The whole text of a regular file of at most ``max_bytes`` bytes."""
    data = read_bytes(path, max_bytes)
    if b"\x00" in data:
        raise ResultFileError(path, "binary data, not JSON text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultFileError(path, f"not UTF-8 text (byte {e.start}); binary data?") from None


def reject_constant(name: str) -> Any:
    """json.loads hook: NaN and Infinity are not numbers JSON allows."""
    raise ValueError(f"{name} is not a number JSON allows")


def loads(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (Python's json accepts them)."""
    return json.loads(text, parse_constant=reject_constant)


def json_error(e: Exception) -> str:
    """What is wrong with text that did not parse, in words."""
    if isinstance(e, json.JSONDecodeError):
        if e.pos >= len(e.doc.rstrip()) or e.msg.startswith("Unterminated string"):
            return f"not complete JSON (ends at line {e.lineno} column {e.colno}; truncated?)"
        return f"not JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if isinstance(e, RecursionError):
        return "JSON nested too deeply"
    if "digits" in str(e):  # int() refuses numbers of thousands of digits
        return "not usable JSON (a number with thousands of digits)"
    return f"not usable JSON ({e})"  # NaN or Infinity, refused by parse_constant


def first_line_is_object(text: str) -> bool:
    """Whether the first non-blank line is a JSON object of its own (JSONL)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(loads(first), dict)
    except (ValueError, RecursionError):
        return False


def parse_json(path: Path, text: str) -> Any:
    """The JSON value of a whole file."""
    try:
        return loads(text)
    except (ValueError, RecursionError) as e:
        raise ResultFileError(path, json_error(e)) from None


def read_json(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """The JSON value of a whole file of at most ``max_bytes`` bytes.

    Raises
    ------
    ResultFileError
        The file is missing, not a regular file, over ``max_bytes``, or not
        JSON text.
    """
    return parse_json(path, read_text(path, max_bytes))


def read_json_object(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """:func:`read_json` of a file that must hold one JSON object.

    Raises
    ------
    ResultFileError
        As :func:`read_json`, or the value is not an object (naming its type).
    """
    value = read_json(path, max_bytes)
    if not isinstance(value, dict):
        raise ResultFileError(path, f"a JSON {json_type(value)}, not an object")
    return value


def parse_jsonl(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = loads(line)
        except (ValueError, RecursionError) as e:
            raise ResultFileError(f"{path}:{n}", json_error(e)) from None
        if not isinstance(value, dict):
            raise ResultFileError(f"{path}:{n}", f"a JSON {json_type(value)}, not a result record "
                                                 "(an object)")
        out.append((n, value))
    return out


@dataclass
class JsonlRead:
    """The objects of a JSONL file, each with where it was read
    (``path:line``), and the lines skipped (``path:line (why)``)."""

    records: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def warning(self, shown: int = 5) -> str | None:
        """One line saying which lines were skipped (the first ``shown`` named,
        the rest counted); None when none was."""
        if not self.skipped:
            return None
        n = len(self.skipped)
        more = f" and {n - shown} more" if n > shown else ""
        return printable(f"{n} line(s) that are not a JSON object skipped (cut short when "
                         f"a run was killed while writing?): "
                         f"{', '.join(self.skipped[:shown])}{more}")


def _line_object(raw: bytes) -> dict[str, Any] | str:
    """One line's JSON object, or why it is not one."""
    try:
        value = loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except (ValueError, RecursionError) as e:
        return json_error(e)
    if not isinstance(value, dict):
        return f"a JSON {json_type(value)}, not an object"
    return value


def read_jsonl(path: Path, max_bytes: int) -> JsonlRead:
    """Every line of a JSONL file that is one JSON object, in order: the one
    reader of the main job's own files (its store on resume, a results
    folder read back, a merge of shards).

    The policy, one for every reader: each non-blank line is read on its
    own, and a line that is not one JSON object (cut short, not UTF-8,
    NaN or Infinity, nested too deeply, or a JSON value other than an
    object) is skipped and listed in ``skipped``, never raised. A run
    killed while writing a record leaves its last line torn, and the store
    starts the next record on a line of its own, so on resume a torn line
    may sit anywhere: a finished result must never be lost with it. Whether
    an object is a usable record is its reader's check, which raises naming
    the line.

    Raises
    ------
    ResultFileError
        The file is missing, not a regular file, or over ``max_bytes``.
    """
    out = JsonlRead()
    for n, raw in enumerate(read_bytes(path, max_bytes).split(b"\n"), 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        value = _line_object(raw)
        if isinstance(value, str):
            out.skipped.append(f"{where} ({value})")
        else:
            out.records.append((where, value))
    return out


def json_type(v: Any) -> str:
    """The JSON name of a parsed value's type."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


def show(v: Any) -> str:
    """A short rendering of a value from a file (containers by type only: a
    hostile one may be huge or deeply nested)."""
    if isinstance(v, (dict, list)):
        return f"a JSON {json_type(v)}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**30:
        return "a huge integer"
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


def is_scalar(v: Any) -> bool:
    """null, a string, a boolean or a number."""
    return v is None or isinstance(v, (str, bool, int, float))


def is_plain(v: Any) -> bool:
    """A scalar, a list of scalars or a list of lists of scalars (CPU lists)."""
    if isinstance(v, list):
        return all(is_scalar(x) or (isinstance(x, list) and all(is_scalar(y) for y in x))
                   for x in v)
    return is_scalar(v)


def is_number(v: Any) -> bool:
    """A finite int or float (not a boolean)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer beyond any float
        return False


def int_ok(v: Any, lo: int) -> bool:
    """An integer (not a boolean) from ``lo`` to :data:`MAX_COUNT`."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= MAX_COUNT


def get_object(where: str, d: dict[str, Any], key: str, name: str | None = None) -> dict[str, Any]:
    """``d[key]``, which must be a JSON object."""
    v = d.get(key)
    if v is None:
        raise ResultFileError(where, f"no {name or key} (an object)")
    if not isinstance(v, dict):
        raise ResultFileError(where, f"{name or key} must be an object, got {show(v)}")
    return v


def get_choice(where: str, d: Mapping[str, Any], key: str, choices: Sequence[str]) -> str:
    """``d[key]``, which must be one of ``choices``."""
    v = d.get(key)
    if v not in choices:
        raise ResultFileError(where, f"{key} must be one of {', '.join(choices)}, "
                                     f"got {show(v)}")
    return cast(str, v)


def get_string(where: str, d: dict[str, Any], key: str, name: str | None = None) -> str:
    """``d[key]``, which must be a non-empty string of at most 4096 characters."""
    v = d.get(key)
    if not isinstance(v, str) or not v or len(v) > 4096:
        raise ResultFileError(where, f"{name or key} must be a non-empty string, got {show(v)}")
    return v


def get_number(where: str, d: dict[str, Any], key: str, name: str, *,
               positive: bool) -> float:
    """``d[key]``, which must be a finite number (``positive``: above 0, else
    0 or more) within any measurement's range (FLOPs, bytes, GFLOP/s, GB/s);
    returned as written (an int stays an int)."""
    v: Any = d.get(key)
    if not is_number(v) or not (0 < v if positive else 0 <= v) or v > MAX_MEASURE:
        raise ResultFileError(where, f"{name} must be a {'positive' if positive else 'finite'} "
                                     f"number, got {show(v)}")
    return cast(float, v)


def get_text(where: str, d: dict[str, Any], key: str, name: str) -> str:
    """``d[key]``, which must be a string (empty too) of at most 4096 characters."""
    v = d.get(key)
    if not isinstance(v, str) or len(v) > 4096:
        raise ResultFileError(where, f"{name} must be a string, got {show(v)}")
    return v


def get_int(where: str, d: dict[str, Any], key: str, name: str) -> int:
    """``d[key]``, which must be an integer from 1 to :data:`MAX_COUNT`."""
    v: Any = d.get(key)
    if not int_ok(v, 1):
        raise ResultFileError(where, f"{name} must be an integer from 1 to {MAX_COUNT}, "
                                     f"got {show(v)}")
    return int(v)


def duration(where: str, v: Any, name: str, *, positive: bool, scale: float = 1.0) -> float:
    """A duration in the file's unit, returned in ns (``scale``: ns per unit)."""
    if not is_number(v):
        raise ResultFileError(where, f"{name} must be a finite number, got {show(v)}")
    ns = float(v) * scale
    if ns < 0 or (positive and ns == 0) or ns > MAX_NS:
        raise ResultFileError(where, f"{name} = {show(v)} is not a plausible duration")
    return ns


def durations(where: str, v: Any, name: str, *, scale: float) -> tuple[float, ...]:
    """A list of durations (``name`` at ``where``), in ns."""
    if not isinstance(v, list):
        raise ResultFileError(where, f"{name} must be a list of durations, got {show(v)}")
    if len(v) > MAX_COUNT:
        raise ResultFileError(where, f"{name}: {len(v)} samples is not plausible")
    return tuple(duration(where, x, f"{name}[{i}]", positive=False, scale=scale)
                 for i, x in enumerate(v))


def canonical(value: Any) -> str:
    """One text per JSON value (sorted keys): an identity to match on."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
