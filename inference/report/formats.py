"""The report as text, Markdown, HTML or JSON.

One layout (sections of key/value lines, tables and charts) rendered four ways. HTML is a single static page:
inline CSS and SVG, no script and no external resource, so it shows inside Airflow's sandboxed plugin iframe.
"""

from __future__ import annotations

import json
from typing import Any

from inference.pipeline.progress import duration
from inference.report import charts
from inference.report.pages import Section, as_text, html, markdown

FORMATS = ("text", "md", "html", "json")


def render(report: dict[str, Any], fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(report, indent=2, sort_keys=True, default=str)
    sections = layout(report)
    title = f"Run report {report['run']['run_id']}"
    if fmt == "text":
        return as_text(title, sections)
    if fmt == "md":
        return markdown(title, sections)
    if fmt == "html":
        return html(title, sections)
    raise ValueError(f"unknown report format {fmt!r}: one of {', '.join(FORMATS)}")


# --- layout -------------------------------------------------------------------------------------------------


def layout(r: dict[str, Any]) -> list[Section]:
    run = r["run"]
    head = Section("Run")
    head.lines += [("run", run["run_id"]), ("status", run["status"])]
    if "window_start" in r["run"]:
        head.lines += [
            ("window", f"{_when(run['window_start'])} .. {_when(run['window_end'])} UTC"),
            ("model", run["model_version"]),
            ("planned", f"{_when(run['planned_at'])} UTC"),
            ("finished", f"{_when(run['finished_at'])} UTC" if run["finished_at"] else "not yet"),
            ("run wall time", _secs(run["wall_seconds"])),
            ("shards", str(run["shards"])),
        ]
        options = {k: v for k, v in (run["options"] or {}).items() if v not in (None, False, [], "")}
        if options:
            head.lines.append(("options", ", ".join(f"{k}={v}" for k, v in sorted(options.items()))))
        if run["error"]:
            head.lines.append(("error", run["error"]))
    else:
        head.lines.append(("first step started", f"{_when(run['started_at'])} UTC"))
        head.notes.append("plan never recorded this run: it failed before planning (see the steps below).")
    sections = [head]
    if "counts" in r:
        sections += [_counts(r), _failures(r)]
    sections.append(_steps(r))
    if "model" in r:
        sections += [_model(r), _chunks(r), _batches(r), _tokens(r), _outputs(r), _categories(r), _cost(r)]
    return [s for s in sections if s.lines or s.tables or s.charts or s.notes]


def _counts(r) -> Section:
    c = r["counts"]
    backlog = c["backlog"]
    s = Section("Tickets by state")
    rows = [[state, _int(n), _share(n, backlog)] for state, n in c["by_state"].items()]
    rows.append(["backlog", _int(backlog), ""])
    s.tables.append((["state", "tickets", "share"], rows))
    if c["by_reason"]:
        s.tables.append(
            (["state", "reason", "tickets"], [[e["state"], e["reason"], _int(e["tickets"])] for e in c["by_reason"]])
        )
    source = c.get("source") or {}
    if source.get("duplicate_rows"):
        s.lines.append(("duplicate source rows dropped (newest kept)", _int(source["duplicate_rows"])))
    if source.get("retracted"):
        s.lines.append(("results of deleted tickets removed", _int(source["retracted"])))
    return s


def _failures(r) -> Section:
    s = Section("Failures by type")
    if r["failures"]:
        rows = [[f["error_class"], f["status"], _int(f["tickets"]), str(f["max_attempt"])] for f in r["failures"]]
        s.tables.append((["error class", "status", "tickets", "attempts (max)"], rows))
    else:
        s.lines.append(("failures", "none"))
    return s


def _steps(r) -> Section:
    s = Section("Wall time per step")
    rows = []
    for e in r["steps"]:
        unfinished = f" ({e['unfinished']} never finished)" if e["unfinished"] else ""
        rows.append([e["step"], f"{e['invocations']}{unfinished}", _secs(e["wall_seconds"])])
    if rows:
        s.tables.append((["step", "invocations", "wall time"], rows))
    else:
        s.notes.append("no step timings recorded (a run of an older release, before schema revision 0004).")
    return s


def _model(r) -> Section:
    m = r["model"]
    s = Section("Model")
    s.lines += [
        (
            "tickets/s",
            f"{_num(m['tickets_per_second'])} ({_int(m['tickets'])} tickets over "
            f"{_secs(m['processing_seconds'])} while a model task worked on chunks; time queued for the pool and "
            "spent loading the model excluded)",
        ),
        (
            "with model loading",
            f"{_num(m['tickets_per_second_with_loading'])} tickets/s over "
            f"{_secs(m['model_wall_seconds'])} while a model task ran",
        ),
        ("tokens/s", _num(m["tokens_per_second"])),
        (
            "model time",
            f"{_secs(m['model_seconds'])} of {_secs(m['device_seconds'])} device time "
            f"({_pct(m['model_busy_share'])} busy)",
        ),
        (
            "padding efficiency",
            f"{_pct(m['padding_efficiency'])} ({_int(m['real_tokens'])} real of "
            f"{_int(m['padded_tokens'])} padded tokens)",
        ),
    ]
    return s


def _chunks(r) -> Section:
    c = r["chunks"]
    s = Section("Throughput per chunk")
    if not c["series"]:
        s.notes.append("no chunk was committed.")
        return s
    rates = [e["tickets_per_second"] for e in c["series"]]
    d = c["tickets_per_second"]
    s.lines += [
        ("chunks", _int(c["chunks"])),
        ("tickets/s per chunk", f"p10 {_num(d.get('p10'))}, median {_num(d.get('p50'))}, p90 {_num(d.get('p90'))}"),
        ("model share of chunk time", _pct(c["model_share_of_chunk_time"])),
    ]
    labels = [
        f"chunk {e['n']} ({e['step']}{'' if e['shard'] < 0 else ' shard ' + str(e['shard'])})" for e in c["series"]
    ]
    s.charts.append(
        (
            charts.svg_bars(labels, [v or 0.0 for v in rates], title="Tickets/s per committed chunk", unit="/s"),
            "tickets/s per chunk  " + charts.sparkline(rates),
        )
    )
    return s


def _batches(r) -> Section:
    b = r["batch_sizes"]
    s = Section("Achieved batch sizes (tickets per forward pass)")
    if not b.get("batches"):
        s.notes.append("no forward pass recorded.")
        return s
    cap = f"; {_pct(b['at_cap_share'])} of batches at the cap of {b['cap']}" if b.get("cap") else ""
    s.lines += [
        ("forward passes", _int(b["batches"])),
        (
            "batch size",
            f"mean {_num(b['mean'])}, p10 {_num(b['p10'])}, median {_num(b['p50'])}, "
            f"p90 {_num(b['p90'])}, max {_num(b['max'])}{cap}",
        ),
    ]
    s.charts.append(_histogram(b["histogram"], "Forward passes by batch size", "passes"))
    return s


def _tokens(r) -> Section:
    t = r["token_lengths"]
    s = Section("Token lengths (tokens per ticket)")
    if not t.get("tickets"):
        return s
    s.lines.append(
        (
            "tokens",
            f"mean {_num(t['mean'])}, p10 {t['p10']}, median {t['p50']}, p90 {t['p90']}, p99 {t['p99']}, "
            f"max {t['max']}",
        )
    )
    s.charts.append(_histogram(t["histogram"], "Tickets by token length", "tickets"))
    return s


def _outputs(r) -> Section:
    o = r["outputs"]
    s = Section("Outputs")
    if o["staged"]:
        s.lines += [
            ("truncated", f"{_int(o['truncated'])} of {_int(o['staged'])} ({_pct(o['truncated_share'])})"),
            ("uncertain category", f"{_int(o['uncertain'])} of {_int(o['staged'])} ({_pct(o['uncertain_share'])})"),
        ]
    return s


def _categories(r) -> Section:
    c = r["categories"]
    s = Section(f"Categories against the trailing nights ({c.get('trailing_nights', 0)})")
    if not c.get("labelled") and not c.get("history"):
        s.notes.append("no category outputs (the category head is off, or nothing was staged).")
        return s
    trailing = c.get("trailing_shares", {})
    labels = list(dict.fromkeys([*c.get("shares", {}), *trailing]))
    rows = []
    for label in labels:
        mine, before = c["shares"].get(label, 0.0), trailing.get(label)
        delta = "" if before is None else f"{(mine - before) * 100:+.1f} pts"
        rows.append([label, _int(c["counts"].get(label, 0)), _pct(mine), _pct(before), delta])
    s.tables.append((["category", "tickets", "share", "trailing share", "change"], rows))
    s.lines.append(
        ("uncertain share", f"{_pct(c.get('uncertain_share'))} (trailing {_pct(c.get('trailing_uncertain_share'))})")
    )
    drift = c.get("drift")
    if drift:
        verdict = "DRIFT: look at the changes above" if drift["flagged"] else "no drift"
        s.lines.append(
            (
                "drift signal",
                f"total variation {drift['total_variation']:.3f} (flagged above {drift['threshold']}): {verdict}",
            )
        )
    nights = [
        *c.get("history", []),
        {"run_id": r["run"]["run_id"], "window_start": r["run"].get("window_start"), "shares": c.get("shares", {})},
    ]
    if len(nights) > 1:
        columns = [(n["window_start"] or "")[:10] for n in nights]
        series = {label: [n["shares"].get(label, 0.0) for n in nights] for label in labels}
        text = "\n".join(
            ["share per night, oldest first:"]
            + [f"{label:<18} {charts.sparkline(values, 40)}" for label, values in series.items()]
        )
        s.charts.append((charts.svg_stacked(columns, series, title="Category shares, last nights and this run"), text))
    return s


def _cost(r) -> Section:
    c = r["cost"]
    s = Section("Device time and cost")
    s.lines.append(("device time", f"{c['device_hours']:.4f} device-hours (model tasks' wall time added up)"))
    if c["price_per_device_hour"]:
        s.lines += [
            ("price", f"{c['price_per_device_hour']:g} per device-hour (INFERENCE_DEVICE_HOUR_PRICE)"),
            ("cost of the run", f"{c['total']:.4f}"),
            (
                "cost per 1,000 tickets",
                f"{_num4(c['per_1000_tickets'])} (model time only: "
                f"{_num4(c['per_1000_tickets_model_time_only'])}); compare with a provider's batch price",
            ),
        ]
    else:
        s.notes.append("set INFERENCE_DEVICE_HOUR_PRICE for the cost per 1,000 tickets.")
    return s


def _histogram(buckets: list[dict], title: str, unit: str) -> tuple[str, str]:
    labels = [f"{b['from']}" if b["from"] == b["to"] else f"{b['from']}-{b['to']}" for b in buckets]
    counts = [b["count"] for b in buckets]
    top = max(counts) if counts else 0
    rows = [f"{label:>11} {charts.text_bar(n, top)} {n:,}" for label, n in zip(labels, counts, strict=True)]
    text = "\n".join([f"{title} ({unit}):", *rows])
    return charts.svg_bars(labels, counts, title=f"{title} ({unit})"), text


def _int(n) -> str:
    return "-" if n is None else f"{int(n):,}"


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.2f}"


def _num4(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1%}"


def _share(n: int, total: int) -> str:
    return f"{n / total:.1%}" if total else "-"


def _secs(v) -> str:
    if v is None:
        return "-"
    return f"{v:,.1f} s" if v < 120 else f"{v:,.0f} s ({duration(v)})"


def _when(iso: str | None) -> str:
    return "-" if not iso else iso.replace("T", " ")[:19]
