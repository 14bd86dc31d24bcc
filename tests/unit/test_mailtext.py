"""What of a ticket is the customer's own request (inference/mailtext.py) and whether the encoder can read it
(inference/readability.py): the model input loses quoted replies, signatures and disclaimers; summary
candidates skip greetings, thanks and log lines; other languages are flagged."""

from __future__ import annotations

import pytest

from inference.mailtext import candidate_sentences, is_filler, own_message, split_tail, ticket_text
from inference.readability import readability, unreadable, unreadable_flags
from inference.textprep import sentence_spans

OWN = "Charged twice\nI was billed $369.92 twice this month. Please refund one of the payments."

TAILS = {
    "gmail quote": "\n\nOn Mon, 3 Nov 2026 at 10:02, Support <support@example.com> wrote:\n> We changed your plan.",
    "outlook original": "\n\n-----Original Message-----\nFrom: Support <s@example.com>\nSent: Monday\nSubject: Re: x\n\nOld text.",
    "outlook separator": "\n\n________________________________\nFrom: Help Desk <h@example.com>\nSent: 03 November\n\nOld.",
    "forwarded": "\n\n---------- Forwarded message ---------\nFrom: Jane <j@example.com>\nDate: Mon\n\nOld text.",
    "signature dashes": "\n\n-- \nJane Doe\nSent from my iPhone",
    "sent from": "\n\nSent from my iPhone",
    "sign-off": "\n\nBest regards,\nJane Doe\nOperations Manager | Example Ltd\n+44 20 7946 0000",
    "thanks line": "\n\nThanks,\nSam",
    "disclaimer": "\n\nCONFIDENTIALITY NOTICE: This e-mail and any attachments are confidential and intended solely.",
    "german quote": "\n\nAm 03.11.2026 um 10:02 schrieb Support <support@example.com>:\n> Alter Text.",
}


@pytest.mark.parametrize("tail", list(TAILS.values()), ids=list(TAILS))
def test_the_mail_tail_is_cut_off_the_model_input(tail):
    assert own_message(OWN + tail) == OWN
    assert split_tail(OWN + tail) >= len(OWN)
    text, cut = ticket_text("Charged twice", OWN.split("\n", 1)[1] + tail, 10_000)
    assert (text, cut) == (OWN, False)


def test_a_ticket_without_a_tail_is_unchanged_and_the_subject_line_is_never_a_sign_off():
    assert own_message(OWN) == OWN
    assert own_message("Thanks\nMy parcel never arrived.") == "Thanks\nMy parcel never arrived."


def test_a_ticket_that_is_only_a_forwarded_message_keeps_it():
    only = "---------- Forwarded message ---------\nFrom: Jane <j@example.com>\nDate: Mon\n\nMy card was charged twice."
    assert own_message(only) == only


def test_empty_input_stays_empty():
    assert ticket_text(None, "  ", 100) == (None, False)


@pytest.mark.parametrize(
    "sentence",
    ["Hi,", "Hello team!", "Thanks in advance for your help.", "Best regards,", "Please help asap!!", "Cheers"],
)
def test_filler_sentences(sentence):
    assert is_filler(sentence)


@pytest.mark.parametrize("sentence", ["My card was charged twice.", "Hi, my parcel never arrived.", "Refund please"])
def test_sentences_with_a_request_are_not_filler(sentence):
    assert not is_filler(sentence)


def test_candidates_skip_quoted_lines_log_lines_and_greetings():
    text = (
        "Hi there,\nThe export fails every night.\n> quoted: your invoice is attached.\n"
        "2026-11-03 10:02:11 ERROR job=export code=500\nThanks in advance!"
    )
    spans = sentence_spans(text)
    chosen = [text[a:b] for a, b in (spans[i] for i in candidate_sentences(text, spans))]
    assert chosen == ["The export fails every night."]


# --- readability --------------------------------------------------------------------------------------------
READABLE = [
    "I was charged twice for my subscription this month, please refund it.",
    "troubles entering another shipping address",
    "refund",
    "App crashes on login since update 4.2",
]
UNREADABLE = [
    "Hola, me han cobrado dos veces este mes y quiero que me devuelvan el dinero por favor.",
    "Bonjour, je n'arrive pas à me connecter à mon compte depuis hier, pouvez-vous m'aider ?",
    "Hallo, ich habe meine Bestellung noch nicht erhalten und die Sendungsverfolgung zeigt nichts.",
    "注文した商品がまだ届いていません。確認してください。",
    "لا أستطيع تسجيل الدخول إلى حسابي منذ أمس",
]


@pytest.mark.parametrize("text", READABLE)
def test_english_and_short_texts_are_readable(text):
    assert not unreadable(readability(text))


@pytest.mark.parametrize("text", UNREADABLE)
def test_other_languages_are_unreadable(text):
    assert unreadable(readability(text))


@pytest.mark.parametrize(
    "text, pieces, flagged",
    [
        # a glossary word the tokenizer cuts into pieces: another language, read through its gloss
        ("Passwort vergessen", ["[CLS]", "pass", "##wort", "verge", "##ssen", "[SEP]"], True),
        ("remboursement svp", ["[CLS]", "rem", "##bour", "##se", "##ment", "sv", "##p", "[SEP]"], True),
        ("app stürzt ab", ["[CLS]", "app", "st", "##ur", "##z", "##t", "ab", "[SEP]"], True),
        # English: the words a glossary knows are whole tokens, or there is an English function word
        ("cancelling pro account", ["[CLS]", "cancel", "##ling", "pro", "account", "[SEP]"], False),
        ("refund pls", ["[CLS]", "ref", "##und", "pl", "##s", "[SEP]"], False),
        ("where is parcel", ["[CLS]", "where", "is", "parcel", "[SEP]"], False),
        # without the tokenizer's pieces there is nothing to judge a short text by
        ("Passwort vergessen", [], False),
    ],
)
def test_short_texts_are_judged_word_by_word(text, pieces, flagged):
    r = readability(text, pieces)
    assert r.words < 4 and r.foreign_short is flagged and unreadable(r) is flagged


def test_word_pieces_flag_a_language_without_function_words():
    # no function words of any list, and the tokenizer cuts every word into pieces
    text = "Zamówienie zaginęło podczas transportu kurierskiego"
    pieces = [
        "[CLS]",
        "za",
        "##mow",
        "##ienie",
        "za",
        "##gin",
        "##elo",
        "pod",
        "##czas",
        "trans",
        "##port",
        "##u",
        "[SEP]",
    ]
    assert unreadable(readability(text, pieces))
    assert unreadable_flags([text, READABLE[0]], [pieces, []]) == [True, False]
