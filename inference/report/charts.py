"""Small charts for the report: inline SVG for HTML (no script, so it shows in Airflow's sandboxed iframe and
in a mail), and block characters for text. Labels are escaped; values are numbers."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d")
SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int = 60) -> str:
    """One line of block characters; long series are averaged into `width` columns."""
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    cols = _squeeze([v if v is not None else 0.0 for v in values], width)
    top = max(cols) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))] for v in cols)


def text_bar(value: float, top: float, width: int = 30) -> str:
    n = 0 if top <= 0 else int(round(value / top * width))
    return "█" * n


def _squeeze(values: list[float], width: int) -> list[float]:
    if len(values) <= width:
        return values
    out = []
    for k in range(width):
        part = values[k * len(values) // width : (k + 1) * len(values) // width] or [0.0]
        out.append(sum(part) / len(part))
    return out


def svg_bars(
    labels: Sequence[str], values: Sequence[float], *, title: str, unit: str = "", width: int = 640, height: int = 180
) -> str:
    """Vertical bars (a histogram or a series); at most ~120 bars are drawn (longer series are averaged)."""
    vals = [float(v or 0.0) for v in values]
    if len(vals) > 120:
        step = len(vals) / 120
        labels = [labels[int(k * step)] for k in range(120)]
        vals = _squeeze(vals, 120)
    left, bottom, top_pad = 48, 28, 22
    plot_w, plot_h = width - left - 8, height - bottom - top_pad
    top = max(vals) if vals and max(vals) > 0 else 1.0
    bar_w = plot_w / max(len(vals), 1)
    parts = [_svg_open(width, height, title), _axis(left, top_pad, plot_w, plot_h, top, unit)]
    for k, (label, v) in enumerate(zip(labels, vals, strict=True)):
        h = v / top * plot_h
        x = left + k * bar_w
        parts.append(
            f'<rect x="{x + 0.5:.1f}" y="{top_pad + plot_h - h:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
            f'height="{h:.1f}" fill="{PALETTE[0]}"><title>{escape(str(label))}: {_num(v)}{escape(unit)}</title></rect>'
        )
    if labels:
        parts.append(_text(left, height - 8, labels[0], "start"))
        parts.append(_text(left + plot_w, height - 8, labels[-1], "end"))
    parts.append("</svg>")
    return "".join(parts)


def svg_stacked(
    columns: Sequence[str], series: dict[str, Sequence[float]], *, title: str, width: int = 640, height: int = 220
) -> str:
    """Stacked bars of shares (0..1): one bar per column (a night), one colour per series (a category)."""
    left, bottom, top_pad, legend_w = 48, 28, 22, 150
    plot_w, plot_h = width - left - legend_w, height - bottom - top_pad
    n = max(len(columns), 1)
    bar_w = plot_w / n
    parts = [_svg_open(width, height, title), _axis(left, top_pad, plot_w, plot_h, 1.0, "", percent=True)]
    names = list(series)
    for k, column in enumerate(columns):
        y = top_pad + plot_h
        for j, name in enumerate(names):
            v = float(series[name][k] or 0.0)
            h = v * plot_h
            y -= h
            parts.append(
                f'<rect x="{left + k * bar_w + 0.5:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
                f'height="{h:.1f}" fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(column)} · {escape(name)}: '
                f"{v:.1%}</title></rect>"
            )
    for j, name in enumerate(names):
        y = top_pad + 10 + j * 16
        parts.append(
            f'<rect x="{width - legend_w + 8}" y="{y - 9}" width="10" height="10" fill="{PALETTE[j % len(PALETTE)]}"/>'
        )
        parts.append(_text(width - legend_w + 22, y, name, "start"))
    if columns:
        parts.append(_text(left, height - 8, columns[0], "start"))
        parts.append(_text(left + plot_w, height - 8, columns[-1], "end"))
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>" + _text(4, 14, title, "start", bold=True)
    )


def _axis(left: int, top_pad: int, plot_w: float, plot_h: float, top: float, unit: str, percent: bool = False) -> str:
    parts = [
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{left + plot_w}" y2="{top_pad + plot_h}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" stroke="#888"/>',
    ]
    for frac in (0.5, 1.0):
        y = top_pad + plot_h - frac * plot_h
        label = f"{frac:.0%}" if percent else _num(top * frac) + unit
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(_text(left - 4, y + 4, label, "end"))
    return "".join(parts)


def _text(x: float, y: float, text: str, anchor: str, bold: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{weight}>{escape(str(text))}</text>'


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.2f}"
