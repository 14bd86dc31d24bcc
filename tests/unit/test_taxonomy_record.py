"""The record of how the default taxonomy was chosen (benchmarks/taxonomy_variants.py, BENCHMARKS.md) stays
true: every recorded variant applies to the previous default, and the adopted one is what the code ships."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from inference.taxonomy import DEFAULT_TAXONOMY

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name: str):
    key = f"benchmarks_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # dataclasses look their module up while the file runs
        spec.loader.exec_module(module)
    return sys.modules[key]


def test_the_adopted_variant_is_the_default_taxonomy_and_every_variant_applies():
    tv = _module("taxonomy_variants")
    base = json.loads(tv.BEFORE.read_text(encoding="utf-8"))
    variants = {k: v for k, v in json.loads(tv.VARIANTS.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    assert tv.apply(base, variants["before"]) == base
    assert tv.apply(base, variants["V6"]) == DEFAULT_TAXONOMY
    for name, edits in variants.items():
        out = tv.apply(base, edits)
        assert set(out) == set(base), name
        assert all(out[label] and len(set(out[label])) == len(out[label]) for label in out), name
    assert base == json.loads(tv.BEFORE.read_text(encoding="utf-8"))  # apply never edits its input


def test_an_edit_naming_a_description_that_is_not_there_is_an_error():
    tv = _module("taxonomy_variants")
    with pytest.raises(ValueError):
        tv.apply({"billing": ["a"]}, {"drop": {"billing": ["b"]}})
    with pytest.raises(ValueError):
        tv.apply({"billing": ["a"]}, {"replace": {"billing": [["b", "c"]]}})


def test_the_blind_banking77_intents_are_not_the_tuned_ones():
    ts = _module("ticket_sets")
    assert not set(ts.BANKING77_UNSEEN_MAPPING) & set(ts.BANKING77_MAPPING)
    assert set(ts.BANKING77_UNSEEN_MAPPING.values()) <= set(DEFAULT_TAXONOMY)


def test_build_banking77_writes_only_the_mapped_intents(tmp_path):
    ts = _module("ticket_sets")
    csv = tmp_path / "test.csv"
    csv.write_text(
        'text,category\r\n"Can I change my PIN, please?",change_pin\r\nwhere is my card,card_arrival\r\n'
        "hello,greeting_intent\r\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert ts.build_banking77(str(csv), out, ts.BANKING77_UNSEEN_MAPPING) == 1
    row = json.loads(out.read_text(encoding="utf-8"))
    assert (row["body"], row["label"], row["source_label"]) == (
        "Can I change my PIN, please?",
        "account_access",
        "change_pin",
    )
    assert ts.build_banking77(str(csv), out) == 1
    assert json.loads(out.read_text(encoding="utf-8"))["label"] == "shipping"


def test_build_clinc150_writes_only_the_mapped_intents_of_the_split(tmp_path):
    ts = _module("ticket_sets")
    assert set(ts.CLINC150_MAPPING.values()) <= set(DEFAULT_TAXONOMY)
    data = {
        "val": [["when is my phone bill due", "bill_due"], ["set a timer", "timer"]],
        "test": [["where is my package", "order_status"], ["cancel that", "cancel"]],
    }
    src = tmp_path / "data_small.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert ts.build_clinc150(str(src), out) == 1
    assert json.loads(out.read_text(encoding="utf-8"))["label"] == "billing"
    assert ts.build_clinc150(str(src), out, "test") == 1
    row = json.loads(out.read_text(encoding="utf-8"))
    assert (row["body"], row["label"], row["source_label"]) == ("where is my package", "shipping", "order_status")
    data["train"] = [["what's my credit limit", "credit_limit"], ["play some jazz", "play_music"]]
    src.write_text(json.dumps(data), encoding="utf-8")
    assert ts.build_clinc150(str(src), out, "train", mapping=None) == 2  # every intent, as a queue of its own
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["label"] for r in rows] == ["credit_limit", "play_music"] == [r["source_label"] for r in rows]


def test_build_clap_writes_only_bug_reports_and_feature_requests(tmp_path):
    ts = _module("ticket_sets")
    src = tmp_path / "3000 review.csv"
    src.write_text(
        'review,category\n"crashes on start, fix it",BUG\nplease add dark mode,FEATURE\nlove it,OTHER\n',
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert ts.build_clap(str(src), out) == 2
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["body"], r["label"], r["source_label"]) for r in rows] == [
        ("crashes on start, fix it", "technical_issue", "BUG"),
        ("please add dark mode", "feature_request", "FEATURE"),
    ]


def test_build_helpdesk_writes_the_mapped_queues_with_language_and_type(tmp_path):
    ts = _module("ticket_sets")
    src = tmp_path / "tickets.csv"
    src.write_text(
        "subject,body,answer,type,queue,priority,language\n"
        'Invoice,"Dear Support,\\n\\nI was charged twice.",We refund it.,Incident,Billing and Payments,high,en\n'
        "Absturz,Die App stürzt ab.,Wir prüfen das.,Problem,IT Support,medium,de\n"
        "Offer,What plans do you sell?,See our site.,Request,Sales and Pre-Sales,low,en\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert ts.build_helpdesk(str(src), out) == 2  # Sales and Pre-Sales is not mapped
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["subject"], r["label"], r["source_label"], r["type"], r["lang"]) for r in rows] == [
        ("Invoice", "billing", "Billing and Payments", "Incident", "en"),
        ("Absturz", "technical_issue", "IT Support", "Problem", "de"),
    ]
    assert rows[0]["body"] == "Dear Support,\\n\\nI was charged twice."  # the export's escapes kept as they are


def test_helpdesk_languages_tells_german_text_from_english_text_labelled_german(tmp_path):
    # the public set labels some English e-mails `de`: counted apart, with the real tokenizer's flags
    ts = _module("ticket_sets")
    src = tmp_path / "tickets.csv"
    src.write_text(
        "subject,body,type,queue,language\n"
        "Absturz,Die Anwendung stürzt ab und ich kann mich nicht mehr anmelden. Bitte helfen Sie mir.,Incident,IT,de\n"
        "Sync,The sync stopped working after the update and our data is missing.,Problem,IT,de\n"
        "Invoice,I was charged twice for my plan this month and need a refund.,Incident,Billing,en\n",
        encoding="utf-8",
    )
    assert ts.helpdesk_languages(str(src)) == {
        "de": {"rows": 2, "no_foreign_function_word": 1, "flagged": 1, "flagged_with_a_foreign_function_word": 1},
        "en": {"rows": 1, "no_foreign_function_word": 1, "flagged": 0, "flagged_with_a_foreign_function_word": 0},
    }


@pytest.mark.parametrize("name", ["banking77", "banking77-unseen", "clinc150", "clap", "helpdesk"])
def test_each_mapping_prints_as_an_eval_label_map(name):
    import subprocess

    from inference.label_map import parse

    ts = _module("ticket_sets")
    done = subprocess.run(
        [sys.executable, str(BENCH / "ticket_sets.py"), "--print-label-map", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert parse(done.stdout.strip()) == {**ts.MAPPINGS[name], "*": None}
