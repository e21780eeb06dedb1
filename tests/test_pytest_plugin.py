"""The pytest plugin, in pytest runs of its own (pytester, fresh processes)."""

from __future__ import annotations

import json
import os
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from _support import needs_onednn_bf16, physical_cores

# Slow (each test runs pytest in a process of its own): left out of the
# quick run, `pytest -m "not slow and not slurm"`.
pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]
pytest.importorskip("pytest_benchmark")

ROOT = Path(__file__).resolve().parents[1]


def _installed() -> bool:
    return any(ep.value == "pyparbench.pytest_plugin" for ep in entry_points(group="pytest11"))


# An installed pyparbench loads the plugin through its entry point; naming it
# with -p as well would register it twice.
PLUGIN: tuple[str, ...] = () if _installed() else ("-p", "pyparbench.pytest_plugin")

# A kernel whose C++ loop "measures" known times, so what reaches
# pytest-benchmark's statistics can be checked exactly.
FAKE_KERNEL = '''
import numpy as np

class FakeKernel:
    threads = 2
    pinned_cpus = []
    flops = 4e9
    def __init__(self):
        self.calls = []
    def timeit(self, *args, repeats, warmup):
        self.calls.append((args, repeats, warmup))
        return np.array([3000.0, 1000.0, 2000.0, 5000.0][:repeats])
'''


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args)


def test_the_entry_point_is_declared() -> None:
    tomllib = pytest.importorskip("tomllib")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    plugins = meta["project"]["entry-points"]["pytest11"]
    assert plugins == {"pyparbench": "pyparbench.pytest_plugin"}


def test_the_entry_point_loads_the_plugin_and_bench_conftest_does_not_load_it_twice(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # An installed distribution as pytest sees it: a dist-info with the entry point.
    site = pytester.mkdir("site")
    info = site / "pyparbench_plugin_check-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyparbench-plugin-check\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\npyparbench = pyparbench.pytest_plugin\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    pytester.makeconftest((ROOT / "bench" / "conftest.py").read_text())
    pytester.makepyfile(test_it='''
        import pytest

        @pytest.mark.ppb_threads(1, 2)
        def test_t(ppb_threads, ppb_pinned):
            assert ppb_threads in (1, 2)
    ''')
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers",
                                        "--ppb-threads", "1")
    res.assert_outcomes(passed=1)


def test_kernel_times_reach_the_saved_json_with_the_fingerprint(pytester: pytest.Pytester
                                                                 ) -> None:
    pytester.makepyfile(fake=FAKE_KERNEL)
    pytester.makepyfile(test_it='''
        import numpy as np
        import pyparbench as ppb
        from fake import FakeKernel

        def test_fake(ppb_bench):
            k = FakeKernel()
            ns = ppb_bench(k, "x", rounds=4, warmup=2)
            assert list(ns) == [3000.0, 1000.0, 2000.0, 5000.0]
            assert k.calls == [(("x",), 4, 2)]

        def test_gemm(ppb_bench):
            g = ppb.ops.Gemm(64, 64, 64, threads=1)
            a = np.ones(g.a_shape, np.float32)
            b = np.ones(g.b_shape, np.float32)
            out = np.empty(g.out_shape, np.float32)
            ns = ppb_bench(g, a, b, None, out, rounds=7)
            assert ns.shape == (7,) and (ns > 0).all()
            assert (out == 64).all()
    ''')
    res = _run(pytester, "--benchmark-json=out.json", "--benchmark-save-data")
    res.assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "out.json").read_text())
    fp = saved["machine_info"]["pyparbench"]
    assert "error" not in fp
    assert fp["onednn"]["isa"] and fp["onednn"]["version"] and fp["onednn"]["cpu_runtime"]
    assert fp["openmp"]["library"]
    assert fp["cpus"]["allowed"] and fp["cpus"]["physical_cores"] >= 1
    assert "governor" in fp and fp["topology"]["cores"]
    by_name = {b["name"]: b for b in saved["benchmarks"]}
    fake = by_name["test_fake"]["stats"]
    assert fake["data"] == pytest.approx([3e-6, 1e-6, 2e-6, 5e-6], rel=1e-12)
    assert fake["rounds"] == 4 and fake["median"] == pytest.approx(2.5e-6)
    extra = by_name["test_fake"]["extra_info"]
    assert extra["threads"] == 2 and extra["gflop"] == 4.0
    assert extra["ppb_blocks"] == [4]  # 4 rounds: one block
    assert extra["gflops_median"] == pytest.approx(4e9 / 2500.0)
    gemm = by_name["test_gemm"]
    assert gemm["stats"]["rounds"] == 7 and len(gemm["stats"]["data"]) == 7
    assert gemm["extra_info"]["threads"] == 1


def test_a_model_file_is_timed_whole_under_its_name(pytester: pytest.Pytester) -> None:
    # A small CNN written with onnx.helper: the user's file, benchmarked by path.
    pytester.makepyfile(test_it='''
        import hashlib
        import numpy as np, onnx
        from onnx import TensorProto, helper, numpy_helper
        from pyparbench.settings import Settings

        def test_file(ppb_model, tmp_path):
            rng = np.random.default_rng(0)
            nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                     helper.make_node("Relu", ["c"], ["r"]),
                     helper.make_node("GlobalAveragePool", ["r"], ["y"])]
            w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
            g = helper.make_graph(
                nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 1, 1])], [w])
            path = tmp_path / "my.onnx"
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
            ns = ppb_model(str(path), batch=2, settings=Settings(intra_op=1), rounds=5)
            assert ns.shape == (5,) and (ns > 0).all()
            (tmp_path.parent / "name.txt").write_text(
                "my.onnx@" + hashlib.sha256(path.read_bytes()).hexdigest()[:12])

        def test_bad_file(ppb_model, tmp_path):
            import pytest
            with pytest.raises(ValueError, match="no such file"):
                ppb_model(str(tmp_path / "missing.onnx"))
    ''')
    res = _run(pytester, "--benchmark-json=out.json", f"--basetemp={pytester.path / 'tmp'}")
    res.assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "out.json").read_text())
    bench = next(b for b in saved["benchmarks"] if b["name"] == "test_file")
    assert bench["stats"]["rounds"] == 5
    extra = bench["extra_info"]
    name = (pytester.path / "tmp" / "name.txt").read_text()
    assert extra["model"] == name and extra["batch"] == 2 and extra["threads"] == 1
    assert extra["gflop"] > 0 and extra["timer"].startswith("CompiledGraph.run")


def test_rounds_run_in_blocks_recorded_in_extra_info(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(fake=FAKE_KERNEL)
    pytester.makepyfile(test_it='''
        import time
        import pytest
        from fake import FakeKernel

        def test_blocks(ppb_bench):
            k = FakeKernel()
            t0 = time.perf_counter()
            ns = ppb_bench(k, "x", rounds=7, warmup=1, blocks=3, pause=0.1)
            assert time.perf_counter() - t0 >= 0.2  # two pauses between three blocks
            assert [c[1:] for c in k.calls] == [(3, 1), (2, 1), (2, 1)]
            assert list(ns) == [3000.0, 1000.0, 2000.0, 3000.0, 1000.0, 3000.0, 1000.0]

        def test_default_blocks(ppb_bench):
            k = FakeKernel()
            k.timeit = lambda *a, repeats, warmup: [1000.0] * repeats
            ppb_bench(k, rounds=20, pause=0)

        def test_the_defaults(ppb_bench):
            k = FakeKernel()
            k.timeit = lambda *a, repeats, warmup: [1000.0] * repeats
            ppb_bench(k, pause=0)

        @pytest.mark.parametrize("bad", [0, 8, True, 2.0])
        def test_bad_blocks(ppb_bench, bad):
            with pytest.raises(ValueError, match="blocks must be an int from 1 to rounds"):
                ppb_bench(FakeKernel(), rounds=7, blocks=bad)

        def test_bad_pause(ppb_bench):
            with pytest.raises(ValueError, match="pause must be a number of seconds"):
                ppb_bench(FakeKernel(), rounds=4, pause=-1)
    ''')
    res = _run(pytester, "--benchmark-json=out.json", "--benchmark-save-data")
    res.assert_outcomes(passed=8)
    saved = {b["name"]: b for b in json.loads((pytester.path / "out.json").read_text())
             ["benchmarks"]}
    assert saved["test_blocks"]["extra_info"]["ppb_blocks"] == [3, 2, 2]
    assert len(saved["test_blocks"]["stats"]["data"]) == 7
    assert saved["test_default_blocks"]["extra_info"]["ppb_blocks"] == [4] * 5
    assert saved["test_the_defaults"]["extra_info"]["ppb_blocks"] == [20] * 10


def test_a_second_measurement_in_one_test_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(fake=FAKE_KERNEL)
    pytester.makepyfile(test_it='''
        import pytest
        from fake import FakeKernel
        from pytest_benchmark.fixture import FixtureAlreadyUsed

        def test_twice(ppb_bench):
            ppb_bench(FakeKernel(), rounds=2)
            with pytest.raises(FixtureAlreadyUsed):
                ppb_bench(FakeKernel(), rounds=2)
    ''')
    _run(pytester).assert_outcomes(passed=1)


def test_disabled_benchmarks_run_the_kernel_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(fake=FAKE_KERNEL)
    pytester.makepyfile(test_it='''
        from fake import FakeKernel

        def test_once(ppb_bench):
            k = FakeKernel()
            assert list(ppb_bench(k, rounds=4)) == [3000.0]
            assert k.calls == [((), 1, 0)]
    ''')
    _run(pytester, "--benchmark-disable").assert_outcomes(passed=1)


def test_thread_counts_from_marker_option_and_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it='''
        import os
        import pytest

        @pytest.mark.ppb_threads(1, 3, "max")
        def test_marked(ppb_threads):
            assert ppb_threads in (1, 3, len(os.sched_getaffinity(0)))

        def test_default(ppb_threads):
            assert 1 <= ppb_threads <= len(os.sched_getaffinity(0))
    ''')
    res = _run(pytester, "--strict-markers", "--collect-only", "-q")
    ids = [line for line in res.outlines if "::" in line]
    cpus = len(os.sched_getaffinity(0))
    marked = ["test_it.py::test_marked[t1]", "test_it.py::test_marked[t3]"]
    if cpus not in (1, 3):
        marked.append(f"test_it.py::test_marked[t{cpus}]")
    default = [f"test_it.py::test_default[t{n}]" for n in (1, 2, 4, 8, 16, 32, 64, 128)
               if n <= cpus]
    if f"test_it.py::test_default[t{cpus}]" not in default:
        default.append(f"test_it.py::test_default[t{cpus}]")
    assert ids == marked + default
    res = _run(pytester, "--strict-markers", "--ppb-threads", "2,1", "--collect-only", "-q")
    assert [line for line in res.outlines if "::" in line] == [
        "test_it.py::test_marked[t2]", "test_it.py::test_marked[t1]",
        "test_it.py::test_default[t2]", "test_it.py::test_default[t1]"]
    _run(pytester, "--strict-markers", "--ppb-threads", "1").assert_outcomes(passed=2)


def test_bad_thread_counts_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it='''
        def test_t(ppb_threads):
            pass
    ''')
    res = _run(pytester, "--ppb-threads", "1,zero")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--ppb-threads 1,zero: thread counts are integers >= 1 or 'max', got 'zero'" in (
        res.stderr.str())
    pytester.makepyfile(test_it='''
        import pytest

        @pytest.mark.ppb_threads(0)
        def test_t(ppb_threads):
            pass
    ''')
    res = _run(pytester)
    assert "@pytest.mark.ppb_threads: thread counts are integers >= 1" in res.stdout.str()
    assert res.ret != 0


def test_pinned_scope_pins_audits_and_restores(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it='''
        import os
        import numpy as np
        import pytest
        import pyparbench as ppb
        from pyparbench.threading import ThreadingMismatchError

        def _gemm(threads):
            g = ppb.ops.Gemm(96, 96, 96, threads=threads)
            args = (np.ones(g.a_shape, np.float32), np.ones(g.b_shape, np.float32), None,
                    np.empty(g.out_shape, np.float32))
            return g, args

        @pytest.mark.ppb_threads(1, 2)
        def test_pinned(ppb_bench, ppb_pinned, ppb_threads):
            g, args = _gemm(ppb_threads)
            with ppb_pinned(g) as team:
                assert len(team.cpus) == ppb_threads
                assert g.pinned_cpus == list(team.cpus)
                ppb_bench(g, *args, rounds=3)
            assert team.report.ok, team.report.mismatches
            assert team.report.audit.cpus_seen <= set(team.cpus)
            assert g.pinned_cpus == []  # the earlier (no) pinning is back

        def test_a_kernel_that_did_not_run_fails_the_audit(ppb_pinned):
            g, args = _gemm(1)
            with pytest.raises(ThreadingMismatchError, match="no thread reported work"):
                with ppb_pinned(g):
                    pass

        def test_a_team_larger_than_the_machine_is_skipped(ppb_pinned):
            g, args = _gemm(len(os.sched_getaffinity(0)) + 1)
            with ppb_pinned(g):
                g.run(*args)
    ''')
    res = _run(pytester, "--strict-markers", "-rs", "--benchmark-json=out.json")
    # ppb_pinned places compact with smt=False: a team of 2 needs 2 physical
    # cores this process may use (allowed_cores, the reading place() makes),
    # which a 2-vCPU VM of one SMT core lacks.
    cores = physical_cores()
    res.assert_outcomes(passed=2 + min(cores, 2) - 1, skipped=1 + (cores < 2))
    res.stdout.fnmatch_lines(["*cannot pin * thread(s) here*"])
    saved = json.loads((pytester.path / "out.json").read_text())
    pinned = [b["extra_info"]["pinned_cpus"] for b in saved["benchmarks"]]
    assert sorted(len(p) for p in pinned) == [1, 2][:min(cores, 2)]


def test_the_plugin_does_not_need_pytest_benchmark(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it='''
        def test_plain(ppb_threads):
            assert ppb_threads >= 1

        def test_bench(ppb_bench):
            raise AssertionError("not reached: skipped without pytest-benchmark")
    ''')
    res = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:benchmark", "-p", "no:cacheprovider",
                                        "--strict-markers", "--ppb-threads", "1", "-rs")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["*ppb_bench needs pytest-benchmark*"])


def test_a_broken_install_is_recorded_not_fatal(pytester: pytest.Pytester) -> None:
    # The fingerprint hook must never lose a user's run.
    pytester.makeconftest('''
        import pyparbench.pytest_plugin as plugin

        def _broken():
            raise OSError("no hwloc")

        plugin.fingerprint = _broken
    ''')
    pytester.makepyfile(test_it='''
        def test_b(benchmark):
            benchmark(sum, [1, 2])
    ''')
    res = _run(pytester, "--benchmark-json=out.json")
    res.assert_outcomes(passed=1)
    saved = json.loads((pytester.path / "out.json").read_text())
    assert saved["machine_info"]["pyparbench"] == {"error": "OSError: no hwloc"}


@needs_onednn_bf16()
def test_ppb_precision_runs_models_at_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it='''
        from pyparbench.settings import Settings

        def test_default(ppb_model):
            ppb_model("mlp-512", batch=2, rounds=3)

        def test_given(ppb_model):
            ppb_model("mlp-512", batch=2, settings=Settings(intra_op=2), rounds=3)
    ''')
    res = _run(pytester, "--benchmark-json=out.json", "--ppb-precision", "bf16")
    res.assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "out.json").read_text())
    extra = {b["name"]: b["extra_info"] for b in saved["benchmarks"]}
    assert extra["test_default"]["precision"] == "bf16"
    assert extra["test_default"]["settings"].endswith(" bf16")
    assert extra["test_given"]["settings"] == "sync 1x2 library/onednn/openmp none bf16"
    # Without the option, the settings' own (fp32 by default).
    res = _run(pytester, "--benchmark-json=fp32.json")
    res.assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "fp32.json").read_text())
    assert {b["extra_info"]["precision"] for b in saved["benchmarks"]} == {"fp32"}
    bad = _run(pytester, "--ppb-precision", "fp16")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--ppb-precision fp16: precision must be one of 'fp32', "
                              "'bf16', 'int8', got 'fp16'*"])
