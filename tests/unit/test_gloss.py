"""Word-by-word glosses for tickets the English-only encoder cannot read (inference.gloss): the logic on small
glossaries written here, and the bundled glossaries' shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference import gloss as g


def _books(tmp_path: Path, **files: str) -> tuple[g.Glossary, ...]:
    for lang, text in files.items():
        (tmp_path / f"{lang}.tsv").write_text(text, encoding="utf-8")
    return g.glossaries(str(tmp_path))


DE = "# test\nich\ti\nkann\tcan\nmich\t-\nnicht\tnot\nanmelden\tlog in\npasswort\tpassword\nzurücksetzen\treset\n"
DE += "rechnung\tinvoice\nnummer\tnumber\nkunde\tcustomer\nmein\tmy\n"
FR = "je\ti\nne\tnot\npeux\tcan\npas\tnot\nme\t-\nconnecter\tlog in\nl'\tthe\napplication\tapp\nplante\tcrashes\n"
FR += "facture\tinvoice\nma\tmy\n"


def test_a_ticket_is_glossed_word_by_word_in_the_language_whose_glossary_knows_most_of_it(tmp_path):
    books = _books(tmp_path, de=DE, fr=FR)
    assert g.gloss("Ich kann mich nicht anmelden!", books) == "i can not log in!"
    assert g.gloss("Je ne peux pas me connecter, ma facture?", books) == "i not can not log in, my invoice?"
    # unknown words (names, codes, international words) stay as they are; digits and punctuation too
    assert g.gloss("Ich kann Zoom 5.2 nicht anmelden (#12)", books) == "i can Zoom 5.2 not log in (#12)"


def test_compounds_split_into_known_parts_with_linking_letters_only_for_compounding_languages(tmp_path):
    books = _books(tmp_path, de=DE, fr=FR)
    de = next(b for b in books if b.lang == "de")
    fr = next(b for b in books if b.lang == "fr")
    assert de.translate("Passwortzurücksetzen") == "password reset"
    assert de.translate("Kundennummer") == "customer number"  # linking "n"
    assert de.translate("Rechnungsnummer") == "invoice number"  # linking "s"
    assert de.translate("Kundenrechnungsnummer") == "customer invoice number"  # three parts
    assert de.translate("Passwortxyz") is None  # a part that is not known: no guess
    assert fr.translate("facturepasswort") is None


def test_elisions_are_article_plus_word_and_accents_are_optional(tmp_path):
    books = _books(tmp_path, de=DE, fr=FR)
    fr = next(b for b in books if b.lang == "fr")
    de = next(b for b in books if b.lang == "de")
    assert fr.translate("l'application") == "the app"
    assert fr.translate("l’application") == "the app"
    assert fr.translate("l'inconnu") is None
    assert de.translate("zurucksetzen") == "reset"
    assert de.translate("ZURÜCKSETZEN") == "reset"


def test_a_ticket_no_glossary_covers_keeps_its_own_text(tmp_path):
    books = _books(tmp_path, de=DE, fr=FR)
    assert g.gloss("The app crashes when I open the invoice page", books) is None
    assert g.gloss("", books) is None
    assert g.gloss("12345 !!!", books) is None
    flagged = ["Ich kann mich nicht anmelden", "Ich kann mich nicht anmelden", "Hola que tal"]
    assert set(g.glossed(flagged, [True, False, True], books)) == {0}


def test_a_malformed_glossary_line_is_refused_with_its_line_number(tmp_path):
    (tmp_path / "xx.tsv").write_text("ich\ti\nkaputt\n", encoding="utf-8")
    with pytest.raises(ValueError, match="xx.tsv line 2"):
        g.glossaries(str(tmp_path))


def test_the_bundled_glossaries_are_well_formed_and_their_digest_changes_with_them(tmp_path):
    books = g.glossaries()
    assert {b.lang for b in books} >= {"de", "fr", "es", "it", "nl", "pt", "sv", "pl"}
    for book in books:
        assert len(book.words) >= 1000, book.lang
        assert all(form == form.lower() and " " not in form for form in book.words), book.lang
    (tmp_path / "de.tsv").write_text(DE, encoding="utf-8")
    before = g.glossary_digest(str(tmp_path))
    (tmp_path / "de.tsv").write_text(DE + "konto\taccount\n", encoding="utf-8")
    assert g.glossary_digest(str(tmp_path)) != before


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Ich kann mich nicht anmelden, mein Passwort wird nicht akzeptiert.", {"password", "not"}),
        ("Bonjour, je n'arrive pas à me connecter à mon compte depuis hier.", {"account", "yesterday"}),
        ("Hola, me han cobrado dos veces la factura de este mes.", {"invoice", "twice"}),
        ("Buongiorno, il mio ordine non è ancora arrivato.", {"order", "arrived"}),
        ("Hallo, ik wil mijn abonnement opzeggen.", {"subscription", "cancel"}),
        ("Olá, a aplicação fecha sozinha quando abro as definições.", {"app", "settings"}),
        ("Hej, jag vill säga upp mitt abonnemang.", {"subscription", "cancel"}),
        ("Dzień dobry, nie mogę zalogować się do konta.", {"log", "account"}),
    ],
)
def test_the_bundled_glossaries_carry_a_support_ticket_s_keywords(text, words):
    got = g.gloss(text)
    assert got is not None
    assert words <= set(got.lower().replace(",", " ").replace(".", " ").split()), got


def test_a_long_run_of_letters_is_not_split_as_a_compound(tmp_path):
    long = "abcdefghij" * 3
    de = _books(tmp_path, de=DE + f"{long}\tlong\n")[0]
    assert de.translate(long + "nummer") == "long number"  # 36 letters: split
    assert de.translate(long + "zurücksetzen") is None  # 42 letters: over the limit, never split


def test_german_typed_without_umlauts_is_read_as_with_them(tmp_path):
    de = _books(tmp_path, de=DE + "kündigen\tcancel\nneu\tnew\nmöchte\twould like\n")[0]
    assert de.translate("kuendigen") == "cancel"
    assert de.translate("Moechte") == "would like"
    assert de.translate("zuruecksetzen") == "reset"  # the same spelling inside a word
    assert de.lookup("neue") is None  # "ue" after a vowel is not an umlaut: never read as "neu"
    (tmp_path / "fr").mkdir()
    fr = _books(tmp_path / "fr", fr=FR + "dû\tdue\n")[0]
    assert fr.translate("du") == "due" and fr.translate("due") is None  # only German spells umlauts out


def test_a_separable_verb_with_its_prefix_attached_is_read_as_the_verb(tmp_path):
    de = _books(tmp_path, de=DE + "stürzt\tcrashes\nkommt\tcomes\n")[0]
    assert de.translate("abstürzt") == "crashes"  # "..., dass die App abstürzt"
    assert de.translate("zurückkommt") == "comes"
    assert de.translate("abxyz") is None and de.translate("abkam") is None  # the rest must be a known form
    (tmp_path / "fr").mkdir()
    fr = _books(tmp_path / "fr", fr=FR)[0]
    assert fr.translate("abplante") is None  # only German and Dutch attach separable prefixes


def test_a_help_desk_s_own_glossaries_add_languages_and_words(tmp_path):
    from inference.errors import ConfigError

    own = tmp_path / "own"
    own.mkdir()
    (own / "da.tsv").write_text(
        "jeg\ti\nkan\tcan\nikke\tnot\nlogge\tlog\nind\tin\nkodeord\tpassword\n", encoding="utf-8"
    )
    (own / "de.tsv").write_text("ich\tI (own)\nkann\tcan\nnicht\tnot\n", encoding="utf-8")
    books = {b.lang: b for b in g.books_for(str(own))}
    assert set(books) == {b.lang for b in g.glossaries()} | {"da"}
    assert g.gloss("Jeg kan ikke logge ind, kodeord?", book=books["da"]) == "i can not log in, password?"
    assert books["de"].lookup("ich") == "I (own)"  # their entry wins
    assert books["de"].lookup("passwort") == "password"  # the bundled ones stay
    assert g.books_for(None) == g.glossaries()

    before = g.glossary_digest(extra_dir=str(own))
    assert before != g.glossary_digest()
    (own / "da.tsv").write_text("jeg\ti\nkan\tcan\nikke\tnot\nkonto\taccount\n", encoding="utf-8")
    assert g.glossary_digest(extra_dir=str(own)) != before
    assert {b.lang: b for b in g.books_for(str(own))}["da"].lookup("konto") == "account"  # read again

    (own / "da.tsv").write_text("jeg\ti\nkaputt\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="INFERENCE_GLOSSARY_DIR: da.tsv line 2"):
        g.books_for(str(own))
    with pytest.raises(ConfigError, match="INFERENCE_GLOSSARY_DIR .* is not a folder"):
        g.glossary_digest(extra_dir=str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no glossary"):
        g.books_for(str(tmp_path / "empty"))
