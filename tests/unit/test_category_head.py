"""The category head without the model (a stand-in encoder): the linear recipe is deterministic and cached,
its file is checked, unreadable tickets are `uncertain`, help desks fit their own head (JSON Lines or a
table) and it enters the model version; `eval` never scores a ticket with a head fitted on it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import Counter

import numpy as np
import pytest
import sqlalchemy as sa

import inference.category_fit as category_fit
from inference.category_fit import (
    L2_CANDIDATES,
    LinearHead,
    Recipe,
    TrainingData,
    calibrated_oof,
    choose_l2,
    fit,
    fit_logreg,
    fit_temperature,
    folds,
    held_out_loss,
)
from inference.config import Settings
from inference.engine.standin import StandInEncoder
from inference.errors import ConfigError
from inference.evaluate import evaluate
from inference.evaluate import render as render_eval
from inference.fit_categories import Row, fit_rows, read_file, read_table
from inference.fit_categories import render as render_fit
from inference.heads.category import HEAD, classifier_for, head_labels, linear_head_for
from inference.labelled_files import Columns
from inference.modelinfo import heads_fingerprint
from inference.pipeline import run_window
from inference.predictor import build_predictor
from inference.store.db import make_engine, writing
from inference.store.schema import create_schema, ticket_results, tickets
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
QUEUES = {
    "payments_queue": ["charged twice on my card", "refund the invoice amount", "payment declined at checkout"],
    "logistics_queue": ["parcel never arrived", "tracking number shows nothing", "package delivered damaged"],
    "identity_queue": ["cannot log in to my account", "password reset email missing", "two factor code rejected"],
}


def queue_rows(n_each: int = 12) -> list[Row]:
    rows = []
    for label, phrases in QUEUES.items():
        for k in range(n_each):
            rows.append(Row(f"ticket {k}", f"{phrases[k % 3]} order {k} thanks", label))
    return rows


def toy_data(seed: int = 0, n: int = 90, noise: float = 0.8) -> TrainingData:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((3, 16))
    y = np.arange(n) % 3
    X = centers[y] + noise * rng.standard_normal((n, 16))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return TrainingData(["a", "b", "c"], X, y, X[:0], y[:0], [f"d{k}" for k in range(n)])


def test_the_fit_is_deterministic_and_calibrated_on_out_of_fold_scores():
    first, oof = fit(toy_data())
    again, _ = fit(toy_data())
    assert first.fingerprint() == again.fingerprint()
    assert (oof.argmax(axis=1) == toy_data().y).mean() > 0.9
    assert 0.005 <= first.temperature <= 5.0
    probs = first.probabilities(toy_data(seed=0).X)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)


def test_logistic_regression_separates_and_folds_are_stratified():
    data = toy_data()
    W, b = fit_logreg(data.X, data.y, 3, l2=0.003)
    assert ((data.X @ W + b).argmax(axis=1) == data.y).mean() > 0.95
    f = folds(data.y, 5)
    for j in range(5):
        assert sorted(np.bincount(data.y[f == j], minlength=3)) == [6, 6, 6]


def test_a_prior_starts_from_and_shrinks_towards_the_mean_descriptions():
    data = toy_data()
    rng = np.random.default_rng(3)
    D = data.X[:6] + 0.1 * rng.standard_normal((6, 16))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    data = dataclasses.replace(data, D=D, dy=data.y[:6])
    assert Recipe().key() == Recipe(prior=0.0).key() and "prior=5" in Recipe(prior=5).key()
    means = np.stack([D[data.dy == k].mean(axis=0) for k in range(3)])
    W0 = 5 * (means / np.linalg.norm(means, axis=1, keepdims=True)).T
    start, _ = fit(data, Recipe(prior=5, iters=0, folds=3, anchor=0))
    np.testing.assert_allclose(start.W, W0, atol=1e-12)  # no step taken: the prior itself
    plain, _ = fit(data, Recipe(folds=3, anchor=0))
    strong, _ = fit(data, Recipe(prior=5, l2=10.0, folds=3, anchor=0))
    loose, _ = fit(data, Recipe(prior=5, folds=3, anchor=0))
    assert np.linalg.norm(strong.W - W0) < np.linalg.norm(loose.W - W0) < np.linalg.norm(plain.W - W0)
    assert (loose.probabilities(data.X).argmax(axis=1) == data.y).mean() > 0.9


def with_descriptions(data: TrainingData, seed: int = 3) -> TrainingData:
    rng = np.random.default_rng(seed)
    D = data.X[:6] + 0.3 * rng.standard_normal((6, data.X.shape[1]))
    D /= np.linalg.norm(D, axis=1, keepdims=True)
    return dataclasses.replace(data, D=D, dy=data.y[:6])


def test_the_anchor_adds_the_plain_baselines_cosine_logits_at_the_two_models_scale():
    data = with_descriptions(toy_data())
    assert "anchor=0.25" in Recipe().key() and "anchor" not in Recipe(anchor=0).key()
    plain, plain_oof = fit(data, Recipe(folds=3, anchor=0))
    anchored, oof = fit(data, Recipe(folds=3, anchor=0.5))
    D1 = data.D[:3]  # each label's first description (dy = 0, 1, 2, 0, 1, 2)
    cosines = data.X @ D1.T
    kappa = 0.5 * fit_temperature(plain_oof, data.y) / fit_temperature(cosines, data.y)
    assert plain.meta["anchor_weight"] == 0 and anchored.meta["anchor_weight"] == pytest.approx(kappa)
    assert kappa > 0
    np.testing.assert_allclose(anchored.W, plain.W + kappa * D1.T, atol=1e-12)  # still one linear map
    np.testing.assert_allclose(anchored.b, plain.b)
    np.testing.assert_allclose(oof, plain_oof + kappa * cosines, atol=1e-12)  # what the temperature is fitted on
    assert anchored.temperature == fit_temperature(oof, data.y)
    np.testing.assert_allclose(anchored.logits(data.X), plain.logits(data.X) + kappa * cosines, atol=1e-9)


def test_no_anchor_without_a_description_for_every_label_or_without_tickets():
    data = with_descriptions(toy_data())
    partial = dataclasses.replace(data, D=data.D[:2], dy=data.dy[:2])  # label "c" has no description
    head, _ = fit(partial, Recipe(folds=3, anchor=0.5))
    plain, _ = fit(partial, Recipe(folds=3, anchor=0))
    assert head.meta["anchor_weight"] == 0 and head.fingerprint() == plain.fingerprint()
    zero_shot = dataclasses.replace(data, X=data.X[:0], y=data.y[:0], digests=[])
    head, _ = fit(zero_shot, Recipe(folds=3, anchor=0.5))
    assert head.meta["anchor_weight"] == 0 and head.meta["recipe"]["anchor"] == 0


@pytest.mark.parametrize(
    "best, tried",
    [
        (1e-6, [3e-3, 3e-4, 3e-5, 3e-6]),  # many tickets: down to the weakest penalty
        (2e-4, [3e-3, 3e-4, 3e-5]),  # down until the loss rises again
        (3e-3, [3e-3, 3e-4, 3e-2]),  # neither way helps: the default's penalty
        (1.0, [3e-3, 3e-4, 3e-2]),  # few, noisy tickets: the stronger penalty
    ],
)
def test_the_l2_search_walks_from_the_default_towards_a_lower_held_out_loss(monkeypatch, best, tried):
    # the search alone: each candidate's out-of-fold loss is given (its distance to `best`, in decades)
    assert L2_CANDIDATES == (3e-2, 3e-3, 3e-4, 3e-5, 3e-6)
    monkeypatch.setattr(category_fit, "calibrated_oof", lambda d, r: (np.full((len(d.y), 3), r.l2), 0.0, None))
    monkeypatch.setattr(category_fit, "held_out_loss", lambda oof, y: abs(np.log10(oof[0, 0] / best)))
    seen = []
    recipe, trials, scored = choose_l2(toy_data(), Recipe(folds=3), progress=seen.append)
    assert [t["l2"] for t in trials] == tried and seen == trials
    assert recipe.l2 == min(tried, key=lambda c: abs(np.log10(c / best))) and recipe.folds == 3
    assert scored[0][0, 0] == recipe.l2  # the chosen candidate's own scores


def test_an_l2_search_whose_losses_are_not_numbers_keeps_the_default(monkeypatch):
    monkeypatch.setattr(category_fit, "calibrated_oof", lambda d, r: (np.full((len(d.y), 3), r.l2), 0.0, None))
    monkeypatch.setattr(category_fit, "held_out_loss", lambda oof, y: float("nan"))
    recipe, trials, scored = choose_l2(toy_data(), Recipe(folds=3))
    assert recipe.l2 == 0.003 and [t["l2"] for t in trials] == [3e-3, 3e-4, 3e-2]
    assert scored[0][0, 0] == 0.003  # its scores, computed again: none was kept


def test_the_chosen_l2_has_the_lowest_held_out_loss_and_its_scores_are_the_fits_own():
    data = with_descriptions(toy_data(n=150, noise=1.6))  # anchored, as taxonomy labels are
    recipe, trials, scored = choose_l2(data, Recipe(folds=3))
    assert len(trials) >= 2
    losses = {}
    for t in trials:
        oof, _, _ = calibrated_oof(data, dataclasses.replace(Recipe(folds=3), l2=t["l2"]))
        losses[t["l2"]] = held_out_loss(oof, data.y)
        assert t["loss"] == pytest.approx(losses[t["l2"]], abs=1e-4)
        assert t["accuracy"] == pytest.approx((oof.argmax(axis=1) == data.y).mean(), abs=1e-4)
    assert recipe.l2 == min(losses, key=losses.get)
    reused, oof = fit(data, recipe, scored=scored)
    fresh, fresh_oof = fit(data, recipe)
    assert reused.fingerprint() == fresh.fingerprint() and reused.meta["recipe"]["l2"] == recipe.l2
    np.testing.assert_array_equal(oof, fresh_oof)
    with pytest.raises(ValueError):
        choose_l2(data, Recipe(folds=3), candidates=(0.003, 0.0))


def test_a_head_file_round_trips_and_a_changed_file_is_refused(tmp_path):
    head, _ = fit(toy_data(), Recipe(folds=3), {"model": {"weights": "w"}})
    path = tmp_path / "head.npz"
    head.save(path)
    loaded = LinearHead.load(path)
    assert loaded.fingerprint() == head.fingerprint() and loaded.labels == ["a", "b", "c"]
    np.testing.assert_array_equal(loaded.W, head.W)
    tampered = dataclasses.replace(head, temperature=head.temperature * 2)
    tampered.meta = {**head.meta}
    tampered.save(path)
    data = dict(np.load(path))
    data["meta"] = np.array(json.dumps({**json.loads(str(data["meta"])), "fingerprint": head.fingerprint()}))
    with path.open("wb") as fh:
        np.savez(fh, **data)
    with pytest.raises(ConfigError, match="damaged"):
        LinearHead.load(path)
    (tmp_path / "junk.npz").write_bytes(b"not a head")
    with pytest.raises(ConfigError, match="not a fitted head"):
        LinearHead.load(tmp_path / "junk.npz")


def test_the_default_head_is_fitted_once_then_read_from_the_cache(tmp_path):
    settings = Settings(device="cpu", cache_dir=str(tmp_path / "cache"))
    encoder = StandInEncoder()
    first = classifier_for(settings, encoder)
    assert first.labels[:2] == ["billing", "account_access"]
    (cached,) = (tmp_path / "cache").glob("category-head-*.npz")
    fresh = StandInEncoder()
    calls = []
    real = fresh.encode
    fresh.encode = lambda texts: calls.append(len(texts)) or real(texts)
    again = linear_head_for(settings, fresh)
    assert calls == [] and again.fingerprint() == first.head.fingerprint()

    examples = tmp_path / "examples.jsonl"
    examples.write_text(
        "\n".join(
            json.dumps({"id": f"x{k}", "subject": "", "body": f"{p} {k}", "label": label})
            for label, p in [("billing", "charged twice"), ("shipping", "parcel lost")]
            for k in range(6)
        )
    )
    edited = dataclasses.replace(settings, fewshot_file=str(examples))
    linear_head_for(edited, fresh)
    assert calls, "other examples: fitted again"
    assert len(list((tmp_path / "cache").glob("category-head-*.npz"))) == 2 and cached.exists()
    assert heads_fingerprint(edited) != heads_fingerprint(settings)


def test_unreadable_tickets_are_uncertain_and_the_threshold_is_0_8():
    settings = Settings(device="cpu", cache_dir="")
    assert settings.uncertain_below == 0.8 and settings.flag_unreadable
    encoder = StandInEncoder()
    loaded = HEAD.build(settings, encoder)
    texts = [
        "I was charged twice for my plan this month, please refund the duplicate payment.",
        "Hola, me han cobrado dos veces este mes y quiero que me devuelvan el dinero por favor.",
    ]
    from inference.heads.base import EncodedChunk

    out = loaded(EncodedChunk(texts, encoder.encode(texts).embeddings))
    assert out.values[1]["category_uncertain"] is True
    first = out.values[0]
    assert first["category_uncertain"] == (first["category_confidence"] < 0.8)
    off = dataclasses.replace(settings, flag_unreadable=False)
    assert heads_fingerprint(off) != heads_fingerprint(settings)
    assert heads_fingerprint(dataclasses.replace(settings, uncertain_below=0.5)) != heads_fingerprint(settings)


def test_the_category_and_summary_heads_read_a_chunk_s_languages_once_and_gloss_what_is_flagged():
    from inference.heads.base import EncodedChunk
    from inference.heads.summary import HEAD as SUMMARY
    from inference.textprep import sentence_spans

    class Counting(StandInEncoder):
        calls: list[int] = []
        encoded: list[str] = []

        def token_strings(self, texts):
            self.calls.append(len(texts))
            return [[] for _ in texts]

        def encode(self, texts, *args, **kwargs):
            self.encoded.extend(texts)
            return super().encode(texts, *args, **kwargs)

    settings = Settings(device="cpu", cache_dir="", heads=("category", "summary"))
    encoder = Counting()
    heads = [HEAD.build(settings, encoder), SUMMARY.build(settings, encoder)]
    texts = [
        "I was charged twice for my plan this month. Please refund the duplicate payment.",
        "Hola, me han cobrado dos veces este mes. Quiero que me devuelvan el dinero por favor.",
    ]
    spans = [sentence_spans(t) for t in texts]
    chunk = EncodedChunk(
        texts,
        encoder.encode(texts).embeddings,
        spans,
        [encoder.encode([t[a:b] for a, b in s]).embeddings for t, s in zip(texts, spans, strict=True)],
    )
    encoder.calls.clear()
    encoder.encoded.clear()
    out = [head(chunk) for head in heads]
    assert encoder.calls == [2]  # the readability of the chunk, once for both heads
    assert out[0].values[1]["category_uncertain"] and out[1].values[1]["summary"] in texts[1]
    assert any("twice" in t for t in encoder.encoded)  # the Spanish ticket was embedded from its gloss
    assert not any(t.startswith("I was charged") for t in encoder.encoded)  # the English one was not again


def test_a_help_desk_fits_its_own_queues_from_json_lines_and_runs_them(tmp_path):
    path = tmp_path / "history.jsonl"
    rows = queue_rows()
    lines = [json.dumps({"subject": r.subject, "body": r.body, "queue": r.label}) for r in rows]
    lines += [
        json.dumps({"subject": "x", "body": "no queue"}),
        json.dumps({"subject": "y", "body": "z", "queue": "rare"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    read = list(read_file(path, Columns(label="queue")))
    assert len(read) == len(rows) + 1  # the unlabelled row is skipped
    settings = Settings(device="cpu", cache_dir="")
    encoder = StandInEncoder()
    result = fit_rows(settings, encoder, read, min_per_label=5)
    summary = result.summary
    assert summary["labels"] == sorted(QUEUES) and summary["dropped_labels"] == {"rare": 1}
    assert summary["held_out"]["accuracy"] > 0.9 and summary["descriptions_used"] == 0
    assert summary["anchored"] is False  # queues of its own have no descriptions to anchor to
    assert summary["l2"]["chosen"] and summary["l2"]["value"] == result.head.meta["recipe"]["l2"]
    assert summary["l2"]["value"] in [t["l2"] for t in summary["l2"]["tried"]]
    assert "chosen by the same cross-validation" in render_fit(summary)
    counts = Counter(r.label for r in read if r.label in summary["labels"])  # the floor accuracy is read against
    majority = summary["held_out"]["most_common_label_share"]
    assert majority == round(max(counts.values()) / sum(counts.values()), 4) < summary["held_out"]["accuracy"]
    assert f"(the most common label alone: {majority:.3f})" in render_fit(summary)
    assert "warning" not in render_fit(summary)
    guessing = {**summary, "held_out": {**summary["held_out"], "accuracy": majority}}  # labels apart from the text
    assert "do not follow the tickets' text" in render_fit(guessing)
    fixed = fit_rows(settings, encoder, read, recipe=Recipe(l2=0.01), choose=False)
    assert fixed.summary["l2"] == {"value": 0.01, "chosen": False, "tried": []}
    assert fixed.head.meta["recipe"]["l2"] == 0.01 and "L2 penalty 0.01 (--l2)" in render_fit(fixed.summary)
    head_file = tmp_path / "head.npz"
    result.head.save(head_file)

    # used by the pipeline: its labels are the taxonomy, its fingerprint part of the model version
    db = tmp_path / "t.db"
    engine = make_engine(f"sqlite:///{db}")
    create_schema(engine, with_demo_source=True)
    at = WINDOW.start + dt.timedelta(hours=1)
    with writing(engine) as conn:
        conn.execute(
            sa.insert(tickets),
            [
                dict(ticket_id=1, subject="Lost", body="my parcel never arrived", created_at=at, updated_at=at),
                dict(ticket_id=2, subject="Login", body="password reset email missing", created_at=at, updated_at=at),
            ],
        )
    custom = Settings(db_url=f"sqlite:///{db}", device="cpu", cache_dir="", category_head=str(head_file))
    assert head_labels(custom) == sorted(QUEUES)
    assert heads_fingerprint(custom) != heads_fingerprint(dataclasses.replace(custom, category_head=None))
    summary = run_window(custom, "r1", WINDOW, predictor=build_predictor(custom, encoder))
    assert summary["succeeded"] == 2
    with engine.connect() as conn:
        got = {str(r.ticket_id): r.category for r in conn.execute(sa.select(ticket_results))}
    assert got == {"1": "logistics_queue", "2": "identity_queue"}

    # eval leaves the head's own training tickets out
    train_set = tmp_path / "train_set.jsonl"
    train_set.write_text(
        "\n".join(
            json.dumps({"id": str(k), "subject": r.subject, "body": r.body, "label": r.label})
            for k, r in enumerate(rows)
        )
        + "\n"
        + json.dumps({"id": "new", "subject": "", "body": "refund the duplicate charge", "label": "payments_queue"})
    )
    report = evaluate(custom, str(train_set), encoder=encoder)
    assert report["tickets"] == 1 and report["excluded_training_tickets"] == len(rows)
    fitted = result.summary
    assert report["head_fit"] == {  # what fit-categories measured, beside this set's numbers
        "tickets": fitted["distinct_texts_used"],
        "held_out_accuracy": fitted["held_out"]["accuracy"],
        "protocol": "5-fold cross-validation",
        "l2": fitted["l2"]["value"],
        "fitted_at": fitted["fitted_at"],
    }
    assert f"held-out accuracy {fitted['held_out']['accuracy']:.3f} (5-fold" in render_eval(report)
    assert report["baseline"] is None  # queue labels have no taxonomy descriptions
    engine.dispose()


def test_a_history_in_the_taxonomys_labels_is_anchored_to_its_descriptions_unless_they_are_off():
    ours = {"payments_queue": "billing", "logistics_queue": "shipping", "identity_queue": "account_access"}
    rows = [dataclasses.replace(r, label=ours[r.label]) for r in queue_rows()]
    settings = Settings(device="cpu", cache_dir="")
    anchored = fit_rows(settings, StandInEncoder(), rows)
    assert anchored.summary["anchored"] and anchored.head.meta["anchor_weight"] > 0
    assert "anchored to their first ones" in render_fit(anchored.summary)
    plain = fit_rows(settings, StandInEncoder(), rows, descriptions=False)
    assert not plain.summary["anchored"] and plain.head.meta["anchor_weight"] == 0
    assert "anchored" not in render_fit(plain.summary)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "strong"])
def test_fit_categories_refuses_an_l2_that_is_not_auto_or_a_penalty(value, capsys):
    from inference.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["fit-categories", "--from", "history.jsonl", "--l2", value])
    assert exit_.value.code == 2 and "--l2" in capsys.readouterr().err


def test_a_fitted_head_from_another_model_is_refused(tmp_path):
    settings = Settings(device="cpu", cache_dir="")
    result = fit_rows(settings, StandInEncoder(), queue_rows())
    result.head.meta["model"]["weights"] = "someone-elses-weights"
    result.head.save(tmp_path / "head.npz")
    other = dataclasses.replace(settings, category_head=str(tmp_path / "head.npz"))
    with pytest.raises(ConfigError, match="another model"):
        build_predictor(other, StandInEncoder())


def table_args(table: str, **columns):
    """fit-categories' arguments for --from-table TABLE --label-column queue."""
    values = dict(from_table=table, label_column="queue", schema=None, subject_column=None, body_column=None)
    return type("Args", (), {**values, "limit": None, **columns})()


def test_fitting_from_a_table_with_a_label_column(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'h.db'}")
    with writing(engine) as conn:
        conn.execute(sa.text("CREATE TABLE closed (subject TEXT, body TEXT, queue TEXT)"))
        conn.execute(
            sa.text("INSERT INTO closed VALUES (:s, :b, :q)"),
            [dict(s=r.subject, b=r.body, q=r.label) for r in queue_rows()] + [dict(s="a", b="b", q=None)],
        )
    engine.dispose()
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'h.db'}", device="cpu", cache_dir="")
    args = table_args("closed")
    rows = list(read_table(settings, args))
    assert len(rows) == 36 and {r.label for r in rows} == set(QUEUES)
    # a name shaped like SQL is only a name (quoted): one the table does not have, reported as such
    for label_column in ("queue; drop table closed", 'queue"; DROP TABLE closed; --'):
        args.label_column = label_column
        with pytest.raises(ConfigError, match=r"--label-column: table closed has no column \"queue"):
            list(read_table(settings, args))
    args.label_column = "queue\x00"
    with pytest.raises(ConfigError, match="--label-column 'queue\\\\x00' holds the control or invisible character"):
        list(read_table(settings, args))
    with pytest.raises(ConfigError, match='--from-table: table "closed; drop table closed" does not exist'):
        list(read_table(settings, table_args("closed; drop table closed")))
    assert len(list(read_table(settings, table_args("closed")))) == 36  # the table is still there


def test_fitting_from_a_table_whose_names_are_csv_headers(tmp_path):
    # a CSV export imported as it is: headers with spaces, a slash, umlauts and a double quote
    engine = make_engine(f"sqlite:///{tmp_path / 'h.db'}")
    with writing(engine) as conn:
        conn.execute(
            sa.text('CREATE TABLE "Closed Tickets" ("Betreff" TEXT, "Nachricht / Text" TEXT, "say ""hi""" TEXT)')
        )
        conn.execute(
            sa.text('INSERT INTO "Closed Tickets" VALUES (:s, :b, :q)'),
            [dict(s=r.subject, b=r.body, q=r.label) for r in queue_rows()],
        )
    engine.dispose()
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'h.db'}", device="cpu", cache_dir="")
    args = table_args(
        "Closed Tickets", label_column='say "hi"', subject_column="Betreff", body_column="Nachricht / Text"
    )
    rows = list(read_table(settings, args))
    assert [(r.subject, r.body, r.label) for r in rows] == [(r.subject, r.body, r.label) for r in queue_rows()]


@pytest.mark.parametrize("subject_column", ["none", "message"])
def test_fitting_from_a_table_without_a_subject_reads_the_body_alone(tmp_path, subject_column):
    # a chat or form table with one text column: `none` or the body's own column, never the text twice
    engine = make_engine(f"sqlite:///{tmp_path / 'h.db'}")
    with writing(engine) as conn:
        conn.execute(sa.text("CREATE TABLE chats (message TEXT, queue TEXT)"))
        conn.execute(sa.text("INSERT INTO chats VALUES (:b, :q)"), [dict(b=r.body, q=r.label) for r in queue_rows()])
    engine.dispose()
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'h.db'}", device="cpu", cache_dir="")
    args = table_args("chats", subject_column=subject_column, body_column="message")
    rows = list(read_table(settings, args))
    assert [(r.subject, r.body, r.label) for r in rows] == [(None, r.body, r.label) for r in queue_rows()]


def test_eval_scores_the_development_set_by_cross_validation():
    settings = Settings(device="cpu", cache_dir="")
    report = evaluate(settings, "dev", encoder=StandInEncoder())
    assert report["protocol"].startswith("5-fold cross-validation") and report["tickets"] == 240
    assert report["head"].endswith("taxonomy descriptions, anchored to their first ones)")
    assert report["baseline"]["accuracy"] is not None
    assert set(report["per_language"]) >= {"en", "de", "sv"}
    held = evaluate(settings, "eval", encoder=StandInEncoder())
    assert held["protocol"].startswith("held out") and held["tickets"] == 355
