"""`python -m inference fit-categories` and `eval` with the real model, as a help desk would run them: a JSON
Lines file of its own queues in, a head file out with its held-out accuracy; the head is then what `eval`
(and the pipeline) use through INFERENCE_CATEGORY_HEAD."""

from __future__ import annotations

import json

import pytest

from inference.category_fit import L2_CANDIDATES
from inference.cli import main

QUEUES = {
    "payments": ["I was charged twice for my order", "Please refund the duplicate payment", "My card payment failed"],
    "deliveries": ["My parcel never arrived", "The tracking number shows no updates", "The box arrived damaged"],
    "logins": ["I cannot log in to my account", "The password reset email never comes", "My 2FA code is rejected"],
}


@pytest.mark.slow
def test_fit_then_eval_through_the_cli(tmp_path, monkeypatch, capsys):
    rows = [
        {"id": f"{q}-{k}", "subject": f"ticket {k}", "body": f"{phrases[k % 3]}, order {1000 + k}.", "queue": q}
        for q, phrases in QUEUES.items()
        for k in range(10)
    ]
    history = tmp_path / "history.jsonl"
    history.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    head = tmp_path / "models" / "head.npz"
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_CACHE_DIR", str(tmp_path / "cache"))

    assert (
        main(["fit-categories", "--from", str(history), "--label-column", "queue", "--out", str(head), "--json"]) == 0
    )
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["labels"] == sorted(QUEUES) and fitted["written"] == str(head.resolve())
    assert fitted["held_out"]["protocol"] == "5-fold cross-validation" and fitted["held_out"]["accuracy"] >= 0.9
    assert fitted["l2"]["chosen"] and fitted["l2"]["value"] in L2_CANDIDATES  # by the same cross-validation
    assert min(fitted["l2"]["tried"], key=lambda t: t["loss"])["l2"] == fitted["l2"]["value"]
    assert head.is_file()

    new = tmp_path / "new.jsonl"
    new.write_text(
        "\n".join(
            json.dumps({"id": str(k), "subject": "", "body": body, "label": label})
            for k, (body, label) in enumerate(
                [
                    ("Hello, I see two identical charges on my statement, please refund one.", "payments"),
                    ("Where is my package? It should have arrived last week.", "deliveries"),
                    ("I am locked out of my account after resetting my password.", "logins"),
                ]
            )
        )
        + "\n"
    )
    monkeypatch.setenv("INFERENCE_CATEGORY_HEAD", str(head))
    assert main(["eval", "--set", str(new), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["head"] == str(head) and report["tickets"] == 3 and report["accuracy"] == 1.0
    assert report["baseline"] is None  # queues, not taxonomy labels: no description baseline

    monkeypatch.setenv("INFERENCE_CATEGORY_HEAD", str(tmp_path / "missing.npz"))
    assert main(["eval", "--set", str(new)]) == 2  # a configuration error, named
    assert "fit-categories" in capsys.readouterr().err


@pytest.mark.slow
def test_a_csv_export_fits_the_same_head_as_its_json_lines_twin(tmp_path, monkeypatch, capsys):
    # a help desk's export: its own column names, Excel's byte-order mark and `;`, a text spanning lines
    import csv

    rows = [
        {"Subject": f"ticket {k}", "Description": f"{phrases[k % 3]};\n order {1000 + k}.", "Group": q}
        for q, phrases in QUEUES.items()
        for k in range(10)
    ]
    with (tmp_path / "export.csv").open("w", encoding="utf-8-sig", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["Subject", "Description", "Group"], delimiter=";")
        writer.writeheader()
        writer.writerows(rows)
    twin = tmp_path / "twin.jsonl"
    twin.write_text(
        "".join(
            json.dumps({"subject": r["Subject"], "body": r["Description"], "queue": r["Group"]}) + "\n" for r in rows
        )
    )
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_CACHE_DIR", str(tmp_path / "cache"))
    columns = ["--label-column", "Group", "--subject-column", "Subject", "--body-column", "Description"]

    assert (
        main(
            [
                "fit-categories",
                "--from",
                str(tmp_path / "export.csv"),
                *columns,
                "--out",
                str(tmp_path / "a.npz"),
                "--json",
            ]
        )
        == 0
    )
    from_csv = json.loads(capsys.readouterr().out)
    assert (
        main(
            [
                "fit-categories",
                "--from",
                str(twin),
                "--label-column",
                "queue",
                "--out",
                str(tmp_path / "b.npz"),
                "--json",
            ]
        )
        == 0
    )
    from_jsonl = json.loads(capsys.readouterr().out)

    assert from_csv["labels"] == sorted(QUEUES) and from_csv["held_out"] == from_jsonl["held_out"]
    assert from_csv["tickets"] == from_jsonl["tickets"] == 30

    new = tmp_path / "new.csv"  # new tickets in the export's layout, scored by the head fitted on it
    with new.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Description", "Group", "Team"])
        writer.writerow(["Hello, I see two identical charges on my statement, please refund one.", "payments", "EU"])
        writer.writerow(["Where is my package? It should have arrived last week.", "deliveries", "US"])
        writer.writerow(["I am locked out of my account after resetting my password.", "logins", "EU"])
    monkeypatch.setenv("INFERENCE_CATEGORY_HEAD", str(tmp_path / "a.npz"))
    assert main(["eval", "--set", str(new), "--label-column", "Group", "--body-column", "Description", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tickets"] == 3 and report["accuracy"] == 1.0
    args = ["eval", "--set", str(new), "--label-column", "Group", "--body-column", "Description"]
    assert main([*args, "--group-column", "Team"]) == 0  # accuracy per team, as a table
    shown = capsys.readouterr().out
    assert "Team" in shown and "EU" in shown and "US" in shown
    assert main([*args, "--group-column", "Team", "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["per_group"]
    assert {k: (g["n"], g["accuracy"]) for k, g in groups.items()} == {"EU": (2, 1.0), "US": (1, 1.0)}


@pytest.mark.slow
def test_eval_reads_a_help_desks_own_labels_through_a_label_map(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")  # the default head from the shared cache, as eval's own tests
    rows = [
        ("I was billed twice this month, please refund the second charge.", "Billing Issue"),
        ("My invoice shows the wrong amount for the annual plan.", "Billing Issue"),
        ("I cannot log in, the password reset link has expired.", "Account Access"),
        ("My parcel was due on Monday and tracking has not moved since.", "delivery"),
        ("WIN A FREE CRUISE click here now", "spam"),
        ("Buy cheap watches online", "spam"),
    ]
    f = tmp_path / "export.jsonl"
    f.write_text("\n".join(json.dumps({"text": t, "queue": q}) for t, q in rows) + "\n", encoding="utf-8")
    args = ["eval", "--set", str(f), "--body-column", "text", "--label-column", "queue"]

    assert main(args) == 2  # nothing is guessed: the labels it cannot read are named, with the option
    err = capsys.readouterr().err
    assert "Billing Issue (2)" in err and "delivery (1)" in err and "spam (2)" in err and "--label-map" in err
    assert "Account Access" not in err  # read as account_access by its spelling
    assert not any(t[:20] in err for t, _ in rows)

    assert main([*args, "--label-map", "Billing Issue=billing,delivery=shipping,spam=-", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tickets"] == 4
    assert report["labels_read"] == {
        "read_as": {"Account Access": "account_access", "Billing Issue": "billing", "delivery": "shipping"},
        "left_out": {"spam": 2},
    }
    assert sum(m["n"] for m in report["per_label"].values()) == 4
    assert report["per_label"]["billing"]["n"] == 2 and report["per_label"]["shipping"]["n"] == 1

    mapping = tmp_path / "queues.json"
    mapping.write_text(json.dumps({"Billing Issue": "billing", "delivery": "shipping", "spam": None}))
    assert main([*args, "--label-map", str(mapping)]) == 0
    shown = capsys.readouterr().out
    assert "4 tickets from" in shown and "left out: 2 tickets whose label maps to none (spam 2)" in shown
    assert "Billing Issue -> billing" in shown


@pytest.mark.slow
def test_fit_categories_merges_and_leaves_out_queues_through_a_label_map(tmp_path, monkeypatch, capsys):
    queues = {"payments EU": "payments", "payments US": "payments", "deliveries": "deliveries", "logins": "logins"}
    rows = [
        {"body": f"{QUEUES[ours][k % 3]}, order {1000 + 100 * i + k}.", "queue": theirs}
        for i, (theirs, ours) in enumerate(queues.items())
        for k in range(8)
    ] + [{"body": f"Cheap watches, offer {k}", "queue": "spam"} for k in range(6)]
    history = tmp_path / "history.json"  # one JSON array, as an export writes it
    history.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    head = tmp_path / "head.npz"
    args = ["fit-categories", "--from", str(history), "--label-column", "queue", "--out", str(head)]

    assert main([*args, "--label-map", "payments EU=payments,payments US=payments,spam=-", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["labels"] == ["deliveries", "logins", "payments"]  # merged, spam left out, the rest kept
    assert fitted["labels_read"] == {
        "read_as": {"payments EU": "payments", "payments US": "payments"},
        "left_out": {"spam": 6},
    }
    assert fitted["tickets"] == 32 and fitted["held_out"]["per_label"]["payments"]["n"] == 16

    assert main([*args, "--label-map", "payments EU=payments,*=-"]) == 2  # only one label left: refused
    assert "need at least two labels" in capsys.readouterr().err
    assert main([*args, "--label-map", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
