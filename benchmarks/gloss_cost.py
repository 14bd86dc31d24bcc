"""What glossing unreadable tickets costs the category head (README, "Categories"; BENCHMARKS.md).

Tickets: the 72 hand-written examples in six languages (benchmarks/data/fewshot_six_languages.jsonl), each
repeated with a different ticket number so no cache can help, N in all. Measures, in this process:

- `flag`: the readability check the head already runs on every ticket (tokenizer + word counts);
- `gloss`: the glossaries' lookup (language, phrases, words, compounds) for the flagged tickets;
- `encode`: embedding the glosses (the second encoder pass the head makes for them, CPU float32);
- the glossaries' load time and the resident memory they add (read before the model loads).

    python benchmarks/gloss_cost.py [--tickets 2000]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tickets", type=int, default=2000)
    args = ap.parse_args()

    from inference.procmem import peak_rss_mib

    rss0 = peak_rss_mib()  # before the model: the glossaries' own memory is the high-water mark's rise
    t0 = time.perf_counter()
    from inference.gloss import glossaries, glossed

    books = glossaries()
    load_s = time.perf_counter() - t0
    rss1 = peak_rss_mib()

    from inference.config import Settings
    from inference.engine.encoder import Encoder
    from inference.examples import load_examples
    from inference.heads.category import ticket_text_of, token_strings

    settings = Settings(device="cpu")
    encoder = Encoder.from_settings(settings)
    examples = load_examples(ROOT / "benchmarks" / "data" / "fewshot_six_languages.jsonl")
    texts = [
        ticket_text_of(examples[k % len(examples)], encoder.max_length) + f" (#{100000 + k})"
        for k in range(args.tickets)
    ]

    from inference.readability import unreadable_flags

    t0 = time.perf_counter()
    flags = unreadable_flags(texts, token_strings(encoder, texts))
    flag_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    glosses = glossed(texts, flags, books)
    gloss_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = encoder.encode([glosses[k] for k in sorted(glosses)])
    encode_s = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "tickets": len(texts),
                "flagged": int(sum(flags)),
                "glossed": len(glosses),
                "encode_errors": len(out.errors),
                "glossary_entries": {b.lang: b.entries for b in books},
                "load_s": round(load_s, 3),
                "glossaries_rss_mib": round(rss1 - rss0, 1),
                "flag_ms_per_ticket": round(1000 * flag_s / len(texts), 3),
                "gloss_ms_per_ticket": round(1000 * gloss_s / max(len(glosses), 1), 3),
                "encode_ms_per_gloss": round(1000 * encode_s / max(len(glosses), 1), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
