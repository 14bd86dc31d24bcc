"""The input policy documented in inference/textprep.py, one test per case."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.textprep import content_hash, escaped_breaks, estimate_tokens, max_chars_for, model_input

BIG = 10_000


# --- NULL, empty, whitespace-only: nothing to embed -------------------------------------------


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        (None, None),
        ("", ""),
        (None, ""),
        ("", None),
        ("   ", "\t\n  \r\n"),
        ("\u00a0\u2003", None),  # no-break and em spaces are whitespace too
        ("\x00", "\x00\x00"),  # only NUL bytes: nothing left once they are removed
        ("\x01\x02", "\x7f"),  # only control characters: spaces, then nothing
    ],
)
def test_nothing_to_embed_gives_none(subject, body):
    assert model_input(subject, body, BIG) == (None, False)


def test_one_side_empty_keeps_the_other():
    assert model_input(None, "  printer on fire ", BIG) == ("printer on fire", False)
    assert model_input("printer on fire", "   ", BIG) == ("printer on fire", False)


def test_subject_and_body_both_reach_the_model_subject_first():
    text, cut = model_input("Refund", "I was charged twice", BIG)
    assert not cut
    assert text.index("Refund") < text.index("I was charged twice")


# --- NUL bytes ---------------------------------------------------------------------------------


def test_nul_bytes_removed():
    text, _ = model_input("pass\x00word", "res\x00et\x00", BIG)
    assert "\x00" not in text
    assert "password" in text and "reset" in text


# --- lone surrogates ---------------------------------------------------------------------------


def test_lone_surrogates_become_replacement_character():
    # b"caf\xe9".decode("utf-8", "surrogateescape") == "caf\udce9": how SQLite's invalid UTF-8 arrives.
    raw = b"caf\xe9 broken".decode("utf-8", "surrogateescape")
    text, _ = model_input(raw, "x\ud800y", BIG)
    assert "caf\ufffd broken" in text
    assert "x\ufffdy" in text
    assert not re.search("[\ud800-\udfff]", text)
    text.encode("utf-8")  # strict: the model input is always valid UTF-8


# --- control characters ------------------------------------------------------------------------


@pytest.mark.parametrize("ch", ["\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\x80", "\x85", "\x9f"])
def test_control_characters_become_spaces(ch):
    text, _ = model_input(None, f"left{ch}right", BIG)
    assert text == "left right"


@pytest.mark.parametrize("ch", ["\t", "\n", "\r"])
def test_tab_newline_and_cr_kept(ch):
    text, _ = model_input(None, f"left{ch}right", BIG)
    assert text == f"left{ch}right"


# --- emoji, RTL and bidi text ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "Printer 🔥🖨️ again 👩‍💻🏳️‍🌈",  # emoji with variation selectors and ZWJ sequences
        "مرحبا، لا أستطيع تسجيل الدخول",  # Arabic
        "שלום, החשבון שלי נעול",  # Hebrew
        "order \u202eevil\u202c and \u2066isolate\u2069 \u200fRLM\u200e",  # bidi controls
        "日本語のテキスト and Ελληνικά",
        "e\u0301 combining accent",  # not normalised either
    ],
)
def test_emoji_rtl_and_bidi_text_unchanged(body):
    assert model_input(None, body, BIG) == (body, False)


# --- length cut --------------------------------------------------------------------------------


def test_cut_at_max_chars_is_flagged():
    text, cut = model_input(None, "a" * 101, 100)
    assert cut is True
    assert text == "a" * 100


def test_exactly_max_chars_is_not_cut():
    assert model_input(None, "a" * 100, 100) == ("a" * 100, False)


def test_cut_keeps_the_beginning():
    body = "start " + "x" * 500 + " end"
    text, cut = model_input("subject", body, 50)
    assert cut and len(text) == 50
    assert text.startswith("subject")
    assert "end" not in text


def test_max_chars_for_scales_with_sequence_length():
    assert max_chars_for(512) == 2 * max_chars_for(256)
    assert max_chars_for(256) > 4 * 256  # never cuts text the tokenizer would still keep at ~4 chars/token


ESCAPED = r"Dear Support,\n\nMy sync fails since the update.\n\nBest regards,\n[Your Name]"


def test_escaped_line_breaks_are_read_as_line_breaks():
    # a help-desk export that JSON-escaped its bodies into a CSV column: the mail structure comes back
    text, cut = model_input("Sync", ESCAPED, 1000)
    assert text == "Sync\nDear Support,\n\nMy sync fails since the update.\n\nBest regards,\n[Your Name]" and not cut
    assert escaped_breaks(ESCAPED.replace(r"\n", r"\r\n")) == escaped_breaks(ESCAPED)  # Windows line ends too
    assert (
        escaped_breaks(r"Hi,\nthe export fails.\nIt worked yesterday.")
        == "Hi,\nthe export fails.\nIt worked yesterday."
    )
    html = r"<div>Hi team,</div>\n<div>The export fails since Monday.</div>\n<div>Best regards,</div>\n<div>Ana</div>"
    assert (
        model_input(None, html, 1000)[0] == "Hi team,\nThe export fails since Monday.\nBest regards,\nAna"
    )  # escaped HTML


@pytest.mark.parametrize(
    "text",
    [
        r"Open C:\new\notes\nightly and run it",  # a Windows path: no blank line, no break after punctuation
        r"The log says: error\nretrying",  # one escaped break, after no punctuation
        r"printf('done.\n') prints a line",  # one, after punctuation: not enough
        "A real line break\nand then " + r"a quoted sequence: a\n\nb",  # real breaks: the text is as written
    ],
)
def test_text_that_only_mentions_backslash_n_is_left_as_written(text):
    assert escaped_breaks(text) == text
    assert model_input(None, text, 1000)[0] == text


@given(st.text(alphabet=st.sampled_from("ab .,\\n\r")))
def test_escaped_breaks_only_ever_turns_escapes_into_breaks(text):
    out = escaped_breaks(text)
    assert out == text or out == text.replace("\\r\\n", "\n").replace("\\n", "\n")
    assert escaped_breaks(out) == out  # once read, nothing is left to read


@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()), st.integers(1, 300))
def test_model_input_invariants(subject, body, max_chars):
    text, cut = model_input(subject, body, max_chars)
    if text is None:
        assert cut is False
        return
    assert text.strip() == text and text
    assert len(text) <= max_chars
    assert "\x00" not in text
    assert not re.search("[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", text)
    text.encode("utf-8")


# --- content hash ------------------------------------------------------------------------------


def test_content_hash_is_stable_hex_sha256():
    h = content_hash("Refund", "charged twice")
    assert re.fullmatch(r"[0-9a-f]{64}", h)
    assert content_hash("Refund", "charged twice") == h


def test_content_hash_sees_the_subject_body_split():
    assert content_hash("ab", "c") != content_hash("a", "bc")
    assert content_hash("abc", None) != content_hash(None, "abc")
    assert content_hash("abc", "") != content_hash("", "abc")


def test_content_hash_distinguishes_null_from_empty_and_the_word_null():
    hashes = {content_hash(None, None), content_hash("", ""), content_hash(None, ""), content_hash("null", "null")}
    assert len(hashes) == 4


def test_content_hash_is_byte_exact():
    # Edits that the model input would hide still change the hash.
    base = content_hash("Refund", "charged twice")
    for body in ["charged twice ", "charged\x00 twice", "charged\x07twice", "charged  twice", "Charged twice"]:
        assert content_hash("Refund", body) != base
    assert content_hash("e\u0301", None) != content_hash("\u00e9", None)  # no Unicode normalisation


def test_content_hash_handles_lone_surrogates():
    raw = b"caf\xe9".decode("utf-8", "surrogateescape")
    h = content_hash(raw, "x\ud800")
    assert re.fullmatch(r"[0-9a-f]{64}", h)
    assert h == content_hash(raw, "x\ud800")
    # Different invalid bytes, and the replacement character itself, stay distinguishable.
    assert h != content_hash(b"caf\xe8".decode("utf-8", "surrogateescape"), "x\ud800")
    assert h != content_hash("caf\ufffd", "x\ufffd")


@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_content_hash_never_raises(subject, body):
    assert re.fullmatch(r"[0-9a-f]{64}", content_hash(subject, body))


# --- token estimate ----------------------------------------------------------------------------


def test_estimate_tokens_capped_at_max_seq_length():
    assert estimate_tokens("s" * 100, "b" * 1_000_000, 256) == 256
    assert estimate_tokens(None, "b" * 1_000_000, 128) == 128


def test_estimate_tokens_roughly_four_chars_a_token():
    est = estimate_tokens(None, "x" * 400, 10_000)
    assert 90 <= est <= 110


def test_estimate_tokens_counts_subject_and_body():
    assert estimate_tokens("x" * 200, "x" * 200, 10_000) == estimate_tokens(None, "x" * 400, 10_000)


@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(8, 8192))
def test_estimate_tokens_positive_bounded_and_monotonic(n, extra, cap):
    small = estimate_tokens(None, "x" * n, cap)
    large = estimate_tokens(None, "x" * (n + extra), cap)
    assert 1 <= small <= large <= cap
    assert estimate_tokens(None, None, cap) >= 1


def _hash_as_defined(subject, body) -> str:
    """The definition stored hashes were made with (results of earlier releases must still match)."""
    import hashlib
    import json

    raw = json.dumps([subject, body], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def test_content_hash_keeps_its_definition_on_known_values():
    assert (
        content_hash("Refund", "charged twice") == "9c11b3b5d8caf26079e0e2fb4b5ff8b587a066b60e500d8fb68385be6685490c"
    )  # sha256 of '["Refund", "charged twice"]'
    for subject, body in [(None, None), ("", ""), ('q"uote\\', "tab\tnl\nnul\x00del\x7f"), ("\u2028é漢", "\ud800")]:
        assert content_hash(subject, body) == _hash_as_defined(subject, body)


@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_content_hash_equals_the_json_definition(subject, body):
    assert content_hash(subject, body) == _hash_as_defined(subject, body)


@given(st.text(min_size=1, max_size=40), st.one_of(st.none(), st.text(max_size=40)), st.integers(0, 3))
def test_long_texts_hashed_a_piece_at_a_time_keep_the_definition(unit, subject, shift):
    """Texts longer than HASH_PIECE are escaped and encoded piecewise; quotes, backslashes, control
    characters, surrogates and astral characters that straddle a piece boundary give the same bytes."""
    from inference.textprep import HASH_PIECE

    body = "x" * shift + unit * (HASH_PIECE // len(unit) + 2)
    assert len(body) > HASH_PIECE
    assert content_hash(subject, body) == _hash_as_defined(subject, body)
    assert content_hash(body, subject) == _hash_as_defined(body, subject)
