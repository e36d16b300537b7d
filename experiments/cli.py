"""absl flags shared by the entry points: `--config` (ml_collections.config_flags, see configs/flags.py)
with `--config.KEY=VALUE` overrides, `--list_configs`, `--print_config`, and multi-host initialisation.

Each entry point defines its own flags on a fresh `flags.FlagValues` (so `main(argv)` can be called
more than once, e.g. by tests) and calls `parse`:

    def main(argv=None) -> int:
        args = cli.parse(argv, _define_flags, doc=__doc__)
        if isinstance(args, int):      # --help, --list_configs, --print_config, or a bad flag (printed)
            return args
        with cli.OneLineErrors({(FileNotFoundError, ValueError): 2}) as failed:
            train_and_evaluate(args.config, args.workdir)
        return failed.exit_code

A user's mistake (a missing file, a config that does not fit the run, a corrupt checkpoint) is one
line `error: ...` on stderr and exit code 2 (`error`, `OneLineErrors`); anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Mapping, Optional, Sequence, Type, Union

from absl import flags

import configs
from configs.flags import ConfigError, check_parsed, define_config_flag


def list_configs() -> str:
    """One line per family: its config names."""
    lines = ["configs (--config=NAME, or --config=configs/<family>.py:<preset>):"]
    for family, presets in sorted(configs.families().items()):
        lines.append(f"  {family}: " + ", ".join(f"{family}_{p}" for p in presets))
    return "\n".join(lines)


def format_config(config) -> str:
    """`key=value` lines of the resolved config, in the form `--config.key=value` takes."""
    from configs.flags import all_keys

    resolved = config.copy_and_resolve_references()
    lines = []
    for key in all_keys(resolved):
        node = resolved
        for part in key.split("."):
            node = node[part]
        if hasattr(node, "keys"):
            if len(node) == 0:
                lines.append(f"{key}={{}}")
            continue
        value = ",".join(map(str, node)) if isinstance(node, tuple) else node
        lines.append(f"{key}={value}")
    return "\n".join(lines)


def define_distributed_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("coordinator_address", None,
                        "multi-host: host:port of process 0 (jax.distributed.initialize)", flag_values=fv)
    flags.DEFINE_integer("num_processes", None, "multi-host: number of processes", flag_values=fv)
    flags.DEFINE_integer("process_id", None, "multi-host: this process' index", flag_values=fv)


class Args:
    """Parsed flag values by attribute (`args.workdir`), the config as `args.config`."""

    def __init__(self, fv: flags.FlagValues, config):
        self._fv = fv
        self.config = config

    def __getattr__(self, name):
        return self._fv[name].value


def _has_flag(argv: Sequence[str], name: str) -> bool:
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in argv)


def parse(argv: Optional[Sequence[str]], define: Callable[[flags.FlagValues], None], *, doc: str,
          config: str = "required", config_default: Optional[Callable[[flags.FlagValues], Optional[str]]] = None):
    """Parse argv (default sys.argv[1:]). Returns `Args`, or an exit code once help, the config list or
    the resolved config was printed, or an error was (one line on stderr).

    config: "required", "optional" (args.config may be None) or "none" (no --config flag).
    config_default: called with the flags parsed so far (known_only) when --config is absent: a config
    spec to use instead (e.g. the workdir's config.json), or None.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--help", "-h", "--helpshort", "--helpfull") for a in argv):
        fv = flags.FlagValues()
        define(fv)
        define_cache_flag(fv)
        if config != "none":
            define_config_flag(fv, [])
            _define_listing_flags(fv)
        print(doc.strip() + "\n\nflags:\n" + fv.get_help(include_special_flags=False))
        return 0
    if config != "none" and ("--config=help" in argv or _has_flag(argv, "list_configs")):
        print(list_configs())
        return 0
    prog = "locojax"
    try:
        fv = flags.FlagValues()
        define(fv)
        define_cache_flag(fv)
        holder = None
        if config != "none":
            _define_listing_flags(fv)
            default = None
            if not _has_flag(argv, "config") and config_default is not None:
                known = flags.FlagValues()
                define(known)
                known([prog, *argv], known_only=True)
                default = config_default(known)
            holder = define_config_flag(fv, argv, default=default)
        rest = fv([prog, *argv])
        if len(rest) > 1:
            raise ConfigError(f"unexpected arguments: {' '.join(rest[1:])}")
        if holder is not None:
            check_parsed(holder, argv)
            if config == "required" and holder.value is None:
                raise ConfigError("--config is required (e.g. --config=globalsplat_tiny; --config=help lists them)")
        cfg = holder.value if holder is not None else None
        if cfg is not None and fv["print_config"].value:
            print(format_config(cfg))
            return 0
        for name in _required(fv):
            if fv[name].value is None:
                raise ConfigError(f"--{name} is required")
        from locojax.train import compile_cache

        compile_cache.enable(fv["jax_cache_dir"].value)
    except (flags.Error, ConfigError, OSError) as e:
        return error(e)
    return Args(fv, cfg)


def error(message, exit_code: int = 2) -> int:
    """Prints `error: MESSAGE` (one line) on stderr and returns `exit_code`, for `main` to return."""
    print(f"error: {message}", file=sys.stderr)
    return exit_code


ErrorKinds = Union[Type[BaseException], tuple]


class OneLineErrors:
    """Context manager around the work of an entry point's `main`: an exception of a known kind raised
    in its body is printed as one line `error: MESSAGE` on stderr (no traceback) and swallowed, and
    `exit_code` becomes that kind's exit code (it stays 0 when the body finishes). Any other exception
    propagates with its traceback (a bug, not a user's mistake).

        with cli.OneLineErrors({(ConfigMismatchError, FileNotFoundError): 2, NonFiniteError: 3}) as failed:
            out = train_and_evaluate(config, workdir)
        if failed.exit_code:
            return failed.exit_code

    Args:
      exit_codes: {exception class, or tuple of classes: exit code}, matched in order like `except`
        clauses.
      message: the text after "error: " for a caught exception (default `str`).
    """

    def __init__(self, exit_codes: Mapping[ErrorKinds, int], message: Callable[[BaseException], str] = str):
        self._exit_codes = dict(exit_codes)
        self._message = message
        self.exit_code = 0

    def __enter__(self) -> "OneLineErrors":
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        if value is None:
            return False
        for kinds, code in self._exit_codes.items():
            if isinstance(value, kinds):
                self.exit_code = error(self._message(value), code)
                return True
        return False


def define_cache_flag(fv: flags.FlagValues) -> None:
    """`--jax_cache_dir`, which every entry point takes (locojax/train/compile_cache.py)."""
    flags.DEFINE_string("jax_cache_dir", None,
                        "persistent XLA compilation cache directory ('' or 'off' disables; default "
                        "$LOCOJAX_JAX_CACHE_DIR, else $JAX_COMPILATION_CACHE_DIR, else "
                        "$XDG_CACHE_HOME/locojax/jax-cache or ~/.cache/locojax/jax-cache)", flag_values=fv)


REQUIRED = "(required)"


def _required(fv: flags.FlagValues) -> list[str]:
    """Flags whose help text ends with REQUIRED (absl's mark_flag_as_required acts on the global FLAGS)."""
    return [name for name, f in fv._flags().items() if (f.help or "").endswith(REQUIRED) and name == f.name]


def _define_listing_flags(fv: flags.FlagValues) -> None:
    flags.DEFINE_boolean("list_configs", False, "print the config names (same as --config=help) and exit",
                         flag_values=fv)
    flags.DEFINE_boolean("print_config", False, "print the resolved config (after overrides) and exit",
                         flag_values=fv)


def maybe_initialize_distributed(args) -> None:
    """jax.distributed.initialize when asked (flags) — one process per host."""
    if args.coordinator_address is None and args.num_processes is None:
        return
    import jax

    jax.distributed.initialize(coordinator_address=args.coordinator_address,
                               num_processes=args.num_processes, process_id=args.process_id)


def quiet_tensorflow() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # TensorFlow only reads and decodes records here (no TF math), so its oneDNN custom kernels buy
    # nothing; on CPUs where they are on, TF prints an "oneDNN custom operations are on" notice at
    # import that TF_CPP_MIN_LOG_LEVEL does not filter (4 lines with TF 2.21: issue 27).
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
