"""The recommendation as each framework takes it (`recommend --for/--emit`,
pyparbench/frameworks/deploy.py).

On this machine the emitted start script runs as printed (bash, with a
``python`` on its PATH that is this interpreter with ``-P``) and starts the
emitted code followed by a read-back: the framework's own getters, and the
threading audit (pyparbench/frameworks/proc_audit.py) of the threads that
worked, whose CPUs must be each instance's ``cpus``. On larger machines
(synthetic and XML topologies) the text, JSON and emitted forms are checked
against the CPU lists they must hold.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import _topo_xml as tx
from _support import IMPORTED_FROM
from pyparbench.frameworks.deploy import TARGETS, Deployment, deployment
from pyparbench.frameworks.mapping import map_settings
from pyparbench.settings import Settings, instance_cpus
from pyparbench.threading import topology
from pyparbench.cpulist import cpu_str

ROOT = Path(__file__).resolve().parents[1]
HAVE = {m: importlib.util.find_spec(m) is not None for m in ("torch", "onnxruntime",
                                                            "tensorflow", "onnx")}


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not HAVE[module], reason=f"{module} is not installed")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-P", "-m", "pyparbench", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


# ------------------------------------------------------ run as emitted, here

# What each child runs after the emitted code: some work in the framework
# between two audits, then what the framework reports, into a file of its own
# (instances run at once).
WORK = {
    "torch": """
x = torch.randn(384, 384)
def work():
    for _ in range(60):
        torch.mm(x, x)
def report():
    return {"num_threads": torch.get_num_threads(),
            "num_interop_threads": torch.get_num_interop_threads(),
            "mkldnn": bool(torch.backends.mkldnn.enabled)}
""",
    "onnxruntime": """
import numpy as np
feed = {"x": np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)}
def work():
    for _ in range(60):
        session.run(None, feed)
def report():
    so = session.get_session_options()
    out = {"intra_op_num_threads": so.intra_op_num_threads,
           "inter_op_num_threads": so.inter_op_num_threads,
           "execution_mode": str(so.execution_mode).split(".")[-1]}
    for key in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning",
                "session.intra_op_thread_affinities"):
        try:
            out[key] = so.get_session_config_entry(key)
        except Exception:
            out[key] = None
    return out
""",
    "tensorflow": """
x = tf.random.normal((384, 384))
def work():
    for _ in range(60):
        tf.linalg.matmul(x, x).numpy()
def report():
    th = tf.config.threading
    return {"inter_op_parallelism_threads": th.get_inter_op_parallelism_threads(),
            "intra_op_parallelism_threads": th.get_intra_op_parallelism_threads(),
            "synchronous_execution": tf.config.experimental.get_synchronous_execution()}
""",
}
# Before the emitted code: the CPUs the launch line gave (GOMP_CPU_AFFINITY
# later binds the main thread to the first of them).
PROLOGUE = "import os as _os\n_cpus = sorted(_os.sched_getaffinity(0))\n"
READBACK = """
import json, os
from pyparbench.frameworks import proc_audit
process_cpus = _cpus
work()
before = proc_audit.snapshot()
work()
after = proc_audit.snapshot()
audit = proc_audit.compare(before, after, threads=64, cpus=None)
with open(f"result-{os.getpid()}.json", "w") as f:
    json.dump({"process_cpus": process_cpus, "audit": audit, "reported": report()}, f)
"""


def _python_shim(folder: Path) -> Path:
    """A ``python`` for the launch lines: this interpreter, ``-P``, with
    pyparbench importable (the read-back's audit), its stderr in a file of
    its own (stderr-PID), as instances started together would interleave
    libgomp's OMP_DISPLAY_ENV in one stream mid-line."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -P \"$@\" "
                    "2> \"stderr-$$\"\n")
    shim.chmod(0o755)
    return bin_dir


def _matmul_model(path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.eye(256, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", 1, [256, 256])],
                              [helper.make_tensor_value_info("y", 1, [256, 256])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every ONNX Runtime this project supports
    onnx.save(model, str(path))


def run_as_emitted(dep: Deployment, framework: str, folder: Path) -> list[dict[str, Any]]:
    """Run the emitted start script of ``framework`` in ``folder``, each
    instance starting the emitted code and the read-back; one result per
    instance, in instance order (matched by the CPUs each was given)."""
    bin_dir = _python_shim(folder)
    emitted = dep.python(framework)
    compile(emitted, "<emitted>", "exec")
    # One program for all instances: where the emitted code has a block per
    # instance, each runs its own, chosen by the CPUs its launch line gave.
    head, *blocks = re.split(r"^# instance \d+ \(.*\)$", emitted, flags=re.M)
    assert len(blocks) in (0, len(dep.instances))
    serve = head + "".join(f"if _cpus == {sorted(i.cpus)!r}:\n"
                           + "".join(f"    {line}\n" for line in b.strip().splitlines())
                           for i, b in zip(dep.instances, blocks))
    (folder / "serve.py").write_text(PROLOGUE + serve + WORK[framework] + READBACK)
    if framework == "onnxruntime":
        _matmul_model(folder / "model.onnx")
    script = dep.shell(framework)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": IMPORTED_FROM,
           "OMP_DISPLAY_ENV": "verbose"}  # libgomp prints what it read (stderr)
    for k in ("OMP_NUM_THREADS", "GOMP_CPU_AFFINITY", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        env.pop(k, None)
    done = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=400)
    stderr = done.stderr + "".join(p.read_text() for p in sorted(folder.glob("stderr-*")))
    assert done.returncode == 0, f"{script}\n{stderr[-3000:]}"
    results = [json.loads(p.read_text()) for p in folder.glob("result-*.json")]
    assert len(results) == len(dep.instances), stderr[-3000:]
    by_cpus = {tuple(r["process_cpus"]): r for r in results}
    out = [by_cpus[tuple(sorted(i.cpus))] for i in dep.instances]
    for r in out:
        r["stderr"] = stderr
    return out


def check_cpus(dep: Deployment, results: list[dict[str, Any]]) -> None:
    """Each instance's process and every thread that worked in it kept to
    the instance's ``cpus``, and together they used them all."""
    for inst, r in zip(dep.instances, results):
        assert r["process_cpus"] == sorted(inst.cpus)
        working = r["audit"]["working"]
        assert working, r
        assert set(r["audit"]["cpus_allowed"]) == set(inst.cpus), (inst, working)
        assert set(r["audit"]["cpus_last_seen"]) <= set(inst.cpus), (inst, working)


HERE = topology()
ALLOWED = sorted(os.sched_getaffinity(0))
# Settings this machine holds (2 CPUs or more): one instance on two CPUs
# with Intel's spin count, and one instance per CPU.
TWO = Settings(intra_op=2, affinity="compact", omp_wait=20000)
PER_CPU = Settings(instances=2, affinity="compact")
LOCAL = pytest.mark.skipif(len(ALLOWED) < 2 or len(HERE.cores) < 2,
                           reason="needs two cores this process may use")
# Framework processes started and run (seconds each): with the slow tests.
SLOW = pytest.mark.slow


def here(settings: Settings, framework: str) -> Deployment:
    return deployment(settings, instance_cpus(settings, HERE), HERE, batch=1,
                      targets=(framework,))


@SLOW
@LOCAL
@needs("torch")
@pytest.mark.parametrize("settings", [TWO, PER_CPU], ids=["1x2", "2-instances"])
def test_torch_takes_the_emitted_setting(settings: Settings, tmp_path: Path) -> None:
    dep = here(settings, "torch")
    results = run_as_emitted(dep, "torch", tmp_path)
    for r in results:
        assert r["reported"] == {"num_threads": settings.intra_op,
                                 "num_interop_threads": settings.inter_op, "mkldnn": True}
    check_cpus(dep, results)
    # libgomp read the emitted affinity (as places, one CPU each) and spin
    # count (OMP_DISPLAY_ENV).
    err = results[0]["stderr"]
    for inst in dep.instances:
        places = ",".join(f"{{{c}}}" for c in inst.cpus)
        assert f"OMP_PLACES = '{places}'" in err
    if settings.omp_wait == 20000:
        assert "GOMP_SPINCOUNT = '20000'" in err
    if settings.intra_op == 2:
        # One OpenMP thread per CPU: each working thread may run on one CPU only.
        omp = [w for w in results[0]["audit"]["working"] if len(w["allowed"]) == 1]
        assert sorted(c for w in omp for c in w["allowed"]) == sorted(dep.instances[0].cpus)


@SLOW
@LOCAL
@needs("onnxruntime")
@needs("onnx")
@pytest.mark.parametrize("settings", [TWO, PER_CPU], ids=["1x2", "2-instances"])
def test_onnxruntime_takes_the_emitted_setting(settings: Settings, tmp_path: Path) -> None:
    dep = here(settings, "onnxruntime")
    results = run_as_emitted(dep, "onnxruntime", tmp_path)
    for inst, r in zip(dep.instances, results):
        knobs = dep.targets["onnxruntime"].configs[inst.index].knobs
        rep = r["reported"]
        assert rep["intra_op_num_threads"] == settings.intra_op
        assert rep["inter_op_num_threads"] == settings.inter_op
        assert rep["execution_mode"] == "ORT_SEQUENTIAL"
        for key in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning",
                    "session.intra_op_thread_affinities"):
            assert rep[key] == knobs.get(key), key
        if settings.intra_op == 2:
            # ORT numbers CPUs from 1: the second thread's CPU.
            assert rep["session.intra_op_thread_affinities"] == str(inst.cpus[1] + 1)
            assert rep["session.intra_op.allow_spinning"] == "1"  # a spin count: spinning
    check_cpus(dep, results)


@SLOW
@LOCAL
@needs("tensorflow")
def test_tensorflow_takes_the_emitted_setting(tmp_path: Path) -> None:
    settings = Settings(scheduler="async", inter_op=2, intra_op=1, affinity="compact")
    dep = here(settings, "tensorflow")
    (r,) = run_as_emitted(dep, "tensorflow", tmp_path)
    assert r["reported"] == {"inter_op_parallelism_threads": 2,
                             "intra_op_parallelism_threads": 1, "synchronous_execution": False}
    check_cpus(dep, [r])


OMP_PROGRAM = r"""#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
int main(void) {
    int cpu[256], allowed[256];
    int n = 0;
    #pragma omp parallel
    {
        int t = omp_get_thread_num();
        volatile double s = 0;
        for (long i = 0; i < 20000000; ++i) s += i;
        cpu_set_t set;
        sched_getaffinity(0, sizeof set, &set);
        cpu[t] = sched_getcpu();
        allowed[t] = CPU_COUNT(&set) == 1 ? sched_getcpu() : -1;
        #pragma omp single
        n = omp_get_num_threads();
    }
    printf("{\"threads\": %d, \"bind\": %d, \"cpu\": [", n, (int)omp_get_proc_bind());
    for (int t = 0; t < n; ++t) printf("%s%d", t ? ", " : "", cpu[t]);
    printf("], \"bound\": [");
    for (int t = 0; t < n; ++t) printf("%s%d", t ? ", " : "", allowed[t]);
    printf("]}\n");
    return 0;
}
"""


@SLOW
@LOCAL
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is missing")
def test_an_openmp_program_takes_the_emitted_environment(tmp_path: Path) -> None:
    src = tmp_path / "prog.c"
    src.write_text(OMP_PROGRAM)
    subprocess.run(["gcc", "-O1", "-fopenmp", str(src), "-o", str(tmp_path / "prog")],
                   check=True, timeout=120)
    dep = deployment(TWO, instance_cpus(TWO, HERE), HERE, batch=1, targets=("openmp",),
                     program="./prog")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_"))}
    done = subprocess.run(["bash", "-c", dep.shell("openmp")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    cpus = list(dep.instances[0].cpus)
    assert got["threads"] == 2 and got["bind"] == 3  # omp_proc_bind_close
    # Thread i on the i-th place: exactly the instance's CPUs, in order.
    assert got["bound"] == cpus and got["cpu"] == cpus


# ------------------------------------------- larger machines: text, JSON, forms


def _check_deploy_json(d: dict[str, Any]) -> None:
    """The invariants of ``recommend --json``'s deploy part against its
    ``cpus`` and settings."""
    s = Settings.from_dict(d["settings"])
    dep = d["deploy"]
    cpus = d["cpus"]
    assert len(cpus) == s.instances == len(dep["instances"])
    assert [i["cpus"] for i in dep["instances"]] == cpus
    flat = [c for c in (c for inst in cpus for c in inst)]
    assert len(flat) == len(set(flat)) == s.threads  # disjoint, one CPU per thread
    for i, inst in enumerate(dep["instances"]):
        launch = inst["launch"]
        if inst["numa_nodes"]:
            assert launch == (f"numactl --physcpubind={cpu_str(inst['cpus'])} --membind="
                              f"{','.join(map(str, inst['numa_nodes']))} python serve.py")
        else:
            assert launch == f"taskset -c {cpu_str(inst['cpus'])} python serve.py"
    pinned = s.affinity != "none"
    fw = dep["frameworks"]
    assert set(fw) == set(TARGETS)
    for i, inst in enumerate(cpus):
        torch = fw["torch"]
        assert torch["knobs"][i]["num_threads"] == s.intra_op
        assert torch["knobs"][i]["num_interop_threads"] == s.inter_op
        assert torch["env"][i]["OMP_NUM_THREADS"] == str(s.intra_op)
        if pinned and s.inter_op == 1:
            assert torch["env"][i]["GOMP_CPU_AFFINITY"] == " ".join(map(str, inst[:s.intra_op]))
        ort = fw["onnxruntime"]["knobs"][i]
        assert ort["intra_op_num_threads"] == s.intra_op
        if pinned and s.intra_op > 1:
            assert ort["session.intra_op_thread_affinities"] == ";".join(
                str(c + 1) for c in inst[1:s.intra_op])
        omp = fw["openmp"]["env"][i]
        if pinned:
            assert re.findall(r"\{(\d+)\}", omp["OMP_PLACES"]) == [str(c) for c in inst]
        tf = fw["tensorflow"]["knobs"][i]
        assert (tf["inter_op_parallelism_threads"], tf["intra_op_parallelism_threads"]) == \
            (s.inter_op, s.intra_op)
        # The emitted code is the mapping's: the same knobs for this instance.
        one = map_settings("torch", s.with_(instances=1), cpus=inst if pinned else None)
        assert one.knobs == torch["knobs"][i] and one.env == torch["env"][i]
    for name, f in fw.items():
        for n in f["not_applicable"]:
            assert n["reason"] and n["instead"], (name, n)
        # The start script launches each instance once, on its own CPUs.
        launches = [line for line in f["shell"].splitlines() if "serve.py" in line
                    and not line.startswith("#")]
        assert len(launches) == len(cpus)
        for line, inst in zip(launches, dep["instances"]):
            assert inst["launch"] in line


@pytest.mark.skipif(tx.LSTOPO is None, reason="lstopo missing (apt-get install hwloc)")
def test_recommend_for_larger_machines(tmp_path: Path) -> None:
    interleaved = tx.intel_2s_interleaved(tmp_path / "ilv.xml", cores=8)
    snc = tx.intel_snc2(tmp_path / "snc.xml", cores=8)
    cases = [("googlenet", "8", "package:2 core:28 pu:2"),
             ("dlrm-kaggle", "16", str(interleaved)),
             ("resnet50", "8", str(snc))]
    numa_seen = False
    for model, batch, topo in cases:
        out = cli("recommend", model, "--batch", batch, "--topology", topo, "--json")
        assert out.returncode == 0, out.stderr
        d = json.loads(out.stdout)
        _check_deploy_json(d)
        numa_seen |= any(i["numa_nodes"] for i in d["deploy"]["instances"])
        if topo == str(snc):
            t = topology(snc)
            for inst in d["deploy"]["instances"]:
                homes = {n.os_index for n in t.numa_nodes if set(n.pus) & set(inst["cpus"])}
                assert inst["numa_nodes"] == sorted(homes)
        text = cli("recommend", model, "--batch", batch, "--topology", topo)
        assert text.returncode == 0, text.stderr
        for inst in d["deploy"]["instances"]:
            assert f"instance {inst['index']}: {inst['launch']}" in text.stdout
        for name in ("TensorFlow", "PyTorch", "ONNX Runtime", "an OpenMP program"):
            assert f"  {name} (" in text.stdout
    assert numa_seen  # the SNC machine's instances are bound to their memory


def test_emit_prints_only_the_part_to_paste() -> None:
    topo = "package:2 numa:1 core:28 pu:2"
    full = json.loads(cli("recommend", "googlenet", "--batch", "8", "--topology", topo,
                          "--json").stdout)
    for form in ("shell", "python"):
        for fw in TARGETS:
            out = cli("recommend", "googlenet", "--batch", "8", "--topology", topo,
                      "--emit", form, "--for", fw)
            assert out.returncode == 0, out.stderr
            assert out.stdout == full["deploy"]["frameworks"][fw][form]
            if form == "python":
                compile(out.stdout, f"<{fw}>", "exec")  # pastes as Python
            else:
                assert subprocess.run(["bash", "-n"], input=out.stdout, text=True).returncode == 0
    shell = cli("recommend", "googlenet", "--batch", "8", "--topology", topo, "--emit",
                "shell", "--for", "torch").stdout
    assert "numactl --physcpubind=" in shell and "--membind=" in shell


def test_bad_emit_input_is_argparse_s_error() -> None:
    for args, msg in ((("--emit", "bash", "--for", "torch"), "invalid choice: 'bash'"),
                      (("--emit", "shell"), "--emit needs --for FRAMEWORK"),
                      (("--for", "jax"), "invalid choice: 'jax'"),
                      (("--emit", "shell", "--for", "torch", "--json"), "not allowed with")):
        out = cli("recommend", "mlp-512", "--no-calibrate", *args)
        assert out.returncode == 2, (args, out.stderr)
        assert msg in out.stderr and "usage:" in out.stderr and "Traceback" not in out.stderr


def test_deployment_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="unknown framework 'jax'"):
        deployment(TWO, [[0, 1]], HERE, batch=1, targets=("jax",))
    with pytest.raises(ValueError, match=r"one non-empty CPU list per instance \(2\)"):
        deployment(PER_CPU, [[0]], HERE, batch=1)
    with pytest.raises(ValueError, match="batch must be an integer >= 1, got 0"):
        deployment(TWO, [[0, 1]], HERE, batch=0)


@needs("torch")
def test_a_value_pytorch_refuses_is_named() -> None:
    import torch

    from pyparbench.frameworks.torch.knobs import configure

    with pytest.raises(ValueError, match=r"PyTorch refused torch\.set_num_threads\(0\): "
                                         r".*positive"):
        configure(torch, {"num_threads": 0, "num_interop_threads": 1, "mkldnn": True})


@needs("onnxruntime")
@needs("onnx")
def test_a_session_onnx_runtime_refuses_is_named(tmp_path: Path) -> None:
    import onnxruntime as ort

    from pyparbench.frameworks.onnxruntime.knobs import open_session, session_options

    _matmul_model(tmp_path / "m.onnx")
    # Affinities for two more threads than the pool has: ONNX Runtime's check.
    knobs = {"intra_op_num_threads": 2, "inter_op_num_threads": 1,
             "execution_mode": "ORT_SEQUENTIAL", "graph_optimization_level": "ORT_ENABLE_ALL",
             "session.intra_op_thread_affinities": "1;2;3"}
    so = session_options(ort, knobs)
    with pytest.raises(ValueError, match=r"ONNX Runtime refused the session options "
                                         r"\(intra_op_num_threads=2, .*affinities"):
        open_session(ort, str(tmp_path / "m.onnx"), so, knobs)


@SLOW
def test_a_refused_knob_comes_back_from_a_framework_run_in_one_line(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pyparbench.frameworks import ModelRef, run_framework
    from pyparbench.frameworks.child import HOOK_ENV

    # A stand-in for torch whose thread setter refuses the count, as a
    # framework does past its limit; the child applies the knobs the same way.
    (tmp_path / "refusing_torch.py").write_text(
        "def set_num_threads(n):\n"
        "    raise RuntimeError(f'at most 1 thread on this build, got {n}')\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{IMPORTED_FROM}")
    monkeypatch.setenv(HOOK_ENV, "import=refusing_torch@torch")
    res = run_framework(ModelRef("mlp-512", 1, kwargs={"layers": 1}), "torch",
                        Settings(intra_op=2), timeout=120)
    assert res.status == "error"
    assert res.error.endswith("PyTorch refused torch.set_num_threads(2): at most 1 thread "
                              "on this build, got 2")
    assert "\n" not in res.error
