"""The run report: what a run did, from the run tables (pandas over small aggregates; never ticket text).

`build(engine, run_id, settings)` collects and computes it (inference.report.compute); `render(report, fmt)` writes
it as text, Markdown, HTML (with inline SVG charts) or JSON. `timing` is the part finish_run shares, without pandas.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "build": "inference.report.compute",
    "render": "inference.report.formats",
    "FORMATS": "inference.report.formats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'inference.report' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
