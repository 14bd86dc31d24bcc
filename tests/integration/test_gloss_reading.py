"""The category head reads tickets the English-only model cannot read through a word-by-word English gloss
(inference.gloss), with the real bundled model, through the predictor the pipeline runs: they get the right
category far more often, stay `uncertain`, and English tickets are untouched."""

from __future__ import annotations

import pytest

from inference.config import Settings
from inference.modelinfo import model_version
from inference.predictor import build_predictor
from inference.summary_eval import predict_all

# Invented for this test (not from any evaluation set): one request per language, with its label.
TICKETS = [
    (
        "Rechnung doppelt abgebucht",
        "Hallo, mir wurde die Rechnung für März zweimal abgebucht. Bitte erstatten Sie den Betrag.",
        "billing",
    ),
    ("", "Bonjour, je n'arrive plus à me connecter à mon compte, le mot de passe est refusé.", "account_access"),
    ("Pedido", "Hola, mi pedido todavía no ha llegado y el número de seguimiento no funciona.", "shipping"),
    ("", "Buongiorno, vorrei disdire il mio abbonamento alla fine del mese.", "cancellation"),
    ("App", "Hallo, de app crasht elke keer als ik een foto wil uploaden sinds de laatste update.", "technical_issue"),
    ("", "Olá, seria possível adicionar o modo escuro na aplicação? Seria muito útil.", "feature_request"),
    ("Uppsägning", "Hej, jag vill säga upp mitt abonnemang från nästa månad.", "cancellation"),
    ("", "Dzień dobry, nie mogę się zalogować do konta od wczoraj, hasło nie działa.", "account_access"),
]
ENGLISH = [
    ("Charged twice", "Hi, I was billed twice for my March invoice. Please refund one of the charges.", "billing"),
    ("", "The app crashes every time I try to upload a photo since the last update.", "technical_issue"),
]


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:
    return Settings(device="cpu", heads=("category",), cache_dir=str(tmp_path_factory.mktemp("cache")))


def _outputs(settings, model, tickets):
    predictor = build_predictor(settings, model.encoder, version=model_version(settings))
    got = predict_all(predictor, [(s, b) for s, b, _ in tickets])
    return [got[str(k)] for k in range(len(tickets))]


@pytest.mark.slow
def test_other_languages_are_read_through_a_gloss_and_stay_uncertain(model, settings):
    on = _outputs(settings, model, TICKETS)
    off = _outputs(settings.replace(gloss_unreadable=False), model, TICKETS)
    right_on = [o["category"] == label for o, (_, _, label) in zip(on, TICKETS, strict=True)]
    right_off = [o["category"] == label for o, (_, _, label) in zip(off, TICKETS, strict=True)]
    assert all(right_on), [(label, o["category"]) for o, (_, _, label) in zip(on, TICKETS, strict=True)]
    assert sum(right_off) < len(TICKETS)  # without the gloss the English-only model gets some of them wrong
    assert all(o["category_uncertain"] for o in on + off)  # read through a gloss, never answered confidently


@pytest.mark.slow
def test_english_tickets_are_untouched_and_glossing_is_part_of_the_model_version(model, settings):
    on = _outputs(settings, model, ENGLISH)
    off = _outputs(settings.replace(gloss_unreadable=False), model, ENGLISH)
    assert [o["category"] for o in on] == [label for _, _, label in ENGLISH]
    # the head differs (its training tickets in other languages are glossed too), the reading of English does not
    assert [o["category"] for o in on] == [o["category"] for o in off]
    assert model_version(settings) != model_version(settings.replace(gloss_unreadable=False))
    # without the flag there is nothing to gloss: the switch alone then changes nothing
    plain = settings.replace(flag_unreadable=False)
    assert model_version(plain) == model_version(plain.replace(gloss_unreadable=False))


@pytest.mark.slow
def test_fit_categories_reads_a_help_desk_s_own_tickets_in_other_languages_through_glosses(model, settings):
    # a help desk's history: each invented ticket above five times with a different order number, as queues
    from inference.fit_categories import Row, fit_rows

    rows = [
        Row(subject, f"{body} (#{4711 + n})", label) for subject, body, label in TICKETS + ENGLISH for n in range(5)
    ]
    fitted = fit_rows(settings, model.encoder, rows, min_per_label=5)
    assert fitted.summary["distinct_texts_used"] == len(rows)
    assert fitted.summary["read_through_gloss"] == 5 * len(TICKETS)  # the English ones as they are
    off = fit_rows(settings.replace(gloss_unreadable=False), model.encoder, rows, min_per_label=5)
    assert off.summary["read_through_gloss"] == 0
    assert off.head.fingerprint() != fitted.head.fingerprint()


DANISH = "jeg\ti\nkan\tcan\nikke\tnot\nlogge\tlog\nind\tin\npå\ton\nmin\tmy\nkonto\taccount\nmit\tmy\n"
DANISH += "kodeord\tpassword\nvirker\tworks\nhej\thello\ni\tin\ngår\tyesterday\nsiden\tsince\n"


@pytest.mark.slow
def test_a_help_desk_adds_a_language_with_its_own_glossary(model, settings, tmp_path):
    (tmp_path / "da.tsv").write_text(DANISH, encoding="utf-8")
    ticket = [("", "Hej, jeg kan ikke logge ind på min konto siden i går, mit kodeord virker ikke.", "account_access")]
    own = settings.replace(glossary_dir=str(tmp_path))
    from inference.gloss import books_for, gloss, language

    book = language(ticket[0][1], books_for(str(tmp_path)))
    assert book is not None and book.lang == "da"
    assert "password" in gloss(ticket[0][1], book=book)
    got = _outputs(own, model, ticket)[0]
    assert got["category"] == "account_access" and got["category_uncertain"]
    version = model_version(own)
    assert version != model_version(settings)  # their glossary is part of the version
    (tmp_path / "da.tsv").write_text(DANISH + "adgangskode\tpassword\n", encoding="utf-8")
    assert model_version(own) != version  # and an edit of it makes a new one
