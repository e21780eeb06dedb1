"""Fuzzing the readers of files from other machines: results.jsonl,
summary.json and pytest-benchmark JSON (``pyparbench.resultfiles``, and
compare and merge on top), and the ResultStore that resume reads.

Valid files of each kind are damaged: cut short, a value swapped for a
hostile one (NaN, Infinity, numbers beyond float or of thousands of digits,
control characters, nesting thousands deep, huge lists, wrong types),
binary junk spliced in. Reading must give rows or one clear
``ResultFileError`` (one line naming the file); whatever is read must then
compare, print and serialise as strict JSON without an error.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _fuzz import attempt
from pyparbench.compare import CompareError, compare, print_text, to_json
from pyparbench.harness.merge import MergeError, merge
from pyparbench.resultfiles import ResultFileError, load, read_result
from pyparbench.report.summary import summarize_run
from pyparbench.harness.store import ResultStore
from pyparbench.harness.runner import check_config_record

# Slow (real runs in processes of their own, or many inputs): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "compare"

def _with_schema(text: str) -> str:
    """Records as this pyparbench writes them (the test data predates ``schema``)."""
    return "".join(json.dumps({**json.loads(line), "schema": 1}) + "\n"
                   for line in text.splitlines())


SOURCES = {
    "results.jsonl": _with_schema((DATA / "machine_a" / "results.jsonl").read_text()),
    "summary.json": (DATA / "machine_a" / "summary.json").read_text(),
    "bench.json": (DATA / "bench_a.json").read_text(),
}
BASELINE = load(DATA / "machine_b")

# Raw JSON texts that a hostile or corrupt file may hold where a value goes.
HOSTILE = [
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 5000, "1e-400", "-0", "0",
    "-1", "0.5", "1e308", "9007199254740993", "true", "false", "null", '""', "[]", "{}",
    '"\\u001b[31mred\\nline\\r"', '"\\ud800"', '"' + "x" * 100_000 + '"',
    "[" * 5000 + "]" * 5000, '{"a":' * 2000 + "1" + "}" * 2000,
    "[" + ",".join(["1"] * 100_000) + "]", '[[0, 1], [2, "x"], [[3]]]', '{"cpus": [[1]]}',
    '[{"cpus": [[1], {"a": 2}]}]',
]


def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed document a value sits (the root excluded)."""
    out: list[tuple[Any, ...]] = []
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
    for k, x in items:
        out.append(prefix + (k,))
        if len(out) < 4000:
            out.extend(_paths(x, prefix + (k,)))
    return out


MARK = "__HOSTILE_VALUE__"


def with_value(doc: Any, path: tuple[Any, ...], raw: str, indent: int | None) -> str:
    """``doc`` as JSON text with the value at ``path`` replaced by ``raw`` text."""
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = MARK
    return json.dumps(doc, indent=indent).replace(json.dumps(MARK), raw, 1)


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """(kind of file, what was done, the damaged file's bytes)."""
    kind = draw(st.sampled_from(sorted(SOURCES)))
    text = SOURCES[kind]
    how = draw(st.sampled_from(["value", "value", "value", "truncate", "junk", "lines",
                                "random-json", "bytes"]))
    if how == "value":
        if kind == "results.jsonl":
            lines = text.splitlines()
            i = draw(st.integers(0, len(lines) - 1))
            doc = json.loads(lines[i])
            paths = _paths(doc)
            lines[i] = with_value(doc, draw(st.sampled_from(paths)), draw(st.sampled_from(HOSTILE)),
                                  None)
            return kind, how, "\n".join(lines).encode()
        doc = json.loads(text)
        return kind, how, with_value(doc, draw(st.sampled_from(_paths(doc))),
                                     draw(st.sampled_from(HOSTILE)), 1).encode()
    data = text.encode()
    if how == "truncate":
        return kind, how, data[:draw(st.integers(0, len(data) - 1))]
    if how == "junk":
        at = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\r\n", b"\x1b[2J",
                                     bytes(range(256)), b"}\n{", b'"', b"\\"]))
        return kind, how, data[:at] + junk + data[at:]
    if how == "lines":
        lines = text.splitlines(keepends=True)
        picks = draw(st.lists(st.integers(0, len(lines) - 1), max_size=2 * len(lines)))
        return kind, how, "".join(lines[i] for i in picks).encode()
    if how == "random-json":
        value = draw(st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
            lambda c: st.lists(c, max_size=4) | st.dictionaries(
                st.sampled_from(["benchmarks", "models", "config", "machine_info", "status",
                                 "summary", "ns", "key", "stats", "peak", "points", "x"]), c,
                max_size=5), max_leaves=30))
        return kind, how, json.dumps(value).encode()
    return kind, how, draw(st.binary(max_size=300))


def _check_loaded(rs: Any) -> None:
    # What was read compares with a real file both ways, prints, and
    # serialises as strict JSON (no NaN or Infinity reaches the output).
    for inputs in ([BASELINE, rs], [rs, BASELINE]):
        for normalize in ("none", "per-core", "per-peak"):
            c = attempt(f"compare/{normalize}", lambda: compare(
                inputs, normalize=normalize), (CompareError,))  # type: ignore[arg-type]
            if c is None:
                continue
            print_text(c, file=io.StringIO())
            json.dumps(to_json(c), allow_nan=False)


@given(damaged())
def test_fuzz_reading_damaged_result_files(tmp_path_factory: pytest.TempPathFactory,
                                           case: tuple[str, str, bytes]) -> None:
    kind, how, data = case
    folder = tmp_path_factory.mktemp("in")
    path = folder / kind
    path.write_bytes(data)
    rs = attempt(f"load/{kind}/{how}", lambda: load(path, max_bytes=1 << 22),
                 (ResultFileError,))
    if rs is None:
        return
    _check_loaded(rs)


@given(damaged())
def test_fuzz_merging_damaged_results(tmp_path_factory: pytest.TempPathFactory,
                                      case: tuple[str, str, bytes]) -> None:
    kind, how, data = case
    folder = tmp_path_factory.mktemp("shard")
    (folder / "results.jsonl").write_bytes(data)
    out = tmp_path_factory.mktemp("merged")
    report = attempt(f"merge/{kind}/{how}",
                     lambda: merge([folder, DATA / "machine_a"], out / "m"),
                     (ResultFileError, MergeError))
    if report is None:
        return
    # A merge that succeeds wrote what it says: every record it counts, one
    # per configuration, the report of them, and a folder compare reads.
    lines = (out / "m" / "results.jsonl").read_text().splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    assert report.records == len(lines) == len(set(keys))
    assert set(keys) >= {json.loads(line)["key"] for line in
                         (DATA / "machine_a" / "results.jsonl").read_text().splitlines()}
    summary = json.loads((out / "m" / "summary.json").read_text())
    assert summary["counts"]["configs"] == report.records
    assert (out / "m" / "report.html").is_file()
    _check_loaded(load(out / "m"))


def test_error_messages_are_one_line_naming_the_file(tmp_path: Path) -> None:
    hostile = '"\\u001b[31mred\\nline"'
    for raw in (hostile, "NaN", "1" + "0" * 5000, "[" * 5000 + "]" * 5000):
        doc = json.loads(SOURCES["results.jsonl"].splitlines()[0])
        path = tmp_path / "results.jsonl"
        path.write_text(with_value(doc, ("status",), raw, None) + "\n")
        with pytest.raises(ResultFileError) as e:
            load(path)
        msg = str(e.value)
        assert str(path) in msg and "\n" not in msg and "\x1b" not in msg, msg
    # A name with control characters is read, but shown harmless.
    doc = json.loads(SOURCES["bench.json"])
    path = tmp_path / "b.json"
    path.write_text(with_value(doc, ("benchmarks", 0, "fullname"), hostile, 1))
    rs = load(path)
    assert all(r.label.isprintable() for r in rs.rows.values())


def test_values_that_broke_the_readers(tmp_path: Path) -> None:
    # A topology whose core lists hold lists (unhashable: TypeError) and an
    # affinity CPU of 1e400 (inf: OverflowError) escaped as crashes.
    doc = json.loads(SOURCES["results.jsonl"].splitlines()[0])
    path = tmp_path / "results.jsonl"
    doc["machine"]["topology"] = {"cores": [{"cpus": [[0], {"a": 1}]}, {"cpus": [0, 1]}]}
    path.write_text(json.dumps(doc) + "\n")
    assert load(path).cores is not None
    doc["config"]["settings"]["affinity"] = [[MARK]]
    path.write_text(json.dumps(doc).replace(json.dumps(MARK), "1e400") + "\n")
    with pytest.raises(ResultFileError, match="affinity CPU number must be an int"):
        load(path)


def test_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(SOURCES["results.jsonl"])
    with pytest.raises(ResultFileError, match="byte limit"):
        load(path, max_bytes=100)
    with pytest.raises(ValueError, match="byte limit"):
        ResultStore(path).records(max_bytes=100)


# --------------------------------------------------------------- ResultStore


def _machine() -> dict[str, Any]:
    first = json.loads(SOURCES["results.jsonl"].splitlines()[0])
    machine: dict[str, Any] = first["machine"]
    return machine


@given(damaged())
def test_fuzz_resuming_from_a_damaged_store(tmp_path_factory: pytest.TempPathFactory,
                                            case: tuple[str, str, bytes]) -> None:
    # Resume reads its own results.jsonl: bad lines are skipped with a
    # warning; a record that is not a well-formed result refuses the file
    # (ValueError naming it). Whatever is accepted feeds the run's summary.
    kind, how, data = case
    path = tmp_path_factory.mktemp("store") / "results.jsonl"
    path.write_bytes(data)
    store = ResultStore(path)
    records = attempt(f"store/{kind}/{how}", lambda: store.resumable(_machine(), read_result))
    if records is None:
        return
    assert all(key == r.key for key, r in records)
    json.dumps(summarize_run([r for _, r in records]), allow_nan=False)


def test_store_skips_bad_lines_with_a_bounded_number_of_warnings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "results.jsonl"
    good = SOURCES["results.jsonl"].splitlines()[0]
    path.write_bytes(b"\n".join([b"\xff\xfe junk", b"[" * 100_000, b'{"a": NaN}', b"[1, 2]",
                                 good.encode()] + [b"{"] * 1000) + b"\n")
    records = ResultStore(path).records()
    assert [r["key"] for r in records] == [json.loads(good)["key"]]
    err = capsys.readouterr().err
    # One warning: the first five lines named with why, then how many more.
    assert len(err.splitlines()) == 1 and err.startswith("warning: 1004 line(s) ")
    assert f"{path}:1 (not UTF-8 text)" in err and f"{path}:2 (JSON nested too deeply)" in err
    assert f"{path}:3 (not usable JSON (NaN" in err and "a JSON array, not an object" in err
    assert f"{path}:6 (not complete JSON" in err and "and 999 more" in err


def test_store_refuses_records_it_cannot_resume(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    good = json.loads(SOURCES["results.jsonl"].splitlines()[0])
    for change, match in ((lambda r: r.pop("key"), "no key"),
                          (lambda r: r.update(key=["k"]), "no key"),
                          (lambda r: r.update(status="done"), "status"),
                          (lambda r: r["config"].pop("model"), "config.model"),
                          (lambda r: r["config"]["settings"].update(turbo=True), "turbo"),
                          (lambda r: r["summary"].update(median=-1.0), "summary.median")):
        record = json.loads(json.dumps(good))
        change(record)
        path.write_text(json.dumps(record) + "\n")
        with pytest.raises(ValueError, match=match):
            ResultStore(path).check_resumable(_machine(), check_config_record)


def test_each_store_checks_its_own_kind_of_record(tmp_path: Path) -> None:
    # operators.jsonl holds operator tasks (a "task", no "config"): resume
    # checks them as tasks, and refuses a configuration record there.
    from pyparbench.harness.operators import check_task_record

    path = tmp_path / "operators.jsonl"
    config_record = json.loads(SOURCES["results.jsonl"].splitlines()[0])
    task_record = {k: v for k, v in config_record.items() if k not in ("config", "summary")}
    task_record["task"] = {"shape": {"kind": "gemm"}}
    path.write_text(json.dumps(task_record) + "\n")
    assert len(ResultStore(path).check_resumable(_machine(), check_task_record)) == 1
    with pytest.raises(ValueError, match="config"):
        ResultStore(path).check_resumable(_machine(), check_config_record)
    path.write_text(json.dumps(config_record) + "\n")
    with pytest.raises(ValueError, match="no task"):
        ResultStore(path).check_resumable(_machine(), check_task_record)
