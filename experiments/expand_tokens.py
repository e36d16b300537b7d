"""python -m experiments.expand_tokens --workdir=SRC --to=DST [--num_tokens=4096] [--noise_std=0.01]

Turns a trained TokenGS/LocusGS run (e.g. 1024 tokens) into the start of the fine-tune at more tokens
(official: 4096): the trained tokens are copied, the new ones repeat them with N(0, 0.01^2) noise, and
LocusGS anchors/radii are expanded the same way (locojax/models/locusgs/expand.py). DST gets SRC's
config.json with model.num_tokens changed and the expanded params as checkpoint 0. Then fine-tune:

    python -m experiments.train --config=locusgs_4096 --init_from=DST --workdir=RUN

--step picks SRC's checkpoint (default: the latest).
"""

from __future__ import annotations

import os
import sys

from absl import flags

from experiments import cli


def _define_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "the trained run directory (config.json + checkpoints/) " + cli.REQUIRED,
                        flag_values=fv)
    flags.DEFINE_string("to", None, "new run directory for the expanded start " + cli.REQUIRED, flag_values=fv)
    flags.DEFINE_integer("num_tokens", 4096, "tokens after expansion", flag_values=fv)
    flags.DEFINE_float("noise_std", 0.01, "std of the noise added to repeated tokens/anchors", flag_values=fv)
    flags.DEFINE_integer("step", None, "SRC checkpoint step (default: the latest)", flag_values=fv)


def _run_config(known) -> str | None:
    from configs.flags import ConfigError

    workdir = known["workdir"].value
    if not workdir:
        return None
    path = os.path.join(workdir, "config.json")
    if not os.path.isfile(path):
        raise ConfigError(f"--workdir={workdir}: no config.json (not a run directory?)")
    return path


def expand_run(config, src: str, dst: str, num_tokens: int, noise_std: float = 0.01, step=None) -> dict:
    """Writes DST (config + checkpoint 0 with expanded params); returns {"checkpoint", "from_step", ...}."""
    import jax

    from locojax.models.locusgs.expand import expand_params
    from locojax.train import checkpoint as ckpt
    from locojax.train.import_run import start_run_from_params

    src, dst = os.path.abspath(src), os.path.abspath(dst)
    if config.get("model_family") != "locusgs":
        raise ValueError(f"--workdir={src}: model_family {config.get('model_family')!r}, expected 'locusgs'")
    if os.path.isdir(os.path.join(dst, ckpt.CHECKPOINT_DIR)) and os.listdir(os.path.join(dst, ckpt.CHECKPOINT_DIR)):
        raise ValueError(f"--to={dst} already holds checkpoints; expand into a new directory")
    old = int(config.model.num_tokens)
    if num_tokens < old:
        raise ValueError(f"--num_tokens={num_tokens} < the run's config.model.num_tokens={old}")
    raw, step = ckpt.restore_params(src, step, flag="--workdir")
    params = expand_params(jax.device_get(raw), num_tokens, noise_std=noise_std, seed=int(config.seed))
    config = config.copy_and_resolve_references()
    config.model.num_tokens = num_tokens
    out = start_run_from_params(config, dst, params, where=f"--workdir={src} (step {step})",
                                data_state={"expanded_from": src, "from_step": step},
                                run_json=dict(expanded_from=src, from_step=step, from_tokens=old), require_all=True)
    print(f"expanded {src} (step {step}, {old} tokens) -> {dst} ({num_tokens} tokens, checkpoint 0)")
    return dict(checkpoint=out["checkpoint"], from_step=step, from_tokens=old)


def main(argv=None) -> int:
    cli.quiet_tensorflow()
    args = cli.parse(argv, _define_flags, doc=__doc__, config_default=_run_config)
    if isinstance(args, int):
        return args
    from locojax.train.run_dir import ConfigMismatchError

    with cli.OneLineErrors({(ConfigMismatchError, FileNotFoundError, ValueError): 2}) as failed:
        expand_run(args.config, args.workdir, args.to, args.num_tokens, args.noise_std, args.step)
    return failed.exit_code


if __name__ == "__main__":
    sys.exit(main())
