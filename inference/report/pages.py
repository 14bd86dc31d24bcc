"""The report's layout rendered as plain text, Markdown or one static HTML page (inline CSS and SVG, no script
and no external resource, so it shows inside Airflow's sandboxed plugin iframe)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape


@dataclass
class Section:
    title: str
    lines: list[tuple[str, str]] = field(default_factory=list)  # (label, value)
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)
    charts: list[tuple[str, str]] = field(default_factory=list)  # (svg, text version)
    notes: list[str] = field(default_factory=list)


def as_text(title: str, sections: list[Section]) -> str:
    out = [title, "=" * len(title)]
    for s in sections:
        out += ["", s.title, "-" * len(s.title)]
        width = max((len(k) for k, _ in s.lines), default=0)
        out += [f"{k:<{width}}  {v}" for k, v in s.lines]
        for header, rows in s.tables:
            out += text_table(header, rows)
        for _, text in s.charts:
            out += text.splitlines()
        out += s.notes
    return "\n".join(out) + "\n"


def text_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" if k == 0 else f"{{:>{w}}}" for k, w in enumerate(widths))
    return [fmt.format(*header), *(fmt.format(*map(str, row)) for row in rows)]


def markdown(title: str, sections: list[Section]) -> str:
    out = [f"# {title}"]
    for s in sections:
        out += ["", f"## {s.title}", ""]
        out += [f"- **{k}**: {md(v)}" for k, v in s.lines]
        for header, rows in s.tables:
            out += [
                "",
                "| " + " | ".join(header) + " |",
                "|" + "|".join("---" if k == 0 else "---:" for k in range(len(header))) + "|",
            ]
            out += ["| " + " | ".join(md(str(x)) for x in row) + " |" for row in rows]
        for _, text in s.charts:
            out += ["", "```", text, "```"]
        out += [f"\n_{md(n)}_" for n in s.notes]
    return "\n".join(out) + "\n"


def md(text: str) -> str:
    return text.replace("|", "\\|")


CSS = """
body{font-family:system-ui,sans-serif;margin:16px;color:#222;max-width:1000px}
h1{font-size:20px;margin:0 0 8px} h2{font-size:15px;margin:20px 0 6px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0} td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left} dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:4px 0}
dt{color:#555} dd{margin:0} .note{color:#666;font-style:italic} svg{display:block;margin:6px 0}
"""


def html(title: str, sections: list[Section]) -> str:
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1 data-testid='report-title'>{escape(title)}</h1>",
    ]
    for s in sections:
        out.append(f"<section><h2>{escape(s.title)}</h2>")
        if s.lines:
            out.append("<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in s.lines) + "</dl>")
        for header, rows in s.tables:
            out.append("<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{escape(str(x))}</td>" for x in row) + "</tr>" for row in rows]
            out.append("</tbody></table>")
        for svg, _ in s.charts:
            out.append(svg)
        out += [f"<p class='note'>{escape(n)}</p>" for n in s.notes]
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out)


# --- numbers ------------------------------------------------------------------------------------------------
