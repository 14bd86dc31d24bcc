"""`eval --label-map`: a file's own labels read as the head's, and nothing guessed or dropped silently."""

from __future__ import annotations

import json

import pytest

from inference.errors import ConfigError
from inference.label_map import parse, read

HEAD = ["billing", "account_access", "technical_issue", "feature_request", "shipping", "cancellation"]


def test_inline_and_json_maps(tmp_path):
    assert parse(None) == {} and parse("") == {}
    assert parse("Payments=billing, Login problems=account_access,Other=-") == {
        "Payments": "billing",
        "Login problems": "account_access",
        "Other": None,
    }
    assert parse("a=b=billing") == {"a=b": "billing"}  # their label may hold '='; ours never does
    long = ",".join(f"intent_{k}=billing" for k in range(40))  # longer than a file name may be
    assert len(parse(long)) == 40
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"Payments": "billing", "Spam": None, "Other": "-"}), encoding="utf-8")
    assert parse(str(path)) == {"Payments": "billing", "Spam": None, "Other": None}
    for bad in ("Payments", "=billing", "Payments="):
        with pytest.raises(ConfigError, match="THEIR=OURS"):
            parse(bad)
    with pytest.raises(ConfigError, match="no such file"):
        parse(str(tmp_path / "missing.json"))
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a JSON object"):
        parse(str(path))


def test_labels_are_kept_mapped_respelled_or_left_out():
    labels = ["billing", "Account Access", "FEATURE-REQUEST", "Payments", "Other", "Other ", "shipping"]
    reading = read(labels, HEAD, {"Payments": "billing", "Other": None}, "f.jsonl")
    assert reading.to == {
        "billing": "billing",
        "Account Access": "account_access",
        "FEATURE-REQUEST": "feature_request",
        "Payments": "billing",
        "Other": None,
        "Other ": None,
        "shipping": "shipping",
    }
    assert reading.notes() == {
        "read_as": {"Account Access": "account_access", "FEATURE-REQUEST": "feature_request", "Payments": "billing"},
        "left_out": {"Other": 1, "Other ": 1},
    }


def test_an_unknown_label_or_target_is_refused_with_the_option_to_use():
    with pytest.raises(ConfigError, match=r"labels Misc \(2\), Spam \(1\) are not labels .* --label-map") as refused:
        read(["Misc", "Spam", "Misc", "billing"], HEAD, {}, "f.jsonl")
    assert "f.jsonl" in str(refused.value)
    with pytest.raises(ConfigError, match=r"Payments=payments: not labels of the category head"):
        read(["Payments"], HEAD, {"Payments": "payments"}, "f.jsonl")
    # a spelling that matches two head labels is not guessed
    with pytest.raises(ConfigError, match="Bill ing"):
        read(["Bill ing"], ["bill_ing", "bill-ing"], {}, "f.jsonl")


def test_a_star_names_every_other_label():
    labels = ["card_arrival", "card_arrival", "top_up_failed", "greeting", "billing"]
    reading = read(labels, HEAD, parse("card_arrival=shipping,*=-"), "test.csv")
    assert reading.to == {"card_arrival": "shipping", "top_up_failed": None, "greeting": None, "billing": "billing"}
    assert reading.notes()["left_out"] == {"greeting": 1, "top_up_failed": 1}
    assert read(["x", "y"], HEAD, {"*": "technical_issue"}, "f").to == {"x": "technical_issue", "y": "technical_issue"}


def test_fit_categories_relabels_any_label_and_keeps_the_unnamed():
    from inference.label_map import relabel

    labels = ["Billing EU", "Billing US", "Billing US", "Spam", "Logins", "Other "]
    reading = relabel(labels, parse("Billing EU=billing,Billing US=billing,Spam=-,Other=misc"))
    assert reading.to == {
        "Billing EU": "billing",
        "Billing US": "billing",
        "Spam": None,
        "Logins": "Logins",  # not named: kept as it is (a fitted head's labels are the help desk's own)
        "Other ": "misc",
    }
    assert reading.notes() == {
        "read_as": {"Billing EU": "billing", "Billing US": "billing", "Other ": "misc"},
        "left_out": {"Spam": 1},
    }
    assert relabel(["a", "b"], parse("a=x,*=-")).to == {"a": "x", "b": None}


def test_a_column_of_ticket_text_named_as_the_labels_is_refused_without_showing_it():
    texts = [f"My parcel number {k} never arrived and nobody answers my mails" for k in range(30)]
    with pytest.raises(ConfigError, match=r"30 distinct labels among 30 tickets .*--label-column") as refused:
        read(texts, HEAD, {}, "f.jsonl")
    assert "parcel" not in str(refused.value)
    long = "Hello, I was charged twice this month and would like a refund please"  # few, but long: not shown
    with pytest.raises(ConfigError, match=r"<a label of \d+ characters, not shown> \(1\), Misc \(1\)") as refused:
        read([long, "Misc", "billing"], HEAD, {}, "f.jsonl")
    assert "charged" not in str(refused.value)


def test_labels_that_may_be_ticket_text_are_counted_in_reports_never_shown():
    from inference.label_map import describe, relabel

    texts = [f"card {k} never arrived" for k in range(30)]  # short, but one per ticket: the text column
    for reading in (read(texts, HEAD, parse("*=shipping"), "f.jsonl"), relabel(texts, parse("*=-"))):
        notes = reading.notes()
        assert notes["read_as"] == {} and notes["left_out"] == {}
        assert set(notes["not_shown"].values()) <= {30, 0} and notes["not_shown"]["labels"] == 30
        assert "arrived" not in repr(notes) and "arrived" not in "\n".join(describe(notes))
    long = "Hello, I was charged twice this month and would like a refund please"
    reading = read([long, "Misc", "Misc", "billing"], HEAD, parse("Misc=-,*=billing"), "f.jsonl")
    assert reading.notes() == {
        "read_as": {},
        "left_out": {"Misc": 2},
        "not_shown": {"labels": 1, "tickets_read": 1, "tickets_left_out": 0},
    }
    assert "charged" not in "\n".join(describe(reading.notes()))
    assert "not shown: 1 labels" in "\n".join(describe(reading.notes()))


def test_fit_categories_refuses_a_new_label_longer_than_the_category_column():
    from inference.fit_categories import MAX_LABEL_CHARS, label_map

    assert label_map("Billing EU=billing,Spam=-") == {"Billing EU": "billing", "Spam": None}
    with pytest.raises(ConfigError, match=f"longer than {MAX_LABEL_CHARS} characters"):
        label_map("Billing EU=" + "b" * (MAX_LABEL_CHARS + 1))
