"""Device mesh and shardings: the batch is split on the "data" axis over every device of every
process; parameters and optimizer state are replicated ("replicated") or sharded along their largest
divisible axis ("fsdp", ZeRO-3 style: XLA all-gathers them where used)."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = "data"
SHARDING_MODES = ("replicated", "fsdp")
# "fsdp" keeps leaves with fewer elements than this replicated.
FSDP_MIN_ELEMENTS = 1024


def make_mesh(devices=None) -> Mesh:
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over "data", the rest replicated."""
    return NamedSharding(mesh, P(DATA_AXIS))


def _fsdp_spec(shape, num_shards: int) -> P:
    # Shard the largest axis that divides evenly; small or indivisible leaves stay replicated.
    if not shape or int(np.prod(shape)) < FSDP_MIN_ELEMENTS:
        return P()
    for axis in sorted(range(len(shape)), key=lambda a: -shape[a]):
        if shape[axis] % num_shards == 0:
            spec = [None] * len(shape)
            spec[axis] = DATA_AXIS
            return P(*spec)
    return P()


def state_shardings(abstract_state, mesh: Mesh, mode: str):
    """A pytree of NamedShardings like `abstract_state` (a pytree of ShapeDtypeStructs)."""
    if mode not in SHARDING_MODES:
        raise ValueError(f"config.sharding={mode!r}: expected one of {SHARDING_MODES}")
    n = mesh.shape[DATA_AXIS]

    def leaf_sharding(x):
        if mode == "replicated" or n == 1:
            return replicated(mesh)
        return NamedSharding(mesh, _fsdp_spec(tuple(x.shape), n))

    return jax.tree_util.tree_map(leaf_sharding, abstract_state)


def check_batch_size(global_batch_size: int, mesh: Mesh, process_count: int) -> None:
    n = mesh.size
    if global_batch_size % n != 0:
        raise ValueError(
            f"config.batch_size={global_batch_size} is not divisible by the {n} devices of the mesh; "
            f"set --config.batch_size to a multiple of {n}"
        )
    if global_batch_size % process_count != 0:
        raise ValueError(f"config.batch_size={global_batch_size} not divisible by {process_count} processes")


def global_batch(local_batch, mesh: Mesh):
    """A process-local pytree of numpy arrays ([B_local, ...]) -> global jax.Arrays sharded on "data"
    ([B_global, ...]); None leaves (e.g. absent Views.depth) stay None."""
    sharding = batch_sharding(mesh)
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), local_batch
    )


def allgather_json(obj, process_count: int) -> list:
    """Every process's JSON-serialisable `obj`, in process order (a list of length process_count);
    used for scene keys and data-iterator states, which are host-side Python values."""
    if process_count == 1:
        return [obj]
    import json

    from jax.experimental import multihost_utils

    blob = np.frombuffer(json.dumps(obj).encode(), np.uint8)
    size = int(np.max(multihost_utils.process_allgather(np.array([blob.size], np.int32))))
    buf = np.zeros((size,), np.uint8)
    buf[: blob.size] = blob
    rows = np.asarray(multihost_utils.process_allgather(buf)).reshape(process_count, size)
    return [json.loads(bytes(r).rstrip(b"\0").decode()) for r in rows]


def any_process(flag: bool, process_count: int) -> bool:
    """True on every process if `flag` is True on any process (a host-side logical OR).

    A collective when process_count > 1: every process must call it at the same point (the
    training loop calls it once per step). With one process it is just `flag` (no collective)."""
    if process_count == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    flags = multihost_utils.process_allgather(np.array([int(bool(flag))], np.int32))
    return bool(np.max(np.asarray(flags)))
