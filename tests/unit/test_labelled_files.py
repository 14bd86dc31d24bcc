"""Labelled tickets from files as help desks export them (inference.labelled_files): CSV with Excel's BOM and
`;`, quoted fields across lines, TSV, big e-mails, and the errors (file, line, column; never a value)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from inference.errors import ConfigError
from inference.examples import EVAL_SET, load_examples
from inference.fit_categories import read_file
from inference.labelled_files import Columns

ROWS = [
    {
        "subject": "Charged twice",
        "body": 'I was billed twice; "again"!\nSecond line, with a comma.',
        "queue": "Billing",
    },
    {"subject": "", "body": "Passwort vergessen – Grüße", "queue": "Access"},
    {"subject": "Where is my parcel", "body": "Order 1234 has not arrived.", "queue": ""},  # unlabelled: passed over
    {"subject": "App crashes", "body": "x" * 300_000, "queue": "Tech"},  # above the csv module's 128 KiB default
]


def write_csv(path, rows, delimiter=",", bom=False):
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), delimiter=delimiter, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + out.getvalue().encode("utf-8"))
    return path


def expected(rows):
    return [(r["subject"], r["body"], r["queue"]) for r in rows if r["queue"]]


@pytest.mark.parametrize(
    ("name", "delimiter", "bom"),
    [("h.csv", ",", False), ("h.csv", ";", True), ("h.CSV", "\t", True), ("h.tsv", "\t", False)],
)
def test_a_csv_export_reads_as_its_json_lines_twin(tmp_path, name, delimiter, bom):
    path = write_csv(tmp_path / name, ROWS, delimiter, bom)
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")

    from_csv = [(r.subject, r.body, r.label) for r in read_file(path, Columns(label="queue"))]

    assert (
        from_csv == [(r.subject, r.body, r.label) for r in read_file(jsonl, Columns(label="queue"))] == expected(ROWS)
    )


def test_other_column_names_and_no_subject(tmp_path):
    rows = [{"Ticket text": r["body"], "Assigned queue": r["queue"]} for r in ROWS]
    path = write_csv(tmp_path / "zendesk.csv", rows)

    read = list(read_file(path, Columns(label="Assigned queue", body="Ticket text", subject=None)))
    unnamed = list(read_file(path, Columns(label="Assigned queue", body="Ticket text")))  # no `subject` column: none

    assert [(r.subject, r.body, r.label) for r in read] == [(None, b, q) for _, b, q in expected(ROWS)]
    assert unnamed == read
    for no_subject in ("none", "Ticket text"):  # as TICKETS_COL_SUBJECT: none, or the body's own column
        assert Columns.from_flags("Assigned queue", "Ticket text", no_subject).subject is None
    with pytest.raises(ConfigError, match="no column for --subject-column 'subject'"):
        list(read_file(path, Columns.from_flags("Assigned queue", "Ticket text", "subject")))


def test_a_missing_column_is_named_never_a_value(tmp_path):
    path = write_csv(tmp_path / "h.csv", ROWS)
    with pytest.raises(ConfigError, match=r"no column for --label-column 'category' among the 3 of its first line"):
        list(read_file(path, Columns(label="category")))
    headless = tmp_path / "headless.csv"  # its first row is a ticket, taken for the header
    headless.write_text(write_csv(tmp_path / "h2.csv", ROWS[1:]).read_text().split("\n", 1)[1])
    with pytest.raises(ConfigError, match="no column for --label-column 'queue'") as refused:
        list(read_file(headless, Columns(label="queue", subject=None)))
    assert "Passwort" not in str(refused.value)


def test_a_json_lines_file_without_the_fields_names_its_fields_never_a_value(tmp_path):
    path = tmp_path / "export.jsonl"
    rows = [{"text": "Mein Passwort geht nicht", "category": "logins"}, {"text": "Paket fehlt", "category": "post"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    fields = r"fields: text, category"
    with pytest.raises(ConfigError, match=rf"none of its records has a 'label' field .*--label-column.*{fields}") as e1:
        list(read_file(path, Columns()))
    with pytest.raises(ConfigError, match=rf"none of its records has a 'body' field .*--body-column.*{fields}") as e2:
        list(read_file(path, Columns(label="category")))
    with pytest.raises(ConfigError, match=rf"export.jsonl:1: no 'label' field .*--label-column.*{fields}") as e3:
        load_examples(path)
    with pytest.raises(ConfigError, match=rf"export.jsonl:1: no 'body' field .*--body-column.*{fields}") as e4:
        load_examples(path, columns=Columns(label="category"))
    assert not any("Passwort" in str(e.value) or "Paket" in str(e.value) for e in (e1, e2, e3, e4))
    assert [r.label for r in read_file(path, Columns(label="category", body="text"))] == ["logins", "post"]
    path.write_text(json.dumps({"label": "", "body": "x"}) + "\n", encoding="utf-8")
    assert list(read_file(path, Columns())) == []  # a label field left empty: unlabelled, passed over
    path.write_text(json.dumps({"Mein Passwort geht nicht, bitte helfen Sie mir sofort!!": "x"}) + "\n")
    with pytest.raises(ConfigError, match=r"first one's 1 fields are not shown") as e5:
        list(read_file(path, Columns()))
    assert "Passwort" not in str(e5.value)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"subject,body,queue\na,b,c,d\n", r"h.csv:2: more fields than the header has columns"),
        (b'subject,body,queue\na,"secret text,c\n', r"h.csv:\d+: not valid CSV"),
        ("subject,body,queue\na,Gr\u00fc\u00dfe,c\n".encode("latin-1"), r"not UTF-8 text .*save it as UTF-8"),
    ],
)
def test_broken_files_are_refused_with_the_line_never_a_value(tmp_path, content, error):
    path = tmp_path / "h.csv"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=error) as refused:
        list(read_file(path, Columns(label="queue")))
    assert "secret" not in str(refused.value) and "Gr" not in str(refused.value)


def test_eval_sets_may_be_csv(tmp_path):
    examples = load_examples(EVAL_SET)[:40]
    rows = [
        {"id": e.id, "subject": e.subject or "", "body": e.body, "label": e.label, "lang": e.lang} for e in examples
    ]
    path = write_csv(tmp_path / "eval.csv", rows, ";", bom=True)
    assert load_examples(path) == [
        type(e)(e.id, e.subject or "", e.body, e.label, e.lang) for e in examples
    ]  # an empty CSV field reads as "" where JSON had null: the same ticket text
    no_ids = write_csv(tmp_path / "no_ids.csv", [{"body": r["body"], "label": r["label"]} for r in rows])
    ids = [e.id for e in load_examples(no_ids)]  # the line each row ends on
    assert len(set(ids)) == len(rows) and ids[0] == "line-2" and all(i.startswith("line-") for i in ids)
    with pytest.raises(ConfigError, match=r"no column for --body-column 'body'"):
        load_examples(write_csv(tmp_path / "bad.csv", [{"text": "a", "label": "billing"}]))
    renamed = load_examples(
        write_csv(tmp_path / "b77.csv", [{"text": "a card", "category": "card_arrival"}]),
        columns=Columns(label="category", body="text"),
    )
    assert [(e.subject, e.body, e.label) for e in renamed] == [(None, "a card", "card_arrival")]


def test_a_head_fitted_on_a_train_split_is_evaluated_on_its_test_split_as_exported(tmp_path):
    # a public set's layout (text,category: BANKING77's), its own labels: fit on train.csv, eval on test.csv
    from inference.config import Settings
    from inference.engine.standin import StandInEncoder
    from inference.evaluate import evaluate
    from inference.fit_categories import fit_rows
    from tests.unit.test_category_head import queue_rows

    rows = queue_rows(16)
    train = write_csv(tmp_path / "train.csv", [{"text": r.body, "category": r.label} for r in rows[::2]])
    test = write_csv(tmp_path / "test.csv", [{"text": r.body, "category": r.label} for r in rows[1::2]])
    encoder = StandInEncoder()
    settings = Settings(device="cpu", cache_dir="")
    fitted = fit_rows(
        settings, encoder, list(read_file(train, Columns(label="category", body="text"))), min_per_label=5
    )
    fitted.head.save(tmp_path / "head.npz")

    with_head = Settings(device="cpu", cache_dir="", category_head=str(tmp_path / "head.npz"))
    report = evaluate(with_head, str(test), encoder=encoder, columns=Columns(label="category", body="text"))

    assert report["tickets"] == len(rows) // 2 and report["accuracy"] >= 0.9


def test_the_bundled_example_files_and_the_six_language_file_load_with_taxonomy_labels():
    from collections import Counter
    from pathlib import Path

    from inference.examples import FEWSHOT, load_example_files, load_examples
    from inference.taxonomy import DEFAULT_TAXONOMY

    labels = set(DEFAULT_TAXONOMY)
    bundled = load_example_files(None, labels)
    assert len({e.id for e in bundled}) == len(bundled)  # ids unique across the few-shot and development files
    fewshot = load_examples(FEWSHOT, labels)
    assert len(fewshot) == 104 and min(Counter(e.label for e in fewshot).values()) >= 17
    six = load_examples(
        Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "fewshot_six_languages.jsonl", labels
    )
    by_language = Counter((e.lang, e.label) for e in six)
    assert set(by_language.values()) == {2} and len(by_language) == 6 * len(labels)  # 2 per label per language
    assert {e.lang for e in six} == {"de", "fr", "es", "it", "nl", "pt"}
    assert not {e.id for e in six} & {e.id for e in bundled}


def test_eval_breaks_accuracy_down_by_a_group_column(tmp_path):
    # a public set's intents (or a help desk's queues) mapped onto the labels: which of them the head gets wrong
    from inference.config import Settings
    from inference.engine.standin import StandInEncoder
    from inference.evaluate import evaluate, render
    from inference.fit_categories import fit_rows
    from tests.unit.test_category_head import queue_rows

    rows = queue_rows(16)
    train = write_csv(tmp_path / "train.csv", [{"text": r.body, "queue": r.label} for r in rows[::2]])
    fitted = fit_rows(
        Settings(device="cpu", cache_dir=""),
        StandInEncoder(),
        list(read_file(train, Columns(label="queue", body="text"))),
        min_per_label=5,
    )
    fitted.head.save(tmp_path / "head.npz")
    labels = fitted.head.labels
    test_rows = [
        {"text": r.body, "queue": r.label, "intent": f"{r.label}/{k % 2}" if k % 5 else ""}
        for k, r in enumerate(rows[1::2])
    ]
    test = write_csv(tmp_path / "test.csv", test_rows)
    settings = Settings(device="cpu", cache_dir="", category_head=str(tmp_path / "head.npz"))
    columns = Columns(label="queue", body="text", group="intent")
    report = evaluate(settings, str(test), encoder=StandInEncoder(), columns=columns)

    groups = report["per_group"]
    assert report["group_column"] == "intent"
    assert sum(g["n"] for g in groups.values()) == report["tickets"] == len(test_rows)
    assert "(none)" in groups  # an empty value is a group of its own, never dropped
    for name, g in groups.items():
        members = [r for r in test_rows if (r["intent"] or "(none)") == name]
        assert g["n"] == len(members) and g["label"] in labels
        if name != "(none)":
            assert g["label"] == name.split("/")[0]
        assert 0.0 <= g["accuracy"] <= 1.0 and (g["most_often_wrong_as"] is None) == (g["accuracy"] == 1.0)
    ns = [g["n"] for g in groups.values()]
    assert ns == sorted(ns, reverse=True)  # most tickets first
    shown = render(report)
    assert "intent" in shown and all(name in shown for name in groups)
    mean, accuracy = report["mean_confidence"], report["accuracy"]
    ece_line = next(x for x in shown.splitlines() if x.startswith("expected calibration error"))
    assert 0.0 < mean <= 1.0 and f"mean confidence {mean:.3f}" in ece_line
    assert ("(overconfident)" in ece_line) == (mean > accuracy)
    assert ("(underconfident)" in ece_line) == (mean < accuracy)
    assert "per_group" not in evaluate(settings, str(test), encoder=StandInEncoder(), columns=Columns("queue", "text"))

    with pytest.raises(ConfigError, match=r"no column for --group-column 'team'"):
        load_examples(test, columns=Columns(label="queue", body="text", group="team"))
    per_ticket = write_csv(  # the text column named by mistake: refused by counts, no ticket text shown
        tmp_path / "per_ticket.csv", [{**r, "intent": f"{r['text'][:30]} {k}"} for k, r in enumerate(test_rows * 3)]
    )
    with pytest.raises(
        ConfigError, match=r"--group-column 'intent' has \d+ distinct values among \d+ tickets"
    ) as refused:
        evaluate(settings, str(per_ticket), encoder=StandInEncoder(), columns=columns)
    assert not any(r["text"][:30] in str(refused.value) for r in test_rows)


def test_eval_reads_the_language_from_a_column_named_otherwise(tmp_path):
    # a public export calls it "language": the per-language table (accuracy, unreadable share) reads it there
    from inference.config import Settings
    from inference.engine.standin import StandInEncoder
    from inference.evaluate import evaluate, render

    rows = [
        {
            "subject": "Rechnung",
            "body": "Ich wurde doppelt belastet, bitte erstatten Sie den Betrag",
            "queue": "billing",
        },
        {"subject": "Invoice", "body": "I was charged twice for my plan this month", "queue": "billing"},
        {"subject": "", "body": "The app crashes when I open the reports page", "queue": "technical_issue"},
        {"subject": "", "body": "Die App stürzt ab, sobald ich die Berichte öffne", "queue": "technical_issue"},
        {"subject": "", "body": "The export to PDF fails with an error", "queue": "technical_issue"},
    ]
    langs = ["de", "en", "en", "de", ""]
    path = write_csv(tmp_path / "t.csv", [{**r, "language": g} for r, g in zip(rows, langs, strict=True)])
    settings = Settings(device="cpu", cache_dir="")
    columns = Columns.from_flags("queue", "body", None, lang="language")
    report = evaluate(settings, str(path), encoder=StandInEncoder(), columns=columns)
    per = report["per_language"]
    assert {k: v["n"] for k, v in per.items()} == {"de": 2, "en": 2, "unknown": 1}
    assert per["de"]["unreadable_share"] == 1.0 and per["en"]["unreadable_share"] == 0.0  # German, flagged
    assert all(name in render(report) for name in per)
    unnamed = evaluate(settings, str(path), encoder=StandInEncoder(), columns=Columns.from_flags("queue", "body", None))
    assert unnamed["per_language"] == per  # not named: a "language" column is read when there is no "lang" one
    renamed = write_csv(tmp_path / "r.csv", [{**r, "idioma": g} for r, g in zip(rows, langs, strict=True)])
    other = evaluate(
        settings, str(renamed), encoder=StandInEncoder(), columns=Columns.from_flags("queue", "body", None)
    )
    assert set(other["per_language"]) == {"unknown"}  # any other name must be given: --lang-column idioma
    named = Columns.from_flags("queue", "body", None, lang="idioma")
    assert evaluate(settings, str(renamed), encoder=StandInEncoder(), columns=named)["per_language"] == per

    with pytest.raises(ConfigError, match=r"no column for --lang-column 'lang'"):
        load_examples(path, columns=Columns(label="queue", lang="lang"))
    per_ticket = write_csv(  # the body named by mistake: refused by counts, no ticket text shown
        tmp_path / "per_ticket.csv", [{**r, "language": f"{r['body'][:20]} {k}"} for k, r in enumerate(rows * 6)]
    )
    with pytest.raises(ConfigError, match=r"--lang-column 'language' has 30 distinct values") as refused:
        evaluate(settings, str(per_ticket), encoder=StandInEncoder(), columns=columns)
    assert not any(r["body"][:20] in str(refused.value) for r in rows)


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_export_reads_as_its_json_lines_twin(tmp_path, indent):
    rows = [
        {"id": "T-1", "subject": "Rechnung", "body": "Doppelt abgebucht, bitte erstatten", "queue": "payments"},
        {"id": "T-2", "subject": None, "body": "Paket kam nie an", "queue": "deliveries"},
        {"id": "T-3", "subject": "", "body": "Login geht nicht", "queue": ""},  # unlabelled: passed over
    ]
    lines, array = tmp_path / "h.jsonl", tmp_path / "h.json"
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    array.write_text("\ufeff" + json.dumps(rows, indent=indent) + "\n", encoding="utf-8")  # with Excel's BOM
    columns = Columns(label="queue")
    assert list(read_file(array, columns)) == list(read_file(lines, columns))
    assert len(list(read_file(array, columns))) == 2


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('[{"body": "secret a", "label": "x"}, "secret b"]', r"h.json:1: not a JSON object"),
        ('[{"body": "secret a", "label": "x"}\n {"body": "secret b"}]', r"h.json:2: not valid JSON"),
        ('[{"body": "secret a", "label": "x"}] trailing', r"h.json:1: text after the array's end"),
        ('[{"body": "secret a", "label": "x"},\n {"body": "secret', r"h.json:2: not a JSON object"),
    ],
)
def test_a_broken_json_array_names_the_line_never_a_value(tmp_path, content, error):
    path = tmp_path / "h.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=error) as refused:
        list(read_file(path, Columns()))
    assert "secret" not in str(refused.value)


def test_fit_categories_never_shows_a_text_column_named_as_the_labels(tmp_path):
    from inference.config import Settings
    from inference.engine.standin import StandInEncoder
    from inference.fit_categories import Row, fit_rows

    texts = [f"Mein Paket {k} ist nie angekommen, bitte helfen" for k in range(30)]
    rows = [Row(None, t, t) for t in texts]  # --label-column named the body's column
    with pytest.raises(ConfigError, match=r"30 distinct labels among 30 tickets \(not shown") as refused:
        fit_rows(Settings(device="cpu", cache_dir=""), StandInEncoder(), rows)
    assert "Paket" not in str(refused.value)
    few = [Row(None, f"ticket {k}", "payments") for k in range(6)] + [Row(None, "x", "logins")]
    with pytest.raises(ConfigError, match=r"found payments: 6, logins: 1"):  # queue names are shown
        fit_rows(Settings(device="cpu", cache_dir=""), StandInEncoder(), few)

    path = tmp_path / "h.jsonl"
    label = "Mein Paket ist nie angekommen, bitte helfen Sie mir sofort, ich warte seit Wochen"
    path.write_text(json.dumps({"body": "x", "label": label}))
    with pytest.raises(ConfigError, match=rf"a label of {len(label)} characters is longer than 64") as refused:
        list(read_file(path, Columns()))
    assert "Paket" not in str(refused.value)
