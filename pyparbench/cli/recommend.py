"""``pyparbench recommend``: the thread setting a model should run with, and why.

Prints every knob of the recommended setting, its predicted latency (or
throughput), the presets' predictions beside it, and the reasons: which cost
model was used, which branches of the graph can run at once, where its ops
stop scaling, and what the runners-up lose. On this machine op times are
measured once and cached (a few seconds per model); ``--no-calibrate``, or a
``--topology`` bigger than this machine, uses the analytic model instead.

It then writes the setting as each framework takes it (``--for`` one of
them): per instance the launch line (its CPUs, its NUMA memory), and per
framework the environment and code, with what the framework cannot take
and the closest setting it takes instead; ``--emit shell|python`` prints
only the part to paste.

``--framework onnxruntime|torch|tensorflow`` then checks the answer in that
framework on this machine: the best predicted candidates, each translated
into the framework's knobs, against the framework's own defaults and
Intel's preset in it, each in a fresh pinned process, in lockstep
(``--steps`` runs each); the setting measured fastest there is given with
its regret interval against the others, and written for the framework.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from pyparbench import choices
from pyparbench.cli._common import (PRECISION_HELP, add_precision_arg, add_shape_arg,
                                    model_from_args, positive_int, print_json)
from pyparbench.frameworks.deploy import TARGETS, deployment
from pyparbench.frameworks.openvino.knobs import benchmark_app_line, code
from pyparbench.frameworks.spec import ModelRef, not_applicable
from pyparbench.graph import Graph
from pyparbench.models import build
from pyparbench.models.llama import LLAMA_SIZES, llama_decode
from pyparbench.recommender import recommend
from pyparbench.recommender.framework_check import check_in_framework, check_installed
from pyparbench.settings import instance_cpus
from pyparbench.threading.topology import topology

if TYPE_CHECKING:
    from pyparbench.frameworks.deploy import Deployment
    from pyparbench.recommender import Recommendation

__all__ = ["add_command"]


def _cmd_recommend(args: argparse.Namespace) -> int:
    if args.emit and not args.framework:
        # argparse's own error (usage, exit 2), before any work.
        args.parser.error("--emit needs --for FRAMEWORK (one of "
                          f"{', '.join(TARGETS)})")
    name = model_from_args(args)
    if args.check_in:
        _check_first(args, name)
    libraries = tuple(x for x in args.libraries.split(",") if x)
    rec = recommend(_graph_of_phase(args, name), topology=args.topology,
                    objective=args.objective, calibrate=not args.no_calibrate,
                    allow_smt=args.smt, libraries=libraries, recalibrate=args.recalibrate,
                    verify=0 if args.no_verify else 3, precision=args.precision or "fp32")
    if args.check_in:
        return _check(rec, args, name)
    dep = _deployment(rec, args)
    if args.emit == "shell":
        sys.stdout.write(dep.shell(args.framework))
    elif args.emit == "python":
        sys.stdout.write(dep.python(args.framework))
    elif args.json:
        print_json({**rec.as_dict(), "deploy": dep.as_dict()})
    else:
        print(rec.format())
        print(dep.format())
    return 0


def _graph_of_phase(args: argparse.Namespace, name: str) -> Graph:
    """The graph ``--phase`` names: a built-in decoder's prefill (its
    registered graph) or its decode step (one token against a cache of the
    size's prompt length); any other model has one graph."""
    if args.phase is None or args.phase == "prefill" and name in LLAMA_SIZES:
        return build(name, args.batch)
    if name not in LLAMA_SIZES:
        args.parser.error(f"--phase {args.phase}: {name!r} is not a built-in decoder (one of "
                          f"{', '.join(LLAMA_SIZES)}); other models have one phase")
    if args.check_in:
        args.parser.error("--phase decode with --framework: the frameworks run the prefill "
                          "only (leave out --framework)")
    return llama_decode(args.batch or 1, size=name)


def _check_first(args: argparse.Namespace, name: str) -> None:
    """What makes --framework impossible, said before the recommender runs."""
    if args.topology is not None:
        args.parser.error("--framework measures on this machine: leave out --topology")
    check_installed(args.check_in)
    why = not_applicable(args.check_in, ModelRef(name, args.batch or 1).to_spec())
    if why is not None:
        raise ValueError(why)


def _check(rec: Recommendation, args: argparse.Namespace, name: str) -> int:
    """The recommendation checked in --framework, and the fastest setting
    there as that framework takes it."""
    check = check_in_framework(rec, name, args.check_in, steps=args.steps)
    target = args.framework or args.check_in
    dep = None
    won = next(m for m in check.measured if m.label == check.fastest)
    settings = won.settings
    if settings is not None:
        topo = topology()
        dep = deployment(settings, instance_cpus(settings, topo), topo,
                         batch=rec.predicted.instance_batch, targets=(target,),
                         program=args.program)
    if args.emit:
        if dep is None and args.check_in == "openvino" and won.knobs:
            sys.stdout.write(_openvino_preset(won.label, won.knobs, args.emit))
        elif dep is None:
            sys.stdout.write(f"# {args.check_in}'s own defaults measured fastest: "
                             "set nothing\n")
        else:
            sys.stdout.write(dep.shell(target) if args.emit == "shell" else dep.python(target))
    elif args.json:
        print_json({**rec.as_dict(), "framework_check": check.as_dict(),
                    "deploy": dep.as_dict() if dep is not None else None})
    else:
        print(rec.format())
        print(check.format())
        print(dep.format() if dep is not None else
              f"  deploy: {args.check_in} as it comes, with only {won.knobs} set"
              if won.knobs and args.check_in == "openvino" else
              f"  deploy: {args.check_in} as it comes (set no knob)")
    return 0


def _openvino_preset(label: str, knobs: dict[str, Any], form: str) -> str:
    """An OpenVINO preset that measured fastest (its hint and precision, its
    tuner left the rest), as code or as a benchmark_app line."""
    head = f"# OpenVINO's preset {label} measured fastest: only these properties set\n"
    if form == "python":
        return head + "\n".join(code(knobs)) + "\n"
    return head + benchmark_app_line(knobs) + "\n"


def _deployment(rec: Recommendation, args: argparse.Namespace) -> Deployment:
    """The recommended setting as each framework takes it, on the topology
    it was recommended for."""
    targets = (args.framework,) if args.framework else TARGETS
    return deployment(rec.settings, rec.cpus, topology(args.topology),
                      batch=rec.predicted.instance_batch, targets=targets,
                      program=args.program)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("recommend", help="recommend a model's thread setting, with reasons",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a model name (see `pyparbench models`) or an ONNX file")
    add_shape_arg(p)
    p.add_argument("--batch", type=positive_int("--batch"), default=None,
                   help="batch size (default: the model's)")
    p.add_argument("--objective", choices=("latency", "throughput"), default="latency",
                   help="minimise one batch's latency, or maximise samples per second")
    p.add_argument("--phase", choices=("prefill", "decode"), default=None,
                   help="a built-in decoder's phase: prefill (the prompt, compute-bound; the "
                        "default) or decode (one token against a cache of the prompt's "
                        "length: it streams every weight per token, so it often wants fewer "
                        "threads)")
    p.add_argument("--topology", default=None, metavar="FILE|SYNTHETIC",
                   help='another machine: an hwloc XML file (`lstopo --of xml > box.xml` '
                        'there) or a synthetic one, e.g. "package:2 core:28 pu:2" '
                        '(default: this one)')
    p.add_argument("--no-calibrate", action="store_true",
                   help="do not measure: use the analytic (roofline) cost model")
    p.add_argument("--recalibrate", action="store_true",
                   help="measure again what the calibration cache already holds")
    p.add_argument("--no-verify", action="store_true",
                   help="take the best prediction as it is (default: the three best "
                        "predicted are measured whole, a few seconds, and the measured "
                        "best taken when more than 3%% faster)")
    p.add_argument("--smt", action="store_true", help="also try settings on SMT siblings")
    add_precision_arg(p, PRECISION_HELP + "; the candidates are settings at it and are "
                      "verified at it, predicted by the fp32 cost model")
    p.add_argument("--libraries", default="onednn", metavar="LIST",
                   help=f"math libraries to calibrate and try, comma-separated "
                        f"({', '.join(choices.LIBRARIES)}; default onednn)")
    p.add_argument("--for", dest="framework", choices=TARGETS, default=None,
                   help="the framework the setting is written for (default: all of them)")
    p.add_argument("--framework", dest="check_in", choices=("onnxruntime", "openvino",
                                                            "torch", "tensorflow"),
                   default=None,
                   help="check the answer in this framework on this machine: the best "
                        "predicted candidates in its knobs against its own defaults and "
                        "Intel's preset, each in a pinned process, in lockstep; the "
                        "fastest measured is the answer")
    p.add_argument("--steps", type=positive_int("--steps"), default=30, metavar="N",
                   help="with --framework: timed runs of each contender, taken in turn "
                        "(default 30)")
    p.add_argument("--program", default="python serve.py", metavar="COMMAND",
                   help="what each instance's launch line starts (default: python serve.py)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON instead of text")
    out.add_argument("--emit", choices=("shell", "python"), default=None,
                     help="print only what to paste for the --for framework: the start "
                          "script (environment and launch lines) or the code for the top of "
                          "the program")
    p.set_defaults(func=_cmd_recommend, parser=p)
