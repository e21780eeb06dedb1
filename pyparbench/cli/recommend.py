"""``pyparbench recommend``: the thread setting a model should run with, and why.

Prints every knob of the recommended setting, its predicted latency (or
throughput), the presets' predictions beside it, and the reasons: which cost
model was used, which branches of the graph can run at once, where its ops
stop scaling, and what the runners-up lose. On this machine op times are
measured once and cached (a few seconds per model); ``--no-calibrate``, or a
``--topology`` bigger than this machine, uses the analytic model instead.
"""

from __future__ import annotations

import argparse

from pyparbench import names
from pyparbench.cli._common import positive_int, print_json

__all__ = ["add_command"]


def _cmd_recommend(args: argparse.Namespace) -> int:
    from pyparbench.models import build, resolve
    from pyparbench.recommender import recommend

    libraries = tuple(x for x in args.libraries.split(",") if x)
    rec = recommend(build(resolve(args.model), args.batch), topology=args.topology,
                    objective=args.objective, calibrate=not args.no_calibrate,
                    allow_smt=args.smt, libraries=libraries, recalibrate=args.recalibrate,
                    verify=0 if args.no_verify else 3)
    if args.json:
        print_json(rec.as_dict())
    else:
        print(rec.format())
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("recommend", help="recommend a model's thread setting, with reasons",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a model name (see `pyparbench models`) or an ONNX file")
    p.add_argument("--batch", type=positive_int("--batch"), default=None,
                   help="batch size (default: the model's)")
    p.add_argument("--objective", choices=("latency", "throughput"), default="latency",
                   help="minimise one batch's latency, or maximise samples per second")
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
    p.add_argument("--libraries", default="onednn", metavar="LIST",
                   help=f"math libraries to calibrate and try, comma-separated "
                        f"({', '.join(names.LIBRARIES)}; default onednn)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=_cmd_recommend)
