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

import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("family", None, "model family, e.g. globalsplat " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("from", None, "the weights file (.pth/.pt/.ckpt/.npz) " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("workdir", None, "new run directory to create " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_string("kind", "official", "the file's layout, as the family's converter names it",
                        flag_values=fv)


def _family_config(known) -> str | None:
    """Without --config: the family's first preset (e.g. globalsplat_16k, the released model)."""
    import configs
    from configs.flags import ConfigError

    family = known["family"].value
    if family is None:
        return None
    if family not in configs.families():
        raise ConfigError(f"--family={family}: no configs/{family}.py; families: "
                          f"{', '.join(sorted(configs.families()))}")
    return f"{family}_{configs.families()[family][0]}"


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config_default=_family_config)
    if isinstance(args, int):
        return args

    from locojax.train.import_run import import_weights
    from locojax.train.run_dir import ConfigMismatchError

    with cli.OneLineErrors({(ConfigMismatchError, FileNotFoundError, ImportError, ValueError): 2}) as failed:
        import_weights(args.family, getattr(args, "from"), args.workdir, args.config, kind=args.kind)
    return failed.exit_code


if __name__ == "__main__":
    sys.exit(main())
