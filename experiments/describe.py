"""python -m experiments.describe --config=NAME [--config.KEY=VALUE ...] [--json] [--noflops]

What a config builds, from abstract shapes only (jax.eval_shape; no parameter memory, nothing
compiled): total and trainable parameters, parameters per top-level module and per optimizer group,
Gaussians per scene, and the FLOPs of one forward pass (one scene) and one training step (the
config's global batch) from XLA's cost analysis of the lowered computation, with scan loops
corrected by their trip counts (locojax/train/flops.py). --json prints one JSON object on the last line.
"""

from __future__ import annotations

import json
import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_boolean("json", False, "print one JSON object on the last line", flag_values=fv)
    flags.DEFINE_boolean("flops", True, "trace and lower the forward pass and training step for FLOPs",
                         flag_values=fv)


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__)
    if isinstance(args, int):
        return args
    from locojax.train.describe import describe, format_description

    name = next((a.split("=", 1)[1] for a in (sys.argv[1:] if argv is None else argv)
                 if a.startswith("--config=")), "")
    d = describe(args.config, flops=args.flops)
    d["config"] = name
    if args.json:
        print(json.dumps(d))
    else:
        print(format_description(d, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
