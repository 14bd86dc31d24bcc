"""Output heads as plug-ins: every module in this package that defines `HEAD` is a head, and so is
every module named in INFERENCE_HEAD_MODULES (comma-separated import paths, read once at import: the
table columns depend on it). Adding an output is one new module; see `inference.heads.base`.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import MISSING

from inference.errors import ConfigError
from inference.heads.base import EncodedChunk, Head, HeadOutput, LoadedHead, OutputColumn

__all__ = ["EncodedChunk", "Head", "HeadOutput", "LoadedHead", "OutputColumn", "all_heads", "configured", "get"]


def _extra_modules() -> tuple[str, ...]:
    """INFERENCE_HEAD_MODULES, read through its declaration (inference.config.Settings.head_modules)."""
    from inference.config import Settings
    from inference.settings_spec import env_fields

    value = dict(env_fields(Settings))["head_modules"].read(os.environ)
    return () if value is MISSING else tuple(m.strip() for m in value.split(",") if m.strip())


def _discover() -> dict[str, Head]:
    modules = [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if m.name != "base"]
    modules += list(_extra_modules())
    found: dict[str, Head] = {}
    for path in modules:
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            raise ConfigError(f"INFERENCE_HEAD_MODULES: cannot import head module {path} ({exc})") from None
        head = getattr(module, "HEAD", None)
        if head is None:
            continue
        if not isinstance(head, Head):
            raise ConfigError(f"{path}.HEAD is not an inference.heads.Head")
        if head.name in found:
            raise ConfigError(f"two head modules define a head named {head.name!r}")
        found[head.name] = head
    columns = [c.name for h in found.values() for c in h.columns]
    if len(columns) != len(set(columns)):
        raise ConfigError(f"head modules declare the same column twice: {sorted(columns)}")
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))


_REGISTRY = _discover()


def all_heads() -> tuple[Head, ...]:
    """Every known head, in table-column order."""
    return tuple(_REGISTRY.values())


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> Head:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown head {name!r}; known: {', '.join(_REGISTRY)}") from None


def configured(settings) -> tuple[Head, ...]:
    """The heads this deployment computes (INFERENCE_HEADS), in table-column order."""
    wanted = set(settings.heads)
    return tuple(h for h in _REGISTRY.values() if h.name in wanted)


def output_columns() -> list[OutputColumn]:
    return [c for h in all_heads() for c in h.columns]
