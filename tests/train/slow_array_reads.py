"""Run a module or script with orbax's array reads slowed down, to force the race of issue 27.

    python tests/train/slow_array_reads.py -m experiments.evaluate --workdir=W
    python tests/train/slow_array_reads.py tests/train/train_toy_driver.py W KEY=VALUE ...

Only timing changes: every array read still goes through orbax and tensorstore on the real files,
but one that succeeds returns its data DELAY_S seconds late. A read of a damaged file fails at once,
so its error reaches the caller while the intact reads of the same restore are still in flight (as
on a loaded machine, where the issue saw 11,864-29,037 lines). The first read logs one absl warning
(orbax logs through absl) before it starts: it is printed from inside the restore, so the test also
sees that a warning logged while a restore fails still shows.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys

DELAY_S = 2.0
WARNING = "slow_array_reads: intact array reads return {} s late"


def _install() -> None:
    from absl import logging
    from orbax.checkpoint._src.serialization import serialization

    # Fail loudly if orbax moves this function: the test would otherwise no longer force the race.
    read_shard = serialization._read_shard
    warned = []

    async def slow_read_shard(*args, **kwargs):
        if not warned:
            warned.append(True)
            logging.warning(WARNING.format(DELAY_S))
        out = await read_shard(*args, **kwargs)  # a damaged file fails here, without delay
        await asyncio.sleep(DELAY_S)
        return out

    serialization._read_shard = slow_read_shard


def main(argv) -> None:
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, repo)
    _install()
    if argv[0] == "-m":
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
