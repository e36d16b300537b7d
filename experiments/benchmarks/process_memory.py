"""Host memory of this benchmark process: peak and current resident set size, and giving the
allocator's freed heap back to the OS (for figures that must not count what a compile released)."""

from __future__ import annotations

import ctypes
import gc
import os
import sys


def peak_rss_bytes():
    """This process' peak resident set size so far in bytes, or None where `resource` is missing."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # bytes on macOS, KiB on Linux


def resident_bytes():
    """Current resident set size in bytes (Linux /proc), or None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_freed_memory():
    """Hand freed heap back to the OS; returns the resident bytes afterwards.

    glibc keeps freed memory in its arenas, so after a large compile the process stays resident at
    the compiler's peak although it has released it; figures taken afterwards (and the memory left
    to the step's own buffers) would count it. `malloc_trim(0)` returns it (glibc only; a no-op
    elsewhere)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return resident_bytes()
