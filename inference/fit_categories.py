"""`python -m inference fit-categories`: fit the category head on a help desk's own labelled tickets.

    python -m inference fit-categories --from tickets.jsonl [--label-column label] --out models/category_head.npz
    python -m inference --db URL fit-categories --from-table closed_tickets --label-column queue --out ...

Rows: a file of labelled tickets, JSON Lines (objects with subject/body and the label under --label-column,
default `label`) or CSV/TSV with a header row, as help desks export them (columns subject, body and the label,
or --subject-column, --body-column; Excel's byte-order mark and `;` delimiter are fine); or a table of the
tickets database (id/subject/body columns as TICKETS_COL_*, or --subject-column etc.).
Labels can be anything the agents used (queues, types): the head's labels are the distinct values with at
least --min-per-label tickets (default 5; fewer are dropped and listed); they replace the taxonomy. Labels that
are also taxonomy labels get that label's descriptions as extra training rows (`--descriptions auto`).
When every label is a taxonomy label, the head is also anchored to their first descriptions, as the default
head is (`Recipe.anchor`, inference.category_fit); labels of your own, or `--descriptions none`, fit no anchor.

Tickets are read as the pipeline reads them (input policy, mail tail cut off) and embedded by the
configured model (INFERENCE_MODEL, INFERENCE_DEVICE, ...); exact duplicate texts count once (majority
label). The held-out accuracy is measured by k-fold cross-validation (--folds, default 5): every ticket
scored by a head fitted without it; the temperature of the stored head is fitted on those out-of-fold
scores, and the stored head is then fitted on all the tickets (inference.category_fit, the default recipe).
The L2 penalty is chosen by the same cross-validation (`choose_l2`: the lowest out-of-fold log-loss, walking
from the default head's 0.003 towards weaker penalties while it falls, else towards stronger ones; each
candidate tried is logged and reported). A large history needs far less of it than the 344 bundled tickets
(BANKING77's 10,003 queries in 77 queues: 0.741 held out at 0.003, 0.918 at the chosen 3e-06). Choosing
on the reported folds makes that accuracy a little optimistic; `benchmarks/fit_l2.py --nested` measures by
how much. `--l2 VALUE` fixes the penalty instead.

The file (.npz) holds the weights, labels, temperature, the model it was fitted on (refused with another
one), the report and short digests of the training texts (so `eval` never scores a ticket the head was
fitted on); its fingerprint is part of the model version. Use it with INFERENCE_CATEGORY_HEAD=PATH.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from inference.category_fit import (
    DEFAULT_RECIPE,
    L2_CANDIDATES,
    Recipe,
    TrainingData,
    choose_l2,
    fit,
    report,
    softmax,
    text_digest,
)
from inference.errors import ConfigError
from inference.label_map import describe as describe_labels_read
from inference.label_map import parse as parse_label_map
from inference.label_map import relabel, shown_label
from inference.labelled_files import Columns, as_text, looks_per_ticket, missing_field, records

log = logging.getLogger("inference")
DEFAULT_OUT = Path("models") / "category_head.npz"
MAX_LABEL_CHARS = 64  # ticket_results.category is VARCHAR(64)
EMBED_CHUNK = 2048


@dataclass(frozen=True)
class Row:
    subject: str | None
    body: str | None
    label: str


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fit-categories",
        help="fit the category head on your labelled tickets (JSON Lines, CSV or a table); report held-out accuracy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--from",
        dest="from_file",
        type=Path,
        help="file of labelled tickets: JSON Lines or one JSON array of objects, or CSV/TSV with a header",
    )
    src.add_argument("--from-table", help="table of the tickets database (--db / TICKETS_DB_URL) with a label column")
    p.add_argument("--label-column", default="label", help="the label's key or column (default: label)")
    p.add_argument("--schema", help="schema of --from-table (default: TICKETS_SOURCE_SCHEMA or the search path)")
    p.add_argument(
        "--subject-column",
        help="subject column (or key) of --from-table (default: TICKETS_COL_SUBJECT) or --from (default: subject); "
        "none: no subject",
    )
    p.add_argument(
        "--body-column",
        help="body column (or key) of --from-table (default: TICKETS_COL_BODY) or --from (default: body)",
    )
    p.add_argument("--limit", type=int, help="read at most this many labelled rows")
    p.add_argument(
        "--label-map",
        help="merge, rename or leave out labels before fitting: 'Billing EU=billing,Billing US=billing,Spam=-' "
        "(-: leave out; *: every label not named) or a JSON file of {label: new label or null}",
    )
    p.add_argument(
        "--out", type=Path, help=f"where to write the head (default: INFERENCE_CATEGORY_HEAD or {DEFAULT_OUT})"
    )
    p.add_argument("--folds", type=int, default=DEFAULT_RECIPE.folds, help="cross-validation folds (default 5)")
    p.add_argument("--min-per-label", type=int, default=5, help="labels with fewer tickets are dropped (default 5)")
    p.add_argument(
        "--descriptions",
        choices=("auto", "none"),
        default="auto",
        help="auto: labels that are taxonomy labels also learn from its descriptions (default); none",
    )
    p.add_argument(
        "--l2",
        type=_l2,
        default=None,
        help="the L2 penalty: auto (default) chooses it by the same cross-validation among "
        + ", ".join(f"{c:g}" for c in L2_CANDIDATES)
        + " (lowest out-of-fold log-loss); a number fixes it",
    )
    p.add_argument("--json", action="store_true", help="machine-readable report")


def _l2(text: str) -> float | None:
    if text.strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'auto' or a number") from None
    if not (value >= 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r}: the penalty must be a finite number >= 0")
    return value


def main(settings, args) -> int:
    if args.folds < 2:
        raise ConfigError("--folds must be at least 2")
    if args.from_file is not None:
        columns = Columns.from_flags(args.label_column, args.body_column or "body", args.subject_column)
        rows = list(read_file(args.from_file, columns, args.limit))
        source = {"file": str(args.from_file), "sha256": hashlib.sha256(args.from_file.read_bytes()).hexdigest()}
    else:
        rows = list(read_table(settings, args))
        source = {"table": args.from_table, "label_column": args.label_column}
    reading = None
    if args.label_map:
        reading = relabel([r.label for r in rows], label_map(args.label_map))
        rows = [replace(r, label=reading.to[r.label]) for r in rows if reading.to[r.label] is not None]
        source["label_map"] = reading.notes()
    from inference.engine.encoder import Encoder

    encoder = Encoder.from_settings(settings)
    out = Path(args.out or settings.category_head or DEFAULT_OUT)
    result = fit_rows(
        settings,
        encoder,
        rows,
        recipe=Recipe(folds=args.folds) if args.l2 is None else Recipe(folds=args.folds, l2=args.l2),
        choose=args.l2 is None,
        min_per_label=args.min_per_label,
        descriptions=args.descriptions == "auto",
        source=source,
    )
    if reading is not None:
        result.summary["labels_read"] = source["label_map"]
    result.head.save(out)
    result.summary["written"] = str(out.resolve())
    print(json.dumps(result.summary, sort_keys=True) if args.json else render(result.summary))
    return 0


def label_map(spec: str) -> dict[str, str | None]:
    """--label-map parsed (inference.label_map), its new labels held to what the category column stores."""
    mapping = parse_label_map(spec)
    long = sorted({v for v in mapping.values() if v is not None and len(v) > MAX_LABEL_CHARS})
    if long:
        raise ConfigError(
            f"--label-map: new labels longer than {MAX_LABEL_CHARS} characters (the category column): {', '.join(long)}"
        )
    return mapping


def read_file(path: Path, columns: Columns, limit: int | None = None) -> Iterable[Row]:
    """Labelled rows of a JSON Lines or CSV/TSV file (inference.labelled_files); rows without a label are
    passed over."""
    label_key, body_key, subject_key = columns.resolve(path)
    n = 0
    first = None  # the first record: a file none of whose records has the field is refused, naming its fields
    has_label = has_body = False
    for _lineno, item in records(path, "--from"):
        first = item if first is None else first
        has_label = has_label or label_key in item
        label = _label(item.get(label_key))
        if label is None:
            continue
        has_body = has_body or body_key in item or bool(subject_key and item.get(subject_key))
        yield Row(as_text(item.get(subject_key)) if subject_key else None, as_text(item.get(body_key)), label)
        n += 1
        if limit and n >= limit:
            return
    if first is not None and (not has_label or (n and not has_body)):
        key, what = (label_key, "label") if not has_label else (body_key, "body")
        raise ConfigError(f"{path}: {missing_field(first, key, what, every=True)}")


def read_table(settings, args) -> Iterable[Row]:
    """Labelled rows of --from-table. Its names are any a table may have (spaces, dashes, quotes, any script:
    `source_name_problem`); each is quoted where it goes into SQL, so a name that looks like SQL is only a
    name, and a table or column the database does not have is refused by name before anything is read."""
    import sqlalchemy as sa

    from inference.config import shown_name, source_name_problem, subject_column
    from inference.store.db import make_engine

    body_name = args.body_column or settings.source.body
    subject_name = subject_column(args.subject_column or settings.source.subject, body_name)
    names = {"--from-table": args.from_table, "--label-column": args.label_column, "--body-column": body_name}
    if subject_name is not None:
        names["--subject-column"] = subject_name
    schema = args.schema or settings.source.schema
    if schema is not None:
        names["--schema"] = schema
    for flag, value in names.items():
        problem = source_name_problem(value)
        if problem is not None:
            raise ConfigError(f"{flag} {value!r} {problem}: give the name exactly as the table has it")
    label, body = sa.column(args.label_column), sa.column(body_name)
    columns = [label, body]
    if subject_name is not None:
        subject = sa.column(subject_name)
        columns.append(subject)
    else:
        subject = sa.cast(sa.null(), sa.Text)
    table = sa.table(args.from_table, *columns, schema=schema)
    query = sa.select(subject, body, label).select_from(table).where(label.is_not(None))
    if args.limit:
        query = query.limit(args.limit)
    engine = make_engine(settings.db_url)
    where = f"{shown_name(schema)}.{shown_name(args.from_table)}" if schema else shown_name(args.from_table)
    try:
        try:
            found = {c["name"] for c in sa.inspect(engine).get_columns(args.from_table, schema=schema)}
        except sa.exc.NoSuchTableError:
            raise ConfigError(f"--from-table: table {where} does not exist (check --schema)") from None
        for flag, value in names.items():
            if flag.endswith("-column") and value not in found:
                raise ConfigError(f"{flag}: table {where} has no column {shown_name(value)}")
        with engine.connect() as conn:
            for s, b, value in conn.execution_options(yield_per=2000).execute(query):
                name = _label(value)
                if name is not None:
                    yield Row(as_text(s), as_text(b), name)
    finally:
        engine.dispose()


def _label(value) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    if not text:
        return None
    if len(text) > MAX_LABEL_CHARS:
        raise ConfigError(  # not shown: a label this long may be ticket text (the wrong --label-column)
            f"a label of {len(text)} characters is longer than {MAX_LABEL_CHARS} (the category column): "
            "is --label-column the column of labels?"
        )
    return text


@dataclass
class FitResult:
    head: object  # LinearHead
    summary: dict


@dataclass
class Prepared:
    """`rows` as `fit_rows` fits them: unit embeddings, labels, descriptions, and what was merged or dropped."""

    data: TrainingData
    tickets: int
    empty: int
    distinct: int
    dropped: dict[str, int]
    descriptions: int
    glossed: int


def prepare(settings, encoder, rows: Sequence[Row], min_per_label: int = 5, descriptions: bool = True) -> Prepared:
    """Read the tickets as the pipeline reads them, merge exact duplicate texts (majority label), drop labels
    with fewer than `min_per_label` distinct tickets, add the taxonomy's descriptions of taxonomy labels, embed."""
    from inference.heads.category import embed, texts_as_read
    from inference.mailtext import ticket_text
    from inference.taxonomy import load_taxonomy
    from inference.textprep import max_chars_for

    max_chars = max_chars_for(encoder.max_length)
    by_text: dict[str, Counter] = defaultdict(Counter)
    empty = 0
    for r in rows:
        text, _ = ticket_text(r.subject, r.body, max_chars)
        if text is None:
            empty += 1
            continue
        by_text[text][r.label] += 1
    texts = list(by_text)
    labels_of = [by_text[t].most_common(1)[0][0] for t in texts]
    counts = Counter(labels_of)
    dropped = {label: n for label, n in counts.items() if n < min_per_label}
    labels = sorted(label for label in counts if label not in dropped)
    if len(labels) < 2:
        raise ConfigError(
            f"need at least two labels with {min_per_label} or more distinct tickets each; found "
            + (
                f"{len(counts)} distinct labels among {sum(counts.values())} tickets (not shown: is --label-column "
                "the column of labels?)"
                if looks_per_ticket(labels_of)
                else ", ".join(f"{shown_label(k)}: {v}" for k, v in counts.most_common(10)) or "no labelled tickets"
            )
        )
    keep = [k for k, label in enumerate(labels_of) if label not in dropped]
    texts = [texts[k] for k in keep]
    y = np.array([labels.index(labels_of[k]) for k in keep], dtype=int)
    taxonomy = load_taxonomy(settings) if descriptions else {}
    desc = [(labels.index(label), t) for label in labels if label in taxonomy for t in taxonomy[label]]

    log.info("fit-categories: embedding %d tickets and %d descriptions", len(texts), len(desc))
    blocks, glossed = [], 0
    for i in range(0, len(texts), EMBED_CHUNK):
        read = texts_as_read(settings, encoder, texts[i : i + EMBED_CHUNK])
        glossed += sum(a != b for a, b in zip(read, texts[i : i + EMBED_CHUNK], strict=True))
        blocks.append(embed(encoder, read))
    X = np.vstack(blocks or [np.zeros((0, encoder.dim), np.float32)])
    D = embed(encoder, [t for _, t in desc])
    data = TrainingData(labels, X, y, D, np.array([k for k, _ in desc], dtype=int), [text_digest(t) for t in texts])
    return Prepared(data, len(rows), empty, len(by_text), dropped, len(desc), glossed)


def fit_rows(
    settings,
    encoder,
    rows: Sequence[Row],
    recipe: Recipe = DEFAULT_RECIPE,
    min_per_label: int = 5,
    descriptions: bool = True,
    source: dict | None = None,
    choose: bool = True,
) -> FitResult:
    """The head on `rows` with its held-out (k-fold) report. `encoder`: the configured model, or a stand-in.
    `choose`: the L2 penalty is chosen by that cross-validation (`choose_l2`), else `recipe.l2` is used."""
    from inference.heads.category import model_signature
    from inference.modelinfo import model_id

    prepared = prepare(settings, encoder, rows, min_per_label, descriptions)
    data = prepared.data
    signature = {**model_signature(settings, encoder), "model_id": model_id(settings.model_dir)}
    trials, scored = [], None
    if choose:

        def progress(trial: dict) -> None:
            log.info(
                "fit-categories: l2 %g: held-out accuracy %.3f, log-loss %.4f",
                trial["l2"],
                trial["accuracy"],
                trial["loss"],
            )

        recipe, trials, scored = choose_l2(data, recipe, progress=progress)
    head, oof = fit(data, recipe, {"model": signature, "source": source or {}}, scored=scored)
    held_out = report(data.labels, data.y, softmax(oof / head.temperature))
    summary = {
        "labels": data.labels,
        "tickets": prepared.tickets,
        "distinct_texts_used": int(len(data.y)),
        "duplicates_merged": int(prepared.tickets - prepared.empty - prepared.distinct),
        "empty_skipped": prepared.empty,
        "dropped_labels": dict(sorted(prepared.dropped.items())),
        "descriptions_used": prepared.descriptions,
        "anchored": bool(head.meta.get("anchor_weight")),
        "read_through_gloss": int(prepared.glossed),
        "held_out": {
            **held_out,
            "protocol": f"{recipe.folds}-fold cross-validation",
            "most_common_label_share": _most_common_share(data.y),
        },
        "l2": {"value": recipe.l2, "chosen": bool(choose), "tried": trials},
        "temperature": round(head.temperature, 4),
        "fingerprint": head.fingerprint()[:16],
        "fitted_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    head.meta["report"] = summary
    if not learnt(summary["held_out"]):
        log.warning(
            "fit-categories: held-out accuracy %.3f is not above the most common label's share %.3f",
            summary["held_out"]["accuracy"],
            summary["held_out"]["most_common_label_share"],
        )
    return FitResult(head, summary)


def learnt(held_out: dict) -> bool:
    """Whether the head does better than always answering the most common label: labels drawn apart from the
    text (or a column named by mistake) leave it at that floor, and its answers would all be guesses."""
    floor = held_out.get("most_common_label_share")
    return floor is None or held_out["accuracy"] > floor


def _most_common_share(y: np.ndarray) -> float:
    """What always answering the most common label would score: the floor a held-out accuracy is read against
    (a help desk's queues can be noisy: 0.35 held out is a gain over 0.29, not a failure)."""
    return round(float(np.bincount(y).max() / len(y)), 4) if len(y) else 0.0


def _l2_line(l2: dict | None) -> str:
    if not l2:
        return ""
    if not l2["chosen"]:
        return f"L2 penalty {l2['value']:g} (--l2)"
    tried = ", ".join(f"{t['l2']:g} ({t['accuracy']:.3f})" for t in sorted(l2["tried"], key=lambda t: -t["l2"]))
    return (
        f"L2 penalty {l2['value']:g}, chosen by the same cross-validation (lowest out-of-fold log-loss) among: {tried}"
    )


def render(summary: dict) -> str:
    h = summary["held_out"]
    lines = [
        f"fitted a category head on {summary['distinct_texts_used']} distinct tickets, {len(summary['labels'])} labels"
        f" ({summary['duplicates_merged']} duplicates merged, {summary['empty_skipped']} empty skipped,"
        f" {summary['descriptions_used']} taxonomy descriptions added"
        + (", anchored to their first ones" if summary.get("anchored") else "")
        + f"; {summary.get('read_through_gloss', 0)} read through an English gloss)",
        f"held-out accuracy ({h['protocol']}): {h['accuracy']:.3f}"
        + (
            f" (the most common label alone: {h['most_common_label_share']:.3f})"
            if h.get("most_common_label_share") is not None
            else ""
        )
        + "; expected calibration error"
        f" {h['expected_calibration_error']:.3f} (temperature {summary['temperature']} fitted on these out-of-fold scores)",
        _l2_line(summary.get("l2")),
        *describe_labels_read(summary.get("labels_read") or {}),
    ]
    lines = [line for line in lines if line]
    if not learnt(h):
        lines.append(
            "warning: the held-out accuracy is not above the most common label's share, so these labels do not follow"
            " the tickets' text (a column named by mistake, or labels set apart from what the customer wrote); this"
            " head's answers would be guesses"
        )
    if summary["dropped_labels"]:
        lines.append(
            "dropped (too few tickets): " + ", ".join(f"{k} ({v})" for k, v in summary["dropped_labels"].items())
        )
    width = max(len("label"), *(len(label) for label in h["per_label"]))
    lines += ["", f"{'label':<{width}}  n      held-out recall"]
    for label, m in h["per_label"].items():
        lines.append(f"{label:<{width}}  {m['n']:<5}  {m['recall']}")
    if "written" in summary:
        lines += ["", f"written to {summary['written']}", f"use it: INFERENCE_CATEGORY_HEAD={summary['written']}"]
    return "\n".join(lines)
