"""python -m experiments.import_weights --family=globalsplat --from=ckpt.pth --workdir=DIR
                                        [--config=NAME] [--kind=official] [--config.KEY=VALUE ...]

Converts pretrained weights from a file you have (a torch .pth/.pt/.ckpt state_dict, or .npz) with
`locojax.models.<family>.convert.import_weights` and saves them as checkpoint 0 of a new run
directory DIR (with its config.json). Then:

    python -m experiments.evaluate --workdir=DIR ...       # score them
    python -m experiments.render --workdir=DIR             # a novel-view video
    python -m experiments.train --init_from=DIR ...        # fine-tune from them

--config defaults to <family>_<first preset> (e.g. globalsplat_16k, the released model). Reading a
torch file needs torch (pip install 'locojax[convert]'); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys

from experiments import cli


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    cli.quiet_tensorflow()
    parser = argparse.ArgumentParser(prog="python -m experiments.import_weights", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", required=True, help="model family, e.g. globalsplat")
    parser.add_argument("--from", dest="source", required=True, help="the weights file (.pth/.pt/.ckpt/.npz)")
    parser.add_argument("--workdir", required=True, help="new run directory to create")
    parser.add_argument("--config", default=None, help="config name (default: the family's first preset)")
    parser.add_argument("--kind", default="official", help="the file's layout, as the family's converter names it")
    args, overrides = cli.parse(parser, argv)
    name = args.config or _default_config(args.family)
    config = cli.resolve_config(name, overrides)

    from locojax.train.import_run import import_weights
    from locojax.train.run_dir import ConfigMismatchError

    try:
        import_weights(args.family, args.source, args.workdir, config, kind=args.kind)
    except (ConfigMismatchError, FileNotFoundError, ImportError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _default_config(family: str) -> str:
    import configs

    names = [n for n in configs.config_names() if n.startswith(family + "_")]
    if not names:
        sys.exit(f"error: --family={family}: no configs named {family}_*; valid: {', '.join(configs.config_names())}")
    import importlib

    presets = getattr(importlib.import_module(f"configs.{family}"), "PRESETS", None)
    return f"{family}_{presets[0]}" if presets else names[0]


if __name__ == "__main__":
    sys.exit(main())
