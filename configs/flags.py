"""The `--config` absl flag: `ml_collections.config_flags` with named presets and checked overrides.

    --config=globalsplat_16k                    a name (`<family>_<preset>`, see `configs/__init__.py`)
    --config=configs/globalsplat.py:16k         the family file with its preset (config_flags' syntax)
    --config=RUN/config.json                    a run's saved config
    --config.optimizer.learning_rate=1e-4       an override, parsed by config_flags to the field's type

Before config_flags defines the override flags, every override key is checked to exist (a wrong key
names the closest valid ones; a section cannot be set as a whole); a key inside an open section
(`configs.common.OPEN_SECTIONS`, e.g. `optimizer.group_learning_rates.backbone`) may be added. After
parsing, numeric tuples are checked: numbers, the preset's length (unless the key is in
`configs.common.VARIABLE_LENGTH_TUPLES`) and the preset's element types (`data.image_shape=64` is
refused, `render.background=1,1,1` becomes floats); counts and cadences respect
`configs.common.MINIMUM_VALUES` (`eval_every=0` is refused).
"""

from __future__ import annotations

import difflib
import re
from typing import Optional, Sequence

import ml_collections
from absl import flags
from ml_collections.config_flags import config_flags

from configs.common import MINIMUM_VALUES, OPEN_SECTIONS, VARIABLE_LENGTH_TUPLES
from configs.loading import load_config


class ConfigError(Exception):
    """A bad `--config` value or override (not a ValueError: absl would rewrap it)."""


def all_keys(config, prefix: str = "") -> list[str]:
    """Every dotted key (sections and leaves) of a ConfigDict."""
    out = []
    for k in config.keys():
        v = config[k]
        out.append(prefix + k)
        if isinstance(v, ml_collections.ConfigDict):
            out += all_keys(v, prefix + k + ".")
    return out


def override_keys(argv: Sequence[str], name: str = "config") -> list[str]:
    """The dotted keys of `--config.KEY[=VALUE]` arguments in argv, in order, without repeats."""
    keys = []
    for a in argv:
        m = re.match(r"^-{1,2}(?:no)?%s\.([^=]+)" % re.escape(name), a)
        if m and m.group(1) not in keys:
            keys.append(m.group(1))
    return keys


def _closest(key: str, config) -> str:
    """The valid keys closest to `key`: by the whole dotted key, then by its last part."""
    keys = [k for k in all_keys(config) if not isinstance(_get(config, k), ml_collections.ConfigDict)]
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    leaf = key.rsplit(".", 1)[-1]
    for k in keys:
        if k not in close and difflib.get_close_matches(leaf, [k.rsplit(".", 1)[-1]], cutoff=0.75):
            close.append(k)
    return ", ".join(close[:5]) if close else "(none close; --print_config lists every key)"


def prepare(config, keys: Sequence[str], name: str = "config") -> None:
    """Check that every override key exists (ConfigError naming the closest valid keys otherwise);
    add the keys of open sections with a typed empty value."""
    for key in keys:
        *parents, leaf = key.split(".")
        node = config
        for i, p in enumerate(parents):
            if p not in node or not isinstance(node[p], ml_collections.ConfigDict):
                raise ConfigError(f"--{name}.{key}: unknown config key; closest valid keys: "
                                  f"{_closest(key, config)}")
            node = node[p]
        section = ".".join(parents)
        if leaf not in node:
            if section in OPEN_SECTIONS or (parents and len(node) == 0):
                with node.unlocked():
                    node[leaf] = ml_collections.FieldReference(None, field_type=OPEN_SECTIONS.get(section, object))
                continue
            raise ConfigError(f"--{name}.{key}: unknown config key; closest valid keys: {_closest(key, config)}")
        if isinstance(node[leaf], ml_collections.ConfigDict):
            raise ConfigError(f"--{name}.{key}: a section, not a value; set one of its keys "
                              f"(e.g. --{name}.{key}.{next(iter(node[leaf].keys()), 'KEY')}=...)")


def _get(config, key: str):
    node = config
    for p in key.split("."):
        node = node[p]
    return node


def _set(config, key: str, value) -> None:
    *parents, leaf = key.split(".")
    node = config
    for p in parents:
        node = node[p]
    node[leaf] = value


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def validate(config, original, keys: Sequence[str], name: str = "config") -> None:
    """Numeric tuples keep the preset's length (unless variable by design) and element types; keys of
    `MINIMUM_VALUES` are at least that."""
    for key in keys:
        try:
            before = _get(original, key)
        except (KeyError, AttributeError):
            continue  # an added open-section key
        value = _get(config, key)
        if key in MINIMUM_VALUES and _is_number(value) and value < MINIMUM_VALUES[key]:
            raise ConfigError(f"--{name}.{key}={value}: must be at least {MINIMUM_VALUES[key]}")
        if not (isinstance(before, tuple) and before and all(_is_number(x) for x in before)):
            continue
        value = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        like = ",".join(map(str, before))
        if not all(_is_number(x) for x in value):
            text = ",".join(map(str, value))
            raise ConfigError(f"--{name}.{key}: expected {len(before)} numbers like {like}, got {text!r}")
        leaf = key.rsplit(".", 1)[-1]
        if len(value) != len(before) and leaf not in VARIABLE_LENGTH_TUPLES and key not in VARIABLE_LENGTH_TUPLES:
            raise ConfigError(f"--{name}.{key}: expected a tuple of {len(before)} numbers like {like}, "
                              f"got {len(value)}: {value}")
        as_float = any(isinstance(x, float) for x in before)
        out = []
        for x in value:
            if not as_float and x != int(x):
                raise ConfigError(f"--{name}.{key}: expected integers, got {x!r} in {value}")
            out.append(float(x) if as_float else int(x))
        _set(config, key, tuple(out))


class _ConfigParser(config_flags.ConfigFileFlagParser):
    """`--config` values: a spec for `configs.load_config`, or a ConfigDict (programmatic use)."""

    def __init__(self, name: str, argv: Sequence[str]):
        super().__init__(name=name, lock_config=False)
        self._keys = override_keys(argv, name)
        self.original = None

    def parse(self, value):
        if isinstance(value, ml_collections.ConfigDict):
            config = value
        else:
            try:
                config = load_config(value)
            except (ValueError, OSError) as e:
                raise ConfigError(f"--{self.name}={value}: {e}") from None
        prepare(config, self._keys, self.name)
        self.original = config.copy_and_resolve_references()
        return config


def define_config_flag(flag_values: flags.FlagValues, argv: Sequence[str], *, name: str = "config",
                       default=None, help_string: Optional[str] = None) -> flags.FlagHolder:
    """Define `--<name>` (+ its `--<name>.KEY=VALUE` overrides) on `flag_values` for parsing `argv`."""
    parser = _ConfigParser(name, argv)
    flag = config_flags._ConfigFlag(  # DEFINE_config_file with our parser (names, json, ConfigDicts)
        parser=parser, serializer=flags.ArgumentSerializer(), name=name, default=default,
        help_string=help_string or ("a config: NAME (e.g. globalsplat_tiny; --config=help lists them), "
                                    "configs/<family>.py:<preset>, or RUN/config.json"),
        flag_values=flag_values, sys_argv=list(argv))
    holder = flags.DEFINE_flag(flag, flag_values)
    holder._locojax_parser = parser  # noqa: SLF001 - validate() needs the preset's values
    return holder


def check_parsed(holder: flags.FlagHolder, argv: Sequence[str], name: str = "config") -> None:
    """After `flag_values(argv)`: the tuple checks of `validate`."""
    parser = holder._locojax_parser  # noqa: SLF001
    if holder.value is not None and parser.original is not None:
        validate(holder.value, parser.original, override_keys(argv, name), name)


def apply_overrides(config, overrides: Sequence[str]):
    """`configs.apply_overrides`: "KEY=VALUE" strings through the same flag parsing; ValueError on errors."""
    argv = ["apply_overrides"]
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"Config override {item!r} is not of the form KEY=VALUE")
        argv.append("--config." + item.removeprefix("config."))
    fv = flags.FlagValues()
    try:
        holder = define_config_flag(fv, argv, default=config)
        fv(argv)
        check_parsed(holder, argv)
    except (ConfigError, flags.Error) as e:
        raise ValueError(str(e)) from None
    return config
