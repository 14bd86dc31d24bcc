"""How the configured summary head does on a set of tickets (`python -m inference eval --summaries`,
benchmarks/summary_shares.py): summaries that open with filler or with a quoted reply, and whether the summary
alone gets the ticket's category."""

from __future__ import annotations

import numpy as np

from inference.errors import ConfigError


def summary_shares(predictor, tickets, tail_starts=None, chunk: int = 512) -> dict:
    """How the configured summary head does on `tickets` ((subject, body) pairs), through the predictor as
    the pipeline runs it:
    - `greeting_first`: summaries that open with a greeting, thanks or sign-off;
    - `only_filler`: summaries that are nothing but greetings / thanks / politeness;
    - `quoted_first`: summaries whose first sentence is found only in the quoted reply / forwarded
      message / signature / disclaimer (where `inference.mailtext` finds it, or at `tail_starts` when
      the caller knows where the tail begins);
    - `category_agreement`: the category of the summary alone (embedded on its own) equals the ticket's.
    """
    from inference.heads.category import CategoryHead
    from inference.mailtext import GREETING, SIGN_OFF_LINE, THANKS, is_filler, quoted_lines, split_tail, ticket_text
    from inference.textprep import max_chars_for, model_input, sentence_spans

    category = next((loaded for head, loaded in predictor.heads if isinstance(head, CategoryHead)), None)
    if category is None or "summary" not in predictor.head_names:
        raise ConfigError("summary shares need the category and summary heads (INFERENCE_HEADS)")
    outputs = predict_all(predictor, tickets, chunk)
    done = [k for k in map(str, range(len(tickets))) if k in outputs and outputs[k].get("summary")]
    summaries = [outputs[k]["summary"] for k in done]
    categories = [outputs[k]["category"] for k in done]
    max_chars = max_chars_for(predictor.encoder.max_length)
    vectors = predictor.encoder.encode(summaries).embeddings
    if category.reads_glosses:
        # a summary of a ticket read through a gloss is read the same way, in the ticket's language
        read = [ticket_text(*tickets[int(k)], max_chars)[0] or "" for k in done]  # what the heads read
        vectors = _glossed_summaries(predictor.encoder, read, summaries, vectors, category.glossary_dir)
    agree = [a == b for a, b in zip(category.classifier(vectors).labels, categories, strict=True)]
    greeting, filler, quoted = [], [], []
    for k, summary in zip(done, summaries, strict=True):
        s = summary.strip()
        greeting.append(bool(GREETING.match(s) or THANKS.match(s) or SIGN_OFF_LINE.match(s.split("\n")[0])))
        filler.append(all(is_filler(summary[a:b]) for a, b in sentence_spans(summary)))
        full = model_input(*tickets[int(k)], max_chars)[0] or ""
        a, b = sentence_spans(summary)[0]
        at = full.find(summary[a:b])
        tail = tail_starts[int(k)] if tail_starts is not None else split_tail(full)
        quotes = quoted_lines(full) if tail_starts is None else []
        quoted.append(at >= tail or any(qa <= at < qb for qa, qb in quotes))
    return {
        "tickets": len(tickets),
        "summaries": len(done),
        "greeting_first": _share(np.array(greeting)),
        "only_filler": _share(np.array(filler)),
        "quoted_first": _share(np.array(quoted)),
        "category_agreement": _share(np.array(agree)),
    }


def _glossed_summaries(
    encoder, texts: list[str], summaries: list[str], vectors: np.ndarray, glossary_dir: str | None
) -> np.ndarray:
    """The summaries of tickets read through a gloss, embedded from their gloss in the ticket's language."""
    from inference.gloss import gloss
    from inference.heads.category import gloss_languages, reembed

    _, books = gloss_languages(encoder, texts, glossary_dir)
    return reembed(encoder, vectors, {j: gloss(summaries[j], book=b) or summaries[j] for j, b in books.items()})


def predict_all(predictor, tickets, chunk: int = 512) -> dict[str, dict]:
    """The predictor's outputs for `tickets` ((subject, body) pairs), keyed "0", "1", ... by position, as the
    pipeline computes them (the input policy applied as the source applies it); tickets it skips are absent."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    if hasattr(predictor, "input_text"):  # the source applies the input policy as it reads (TicketInput)
        from inference.records import TicketInput
        from inference.textprep import content_hash

        source = {
            str(k): TicketInput(str(k), now, content_hash(s, b), *predictor.input_text(s, b))
            for k, (s, b) in enumerate(tickets)
        }
    else:
        from inference.records import SourceTicket

        source = {str(k): SourceTicket(str(k), s, b, now) for k, (s, b) in enumerate(tickets)}
    ids = list(source)
    outputs: dict[str, dict] = {}
    for i in range(0, len(ids), chunk):
        outcome = predictor.compute("predict-all", ids[i : i + chunk], source)
        outputs.update({r.ticket_id: r.outputs for r in outcome.staged})
    return outputs


def _share(mask: np.ndarray) -> float | None:
    return round(float(np.mean(mask)), 4) if len(mask) else None
