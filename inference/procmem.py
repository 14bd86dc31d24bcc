"""This process's own peak resident memory, read where it cannot be inherited.

`ru_maxrss` is inherited across fork and exec (a child started by a big parent reports the parent's peak), so the
peak is read from /proc/self/status `VmHWM`, which belongs to the process's own address space.
"""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """This process's own high-water mark of resident memory (VmHWM), in MiB."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB
