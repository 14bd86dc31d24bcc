"""HTML e-mail tickets (the input policy's HTML reading, inference.htmltext), raw e-mail messages (its MIME
reading, inference.mimetext) and exports with escaped line breaks (inference.textprep.escaped_breaks): how often
a ticket sent as an HTML reply, kept as the raw message, or exported with its line breaks escaped, gets the
category and the summary of its plain text.

    .venv/bin/python benchmarks/html_mail_quality.py [--set eval|dev|PATH.jsonl] [--limit N] [--mime|--escaped] [--as-markup]

Each ticket of the set becomes an HTML reply quoting another ticket of another label, in Gmail, Outlook and
Apple Mail markup in turn (inference/bench/html_mail.py); `--mime`: the raw message of that reply (headers,
quoted-printable text/plain, base64 text/html, some with a PDF attached, some HTML only); `--escaped`: a
plain-text reply with a sign-off whose line breaks are written as backslash-n. `--as-markup` reads the HTML, the
raw message or the escapes as they are written (the input policy before HTML, MIME or escape reading: the
"before" columns of BENCHMARKS.md). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import inference.textprep as textprep  # noqa: E402
from inference.bench.html_mail import escaped_mail_set, html_mail_set, mime_mail_set  # noqa: E402
from inference.config import Settings  # noqa: E402
from inference.examples import DEV_SET, EVAL_SET, load_examples  # noqa: E402
from inference.predictor import load_predictor  # noqa: E402
from inference.summary_eval import predict_all  # noqa: E402


def _markup(summary: str) -> bool:
    """Markup or mail encoding left in a summary: a tag, an entity, a MIME header, a quoted-printable escape or an
    escaped line break."""
    return any(m in summary for m in ("<", "&#", "Content-", "=20", "=E2", "\\n"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="eval", help="eval, dev or a labelled JSON Lines file (default eval)")
    parser.add_argument("--limit", type=int, default=0, help="first N tickets only (0: all)")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--mime", action="store_true", help="the replies as raw e-mail messages")
    form.add_argument("--escaped", action="store_true", help="plain-text replies with their line breaks escaped")
    parser.add_argument(
        "--as-markup", action="store_true", help="read HTML, the raw message or the escapes as written (before)"
    )
    args = parser.parse_args()
    path = {"eval": EVAL_SET, "dev": DEV_SET}.get(args.set, args.set)
    examples = load_examples(path)
    examples = examples[: args.limit] if args.limit else examples
    if args.as_markup:
        textprep.looks_like_html = lambda _text: False
        textprep.looks_like_mime = lambda _text: False
        textprep.escaped_breaks = lambda text: text
    predictor = load_predictor(Settings(device="cpu", heads=("category", "summary")))
    plain = predict_all(predictor, [(e.subject, e.body) for e in examples])
    build = mime_mail_set if args.mime else escaped_mail_set if args.escaped else html_mail_set
    marked = predict_all(predictor, build(examples))
    both = [k for k in plain if k in marked]
    form_name = "mime" if args.mime else "escaped" if args.escaped else "html"
    report = {
        "set": args.set,
        "tickets": len(examples),
        "form": form_name,
        "read_as": "markup" if args.as_markup else form_name,
        "same_category": round(sum(marked[k]["category"] == plain[k]["category"] for k in both) / len(both), 4),
        "same_summary": round(sum(marked[k]["summary"] == plain[k]["summary"] for k in both) / len(both), 4),
        "summaries_with_markup": sum(_markup(marked[k]["summary"]) for k in both),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
