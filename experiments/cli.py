"""Argument handling shared by the entry points: `--config=NAME` plus `--config.KEY=VALUE`
overrides (typed from the existing value), and optional multi-host initialisation."""

from __future__ import annotations

import argparse
import os
import sys

import configs


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help="config name, e.g. globalsplat_tiny; valid: " + ", ".join(configs.config_names()))
    parser.add_argument("--workdir", required=True, help="run directory (checkpoints, logs, config)")
    parser.add_argument("--coordinator_address", default=None,
                        help="multi-host: host:port of process 0 (jax.distributed.initialize)")
    parser.add_argument("--num_processes", type=int, default=None)
    parser.add_argument("--process_id", type=int, default=None)


def resolve_config(name: str, overrides: list[str]):
    """The named config with overrides applied; exits with the error message on a bad name/key."""
    try:
        config = configs.get_config(name)
        configs.apply_overrides(config, overrides)
    except ValueError as e:
        sys.exit(f"error: {e}")
    return config


def parse(parser: argparse.ArgumentParser, argv: list[str]):
    try:
        overrides, rest = configs.parse_overrides(argv)
    except ValueError as e:
        sys.exit(f"error: {e}")
    args = parser.parse_args(rest)
    return args, overrides


def maybe_initialize_distributed(args) -> None:
    """jax.distributed.initialize when asked (flags) — one process per host."""
    if args.coordinator_address is None and args.num_processes is None:
        return
    import jax

    jax.distributed.initialize(coordinator_address=args.coordinator_address,
                               num_processes=args.num_processes, process_id=args.process_id)


def quiet_tensorflow() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
