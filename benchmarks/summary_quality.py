"""Extractive summary research (issue 14): today's centroid method against a request-first method.

    .venv/bin/python -m inference --db sqlite:////tmp/demo.db seed --tickets 2000   # the demo data
    .venv/bin/python benchmarks/summary_quality.py --db /tmp/demo.db [--json /tmp/summary.json] [--show 5]

Measured per set, for both methods:
- `greeting_open`: the summary opens with a greeting, thanks or sign-off ("Hi,", "Thanks in advance", ...);
- `only_filler`: the summary is nothing but greetings / thanks / sign-offs / politeness;
- `from_quote`: the summary opens with a sentence from a quoted reply, a forwarded message, a signature or
  a disclaimer (as found by `split_tail` / `quoted_lines` below);
- `agree`: the category predicted from the summary alone (embedded on its own) equals the one predicted
  from the whole ticket, with the recommended head (benchmarks/tune_categories.py DEFAULT_RECIPE) and,
  for comparison, today's head (example prototypes).

Sets: the demo tickets (read from the seeded SQLite file, else regenerated), the project's eval and dev
sets, ../shared/eval/real_bitext.jsonl, BANKING77 (when present in /tmp), and `eval+thread`: every eval
ticket with a signature, a disclaimer and a quoted earlier message from a ticket of another category
appended in one of the common mail-client formats (a stress test for "never from quoted replies").

Sentence vectors come from the same encoder pass as the ticket embedding (span pooling), exactly as the
pipeline computes them; the improved method needs nothing else (no second model call).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune_categories as tc  # noqa: E402
from ticket_sets import CACHE, LABELS, CachedEncoder, TicketSet, load_sets, load_taxonomy  # noqa: E402

from inference.textprep import max_chars_for, model_input, sentence_spans, token_ranges  # noqa: E402


# --------------------------------------------------------------------------------------------------
# Today's method (copied from inference/heads/summary.py)
# --------------------------------------------------------------------------------------------------
def extractive_choice(text, sentences, sentence_vectors, item_vector, max_sentences=2, max_chars=600):
    """Today's method, as the character ranges it picks."""
    if not sentences:
        return []
    closeness = sentence_vectors @ item_vector
    order = [int(i) for i in np.argsort(-closeness, kind="stable")]
    short = [i for i in order if sentences[i][1] - sentences[i][0] <= max_chars] or order
    k = 1 if len(sentences) <= 2 else max_sentences
    return [sentences[i] for i in sorted(short[:k])]


def extractive_summary(text, sentences, sentence_vectors, item_vector, max_sentences=2, max_chars=600):
    ranges = extractive_choice(text, sentences, sentence_vectors, item_vector, max_sentences, max_chars)
    return " ".join(text[a:b] for a, b in ranges) if ranges else None


# --------------------------------------------------------------------------------------------------
# The improved method: plain functions, ready to move into the summary head
# --------------------------------------------------------------------------------------------------
# Where the customer's own text ends: a quoted / forwarded message, a signature, a disclaimer.
_TAIL_MARKERS = [
    re.compile(r"^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}", re.I),
    re.compile(r"^\s*_{5,}\s*$"),  # Outlook's separator line
    re.compile(r"^\s*on\b.{0,200}\bwrote:\s*$", re.I),  # On Mon, 3 Nov 2026, Support <..> wrote:
    re.compile(r"^\s*(le|am|el|op|il)\b.{0,200}\b(a écrit|schrieb|escribió|schreef|ha scritto)\s*:\s*$", re.I),
    re.compile(r"^\s*--\s*$"),  # the standard signature separator "-- "
    re.compile(r"^\s*(sent from my|get outlook for)\b", re.I),
    re.compile(
        r"^\s*(confidentiality notice|disclaimer|this (e-?mail|message)( and any attachments)?"
        r" (is|are|may (be|contain)|contains?) (confidential|privileged|intended))",
        re.I,
    ),
]
_FROM_HEADER = re.compile(r"^\s*(from|von|de|van|da)\s*:\s*\S", re.I)
_SENT_HEADER = re.compile(r"^\s*(sent|date|gesendet|envoyé|enviado|datum|to|subject)\s*:", re.I)
_SIGN_OFF_LINE = re.compile(
    r"^\s*((best|kind|warm|many)\s+)?(regards|wishes|thanks|thank you)\b[^.!?]{0,20}[,!.]?\s*$"
    r"|^\s*(cheers|sincerely|yours( truly| sincerely)?|best|thx|ta|regards|mit freundlichen grüßen|cordialement"
    r"|saludos|atentamente|groeten|met vriendelijke groet)\s*[,!.]?\s*$",
    re.I,
)
_QUOTED = re.compile(r"^\s*>")


def split_tail(text: str) -> int:
    """The character offset where the customer's own message ends: the first quoted-reply header,
    forwarded/original-message separator, Outlook From:/Sent: block, signature separator, "Sent from
    my ...", disclaimer, or a sign-off line ("Best regards,", "Thanks,") that is not the first line.
    len(text) when there is none."""
    offset, lines = 0, text.splitlines(keepends=True)
    for k, line in enumerate(lines):
        stripped = line.strip()
        if any(m.match(line) for m in _TAIL_MARKERS):
            return offset
        if _FROM_HEADER.match(line) and any(_SENT_HEADER.match(x) for x in lines[k + 1 : k + 4]):
            return offset
        if k > 0 and stripped and _SIGN_OFF_LINE.match(stripped):
            return offset
        offset += len(line)
    return len(text)


def quoted_lines(text: str) -> list[tuple[int, int]]:
    """Character ranges of lines quoted with ">" (anywhere in the text)."""
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        if _QUOTED.match(line):
            out.append((offset, offset + len(line)))
        offset += len(line)
    return out


_GREETING = re.compile(
    r"^\s*(hi|hello|hey|dear|hiya|greetings|good (morning|afternoon|evening|day)|hallo|hola|bonjour|ciao|olá|hej)"
    r"\b[^,.!?:\n]{0,40}[,.!:]\s*",
    re.I,
)
_THANKS = re.compile(r"^\s*(many |thanks? |thank you )*(thanks|thank you|thx|cheers|much appreciated)\b", re.I)
_FILLER_WORDS = tc.EN_FUNCTION_WORDS | set(
    """please pls plz thanks thank thx help helping assist assistance support team guys folks advance appreciate
    appreciated urgent urgently asap possible soon quickly quick fast look looking into check advise regards
    kind best warm sincerely cheers hear forward reply response respond update updates know let get back
    anything everything issue problem matter question questions quite really very much ok okay again hope
    hoping well day morning afternoon evening dear hi hello hey greetings sir madam fix sort resolve asap""".split()
)
_LOGLIKE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\b(INFO|WARN|ERROR|DEBUG)\b|\w+=\S+|0x[0-9a-f]{4,}")


def strip_greeting(text: str, start: int, end: int) -> int:
    """New start of a sentence without a leading greeting ("Hi, ", "Hello team, "), when something is left."""
    m = _GREETING.match(text[start:end])
    if m and text[start + m.end() : end].strip():
        return start + m.end()
    return start


def is_filler(sentence: str) -> bool:
    """Greetings, thanks, sign-offs and politeness that say nothing about the request."""
    s = sentence.strip()
    m = _GREETING.match(s)
    if m:
        s = s[m.end() :]
    if not s or _THANKS.match(s) or _SIGN_OFF_LINE.match(s):
        return True
    words = [w.lower() for w in tc._WORD.findall(s)]
    return not words or all(w in _FILLER_WORDS for w in words)


def is_loglike(sentence: str) -> bool:
    return len(_LOGLIKE.findall(sentence)) >= 2


def candidate_sentences(text: str, sentences: Sequence[tuple[int, int]]) -> list[int]:
    """Indexes of sentences that are the customer's own words: before the quoted/signature tail, not
    in a ">" quoted line, not a greeting/thanks/sign-off, not a pasted log line."""
    end = split_tail(text)
    quoted = quoted_lines(text)
    out = []
    for i, (a, b) in enumerate(sentences):
        if a >= end or any(qa <= a < qb for qa, qb in quoted):
            continue
        piece = text[a:b]
        if is_filler(piece) or is_loglike(piece):
            continue
        out.append(i)
    return out


def request_summary(*args, **kwargs) -> str | None:
    """`request_choice` joined: verbatim text of the ticket."""
    text = args[0] if args else kwargs["text"]
    ranges = request_choice(*args, **kwargs)
    return " ".join(text[a:b] for a, b in ranges) if ranges else None


def request_choice(
    text: str,
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    label_scores: Callable[[np.ndarray], np.ndarray],
    max_chars: int = 600,
    short: int = 60,
) -> list[tuple[int, int]]:
    """The sentence that carries the request: among the customer's own non-filler sentences (see
    `candidate_sentences`), the one whose vector best predicts the ticket's category (log-probability
    of the label the head gives the whole ticket), plus a tie-break towards the non-filler centroid.
    A second sentence (the next best, in text order) is added when the first is shorter than `short`
    characters and there are more than two candidates. A leading greeting ("Hi, ") is cut off.
    Always verbatim text of the ticket. Falls back to today's centroid method when no sentence qualifies."""
    if not sentences:
        return []
    cands = candidate_sentences(text, sentences)
    cands = [i for i in cands if sentences[i][1] - sentences[i][0] <= max_chars] or cands
    if not cands:
        end = split_tail(text)
        own = [i for i, (a, _) in enumerate(sentences) if a < end] or list(range(len(sentences)))
        return extractive_choice(text, [sentences[i] for i in own], sentence_vectors[own], item_vector)
    vecs = sentence_vectors[cands]
    # the label of the customer's own words: the whole ticket's, unless it carries a quoted thread /
    # signature, then that of the own sentences' centroid
    centroid = tc.unit(vecs.mean(axis=0))
    has_tail = split_tail(text) < len(text.rstrip()) or bool(quoted_lines(text))
    label = int(np.argmax(label_scores((centroid if has_tail else item_vector)[None, :])[0]))
    logp = tc.log_softmax(label_scores(vecs))[:, label]
    score = logp + 0.5 * (vecs @ centroid)
    order = [cands[int(j)] for j in np.argsort(-score, kind="stable")]
    chosen = order[:1]
    a, b = sentences[chosen[0]]
    if b - a < short and len(order) > 2:
        chosen.append(order[1])
    return [(strip_greeting(text, *sentences[i]), sentences[i][1]) for i in sorted(chosen)]


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------
def sentence_vectors(enc: CachedEncoder, texts: list[str], tag: str):
    """Per text: (sentence character spans, span vectors [n, d]) and the ticket embeddings, from one pass."""
    key = enc.key(texts, tag="spans" + tag)
    path = CACHE / f"spans-{key}.npz"
    if path.is_file():
        with np.load(path, allow_pickle=False) as z:
            emb, flat, counts, chars = z["emb"], z["flat"], z["counts"], z["chars"]
    else:
        e = enc.encoder
        ids, truncated, offsets = e.tokenize_with_offsets(texts)
        all_chars, token_spans = [], []
        for text, offs in zip(texts, offsets, strict=True):
            chars = sentence_spans(text)
            pairs = [(c, t) for c, t in zip(chars, token_ranges(chars, offs), strict=True) if t is not None]
            all_chars.append([c for c, _ in pairs])
            token_spans.append([t for _, t in pairs])
        out = e.encode_ids(ids, truncated, token_spans)
        if out.errors:
            raise RuntimeError("encoding failed")
        emb = out.embeddings
        counts = np.array([len(c) for c in all_chars])
        flat = np.concatenate([out.spans[k] for k in range(len(texts))]) if counts.sum() else np.zeros((0, e.dim))
        chars = np.array([c for cs in all_chars for c in cs]).reshape(-1, 2)
        np.savez(path, emb=emb, flat=flat, counts=counts, chars=chars)
    starts = np.concatenate([[0], np.cumsum(counts)])
    spans = [[tuple(map(int, c)) for c in chars[starts[k] : starts[k + 1]]] for k in range(len(texts))]
    vecs = [flat[starts[k] : starts[k + 1]] for k in range(len(texts))]
    return emb, spans, vecs


def opens_in_tail(text: str, ranges: list[tuple[int, int]], tail_start: int | None = None) -> tuple[bool, bool]:
    """(the summary's first sentence lies in the quoted reply / forwarded message / signature /
    disclaimer, ... and its text is found only there). The tail starts at `tail_start` when known
    (the synthetic threads), else where `split_tail` / `quoted_lines` find it."""
    if not ranges:
        return False, False
    a, b = ranges[0]
    end = split_tail(text) if tail_start is None else tail_start
    quoted = quoted_lines(text) if tail_start is None else []
    in_tail = a >= end or any(qa <= a < qb for qa, qb in quoted)
    if not in_tail:
        return False, False
    own = text[:end]
    for qa, qb in reversed([q for q in quoted if q[0] < end]):
        own = own[:qa] + own[qb:]
    return True, text[a:b].strip() not in own


def opens_with_filler(summary: str) -> bool:
    s = summary.strip()
    return bool(_GREETING.match(s) or _THANKS.match(s) or _SIGN_OFF_LINE.match(s.split("\n")[0]))


def only_filler(summary: str) -> bool:
    pieces = [summary[a:b] for a, b in sentence_spans(summary)]
    return all(is_filler(p) for p in pieces)


def thread_set(base: TicketSet, seed: int = 14) -> TicketSet:
    """Eval tickets as real mail clients send them: signature, disclaimer, quoted earlier message
    (another ticket's body, of another category) in one of several formats."""
    rng = random.Random(seed)
    names = ["Jane Doe", "Marco Rossi", "Aiko Tanaka", "Sam Patel", "Lena Vogel"]
    signatures = [
        "\n\nBest regards,\n{name}\nOperations Manager | Example Ltd\n+44 20 7946 0000",
        "\n\nThanks,\n{name}",
        "\n\n-- \n{name}\nSent from my iPhone",
        "\n\nKind regards\n{name}\nwww.example.com",
        "\n\nCheers,\n{name}\n\nCONFIDENTIALITY NOTICE: This e-mail and any attachments are confidential and intended"
        " solely for the addressee. If you received it in error, please delete it and notify the sender.",
    ]
    quotes = [
        "\n\nOn Mon, 3 Nov 2026 at 10:02, Support <support@example.com> wrote:\n{quoted}",
        "\n\n-----Original Message-----\nFrom: Support Team <support@example.com>\nSent: Monday, November 3, 2026 10:02 AM"
        "\nTo: {name}\nSubject: Re: your request\n\n{plain}",
        "\n\n________________________________\nFrom: Help Desk <help@example.com>\nSent: 03 November 2026 10:02\n"
        "To: {name}\n\n{plain}",
        "\n\n---------- Forwarded message ---------\nFrom: {name} <someone@example.com>\nDate: Mon, Nov 3, 2026\n\n{plain}",
    ]
    bodies = []
    for k in range(len(base)):
        other = rng.choice([j for j in range(len(base)) if base.labels[j] != base.labels[k]])
        plain = base.bodies[other].strip() or base.subjects[other]
        quoted = "\n".join("> " + line for line in plain.splitlines())
        name = rng.choice(names)
        bodies.append(
            base.bodies[k].rstrip()
            + rng.choice(signatures).format(name=name)
            + rng.choice(quotes).format(quoted=quoted, plain=plain, name=name)
        )
    out = TicketSet(
        "eval+thread",
        list(base.ids),
        list(base.subjects),
        bodies,
        base.labels,
        list(base.langs),
        "eval + synthetic mail tails",
    )
    out.tail_start = [
        len(model_input(su, bo.rstrip(), max_chars_for(256))[0])
        for su, bo in zip(base.subjects, base.bodies, strict=True)
    ]
    out.own_texts = list(base.texts)
    return out


def demo_from_db(path: str) -> TicketSet | None:
    if not Path(path).is_file():
        return None
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT ticket_id, subject, body FROM tickets ORDER BY ticket_id").fetchall()
    keep = [(str(i), s or "", b or "") for i, s, b in rows if model_input(s, b, max_chars_for(256))[0]]
    return TicketSet(
        "demo",
        [r[0] for r in keep],
        [r[1] for r in keep],
        [r[2] for r in keep],
        np.zeros(len(keep), int),
        ["?"] * len(keep),
        f"sqlite {path}",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="/tmp/demo.db", help="the seeded demo SQLite file (default /tmp/demo.db)")
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--show", type=int, default=0, help="print N example summaries per set")
    args = parser.parse_args()

    enc = CachedEncoder()
    sets = load_sets()
    taxonomy = load_taxonomy()
    desc_texts = [t for label in LABELS for t in taxonomy[label]]
    dy = np.array([LABELS.index(label) for label in LABELS for _ in taxonomy[label]])
    D = enc.embed(desc_texts, tag="descriptions")
    D1 = np.stack([D[np.flatnonzero(dy == c)[0]] for c in range(len(LABELS))])
    pool = tc.Pool(
        np.vstack([enc.embed(sets["fewshot"].texts), enc.embed(sets["dev"].texts)]),
        np.concatenate([sets["fewshot"].labels, sets["dev"].labels]),
        D,
        dy,
        D1,
    )
    heads = {
        "recommended": tc.RECIPES[tc.DEFAULT_RECIPE](pool),
        "today": tc.RECIPES["current head (examples only, w=0)"](pool),
    }

    demo = demo_from_db(args.db) or sets["demo"]
    targets = {"demo": demo}
    for name in ("eval", "dev", "bitext", "banking77"):
        if name in sets:
            targets[name] = sets[name]
    targets["eval+thread"] = thread_set(sets["eval"])

    report = {}
    for name, s in targets.items():
        emb, spans, vecs = sentence_vectors(enc, s.texts, tag=name)
        tails = getattr(s, "tail_start", [None] * len(s))
        choices = {
            "today": [extractive_choice(t, sp, v, e) for t, sp, v, e in zip(s.texts, spans, vecs, emb, strict=True)],
            "request": [
                request_choice(t, sp, v, e, heads["recommended"])
                for t, sp, v, e in zip(s.texts, spans, vecs, emb, strict=True)
            ],
        }
        # the reference category: of the whole ticket, or for the threads of the ticket without its tail
        ref_emb = enc.embed(s.own_texts) if hasattr(s, "own_texts") else emb
        report[name] = {"n": len(s)}
        if hasattr(s, "own_texts"):
            own_cut = [t[: split_tail(t)] for t in s.texts]
            for hname, head in heads.items():
                report[name][f"category_accuracy_{hname}_head"] = {
                    "ticket_alone": round(float(np.mean(head(ref_emb).argmax(1) == s.labels)), 4),
                    "with_thread": round(float(np.mean(head(emb).argmax(1) == s.labels)), 4),
                    "thread_cut_by_split_tail": round(
                        float(np.mean(head(enc.embed(own_cut)).argmax(1) == s.labels)), 4
                    ),
                }
        for mname, ranges in choices.items():
            summaries = [" ".join(t[a:b] for a, b in r) for t, r in zip(s.texts, ranges, strict=True)]
            semb = enc.embed(summaries, tag=f"summary-{mname}")
            tail = [opens_in_tail(t, r, ts) for t, r, ts in zip(s.texts, ranges, tails, strict=True)]
            row = {
                "greeting_open": float(np.mean([opens_with_filler(x) for x in summaries])),
                "only_filler": float(np.mean([only_filler(x) for x in summaries])),
                "from_quote": float(np.mean([x[0] for x in tail])),
                "only_in_quote": float(np.mean([x[1] for x in tail])),
                "mean_chars": float(np.mean([len(x) for x in summaries])),
            }
            for hname, head in heads.items():
                row[f"agree_{hname}_head"] = float(np.mean(head(semb).argmax(1) == head(ref_emb).argmax(1)))
            report[name][mname] = {k: round(v, 4) for k, v in row.items()}
            if args.show:
                for k in random.Random(0).sample(range(len(s)), min(args.show, len(s))):
                    print(f"[{name} {mname} {s.ids[k]}] {summaries[k][:200]!r}")
        print(_line(name, report[name]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def _line(name: str, r: dict) -> str:
    def cell(m):
        return (
            f"greet {m['greeting_open']:.3f} filler {m['only_filler']:.3f} quote {m['from_quote']:.3f}"
            f"/{m['only_in_quote']:.3f} "
            f"agree(rec) {m['agree_recommended_head']:.3f} agree(today) {m['agree_today_head']:.3f}"
        )

    return f"{name:<12} n={r['n']:<5} TODAY {cell(r['today'])}\n{'':<20} REQUEST {cell(r['request'])}"


if __name__ == "__main__":
    sys.exit(main())
