"""`python -m inference eval`: the configured category head on a labelled set, with the plain baseline beside it.

Sets: `eval` (the held-out evaluation set, inference/data/eval_tickets.jsonl, never used for tuning), `dev`,
or any JSON Lines file of {"id", "subject", "body", "label"[, "lang"]} rows (e.g.
../shared/eval/real_bitext.jsonl), or a CSV/TSV file with those columns and a header row (id, subject and
lang optional). Tickets are read exactly as the pipeline reads them
(inference.mailtext.ticket_text) and scored by the head the pipeline would build.

Never against a model that contains the ticket:
- default head (fitted on INFERENCE_FEWSHOT + the taxonomy): when the set shares tickets with that training
  data (`dev` does: it is part of the bundled training data), it is scored by 5-fold cross-validation: each
  fold by a head fitted without that fold's tickets, with its own out-of-fold temperature;
- a fitted head (INFERENCE_CATEGORY_HEAD): tickets it was fitted on are left out (and counted); its
  held-out accuracy from fitting is reported by `fit-categories`.

Reported: accuracy (overall, per label, per language, and per value of --group-column when given: a help
desk's queues or a public set's intents mapped onto the labels), the confusion matrix, expected calibration error,
the uncertain share and accuracy when confident / uncertain, the unreadable share, and the plain baseline
(one description per label, the first of each label in the taxonomy, argmax cosine; its confidence a
softmax at a temperature fitted on the training tickets) on the same tickets.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from inference.category_fit import (
    DEFAULT_RECIPE,
    ece,
    fit,
    fit_temperature,
    folds,
    softmax,
    text_digest,
    unit,
)
from inference.config import Settings
from inference.errors import ConfigError
from inference.examples import DEV_SET, EVAL_SET, load_examples
from inference.label_map import describe as describe_labels_read
from inference.label_map import read as read_labels
from inference.labelled_files import Columns, looks_per_ticket

SETS = {"eval": EVAL_SET, "dev": DEV_SET}
CV_FOLDS = 5


def evaluate(
    settings: Settings,
    which: str = "eval",
    encoder=None,
    summaries: bool = False,
    columns: Columns | None = None,
    label_map: dict[str, str | None] | None = None,
) -> dict:
    """`encoder`: injected by tests (a stand-in); default the real model from `settings`. `summaries`: also
    the summary head's shares on the same tickets (`summary_shares`). `label_map`: the file's labels read as the
    head's (inference.label_map; None: left out)."""
    from inference.heads.category import (
        check_compatible,
        default_texts,
        embed,
        fitted_head,
        linear_head_for,
        model_signature,
        reembed,
        ticket_text_of,
        token_strings,
    )
    from inference.readability import unreadable_flags

    if encoder is None:
        from inference.engine.encoder import Encoder

        encoder = Encoder.from_settings(settings)
    path = SETS.get(which, which)
    if not Path(path).is_file():
        raise ConfigError(f"--set {which}: no such set (eval, dev, or a JSON Lines or CSV file of labelled tickets)")
    examples = load_examples(path, columns=columns)
    if columns is not None and columns.group:  # refused before any ticket is embedded
        _check_groups("--group-column", columns.group, [e.group for e in examples])
    if columns is not None and columns.lang:
        _check_groups("--lang-column", columns.lang, [e.lang for e in examples])
    texts = [ticket_text_of(e, encoder.max_length) for e in examples]
    digests = [text_digest(t) for t in texts]

    src = default_texts(settings, encoder.max_length) if not settings.category_head else None
    if settings.category_head:
        head = fitted_head(settings.category_head)
        check_compatible(head, model_signature(settings, encoder), settings.category_head)
        labels = head.labels
        seen = set(head.meta.get("training_digests", []))
        keep = [k for k, d in enumerate(digests) if d not in seen]
        excluded = len(examples) - len(keep)
        protocol = "held out from the fitted head" + (
            f" ({excluded} of its training tickets left out)" if excluded else ""
        )
    else:
        labels = src.labels
        excluded, keep = 0, list(range(len(examples)))
    reading = read_labels([examples[k].label for k in keep], labels, label_map or {}, str(path))
    keep = [k for k in keep if reading.to[examples[k].label] is not None]
    examples = [replace(examples[k], label=reading.to[examples[k].label]) for k in keep]
    texts = [texts[k] for k in keep]
    digests = [digests[k] for k in keep]
    if not examples:
        raise ConfigError(f"{path}: no tickets left to evaluate")
    truth = np.array([labels.index(e.label) for e in examples])
    emb = embed(encoder, texts)
    flags = np.array(
        unreadable_flags(texts, token_strings(encoder, texts)) if settings.flag_unreadable else [False] * len(texts),
        dtype=bool,
    )
    own = emb  # the plain baseline reads the tickets themselves
    glossed = np.zeros(len(texts), dtype=bool)
    if settings.reads_glosses:
        from inference.gloss import gloss, languages

        books = languages(texts, flags, extra_dir=settings.glossary_dir)
        glossed[list(books)] = True
        emb = reembed(encoder, emb, {k: gloss(texts[k], book=b) for k, b in books.items()})

    if src is not None:
        overlap = set(digests) & set(src.digests)
        if overlap:
            data = _training(settings, src, encoder)
            probs, temperature = _cross_validated(data, emb, truth, digests)
            protocol = f"{CV_FOLDS}-fold cross-validation ({len(overlap)} tickets are in the head's training data)"
        else:
            head = linear_head_for(settings, encoder)
            probs, temperature = head.probabilities(emb), head.temperature
            protocol = "held out (no ticket of this set is in the head's training data)"
            data = None
    else:
        probs, temperature = head.probabilities(emb), head.temperature
        data = None

    baseline = _baseline(settings, labels, encoder, own, src, data, set(digests))
    groups = [e.group for e in examples] if columns is not None and columns.group else None
    report = _metrics(
        labels, truth, probs, flags, settings.uncertain_below, [e.lang for e in examples], baseline, groups
    )
    if groups is not None:
        report["group_column"] = columns.group
    if settings.category_head:
        report["head_fit"] = fit_time(head.meta)
    report.update(
        {
            "set": str(path),
            "head": settings.category_head
            or "default (fitted on INFERENCE_FEWSHOT + taxonomy descriptions"
            + (", anchored to their first ones)" if DEFAULT_RECIPE.anchor else ")"),
            "fewshot": settings.fewshot_file or "bundled",
            "protocol": protocol,
            "excluded_training_tickets": excluded,
            "temperature": round(float(temperature), 4),
            "uncertain_below": settings.uncertain_below,
            "glossed_share": _share(glossed),
            "labels_read": reading.notes(),
        }
    )
    if summaries:
        from inference.predictor import build_predictor
        from inference.summary_eval import summary_shares

        both = settings.replace(heads=("category", "summary"), summary="extractive")
        predictor = build_predictor(both, encoder, version="eval")
        report["summaries"] = summary_shares(predictor, [(e.subject, e.body) for e in examples])
    return report


def fit_time(meta: dict) -> dict:
    """What `fit-categories` measured when it fitted the head (numbers only): compare it with this set."""
    fitted = meta.get("report") or {}
    held = fitted.get("held_out") or {}
    return {
        "tickets": fitted.get("distinct_texts_used", meta.get("training_tickets")),
        "held_out_accuracy": held.get("accuracy"),
        "protocol": held.get("protocol"),
        "l2": (fitted.get("l2") or {}).get("value", (meta.get("recipe") or {}).get("l2")),
        "fitted_at": fitted.get("fitted_at"),
    }


def _training(settings, src, encoder):
    from inference.category_fit import TrainingData
    from inference.heads.category import embed, texts_as_read

    vectors = embed(encoder, texts_as_read(settings, encoder, src.texts) + src.descriptions)
    n = len(src.texts)
    return TrainingData(src.labels, vectors[:n], src.y, vectors[n:], src.dy, src.digests)


def _cross_validated(data, emb: np.ndarray, truth: np.ndarray, digests: list[str]) -> tuple[np.ndarray, float]:
    """Each fold of the set scored by the recipe fitted on the training data without that fold's tickets
    (temperature from that head's own out-of-fold logits). Returns (probabilities, median temperature)."""
    f = folds(truth, CV_FOLDS, seed=0)
    probs = np.zeros((len(truth), len(data.labels)))
    temps = []
    train_digests = np.array(data.digests)
    for j in range(CV_FOLDS):
        test = f == j
        if not test.any():
            continue
        held = {d for d, t in zip(digests, test, strict=True) if t}
        head, _ = fit(data.without(np.isin(train_digests, list(held))), DEFAULT_RECIPE)
        probs[test] = head.probabilities(emb[test])
        temps.append(head.temperature)
    return probs, float(np.median(temps))


def _baseline(settings, labels, encoder, emb, src, data, evaluated: set[str]) -> dict | None:
    """One description per label (the first), argmax cosine; temperature fitted on the training tickets
    that are not in the evaluated set. None when the head's labels are not all in the taxonomy."""
    from inference.heads.category import default_texts, embed
    from inference.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(settings)
    if not set(labels) <= set(taxonomy):
        return None
    D1 = unit(embed(encoder, [taxonomy[label][0] for label in labels]))
    src = src or default_texts(settings, encoder.max_length)
    if data is not None:
        X, y, digests = data.X, data.y, data.digests
    else:
        X, y, digests = embed(encoder, src.texts), src.y, src.digests
    keep = [k for k, d in enumerate(digests) if d not in evaluated and src.labels[y[k]] in labels]
    if keep:
        remap = np.array([labels.index(src.labels[y[k]]) for k in keep])
        temperature = fit_temperature(X[keep] @ D1.T, remap)
    else:
        temperature = 0.05
    return {"probs": softmax((emb @ D1.T) / temperature), "temperature": temperature}


def _metrics(labels, truth, probs, flags, uncertain_below, langs, baseline, groups=None) -> dict:
    pred = probs.argmax(axis=1)
    conf = probs.max(axis=1)
    correct = pred == truth
    uncertain = (conf < uncertain_below) | flags
    confident = ~uncertain
    confusion = np.zeros((len(labels), len(labels)), dtype=int)
    np.add.at(confusion, (truth, pred), 1)
    per_label = {}
    for k, label in enumerate(labels):
        tp, n, predicted = confusion[k, k], int(confusion[k].sum()), int(confusion[:, k].sum())
        precision = tp / predicted if predicted else None  # None: never predicted / not in this set
        recall = tp / n if n else None
        f1 = 2 * precision * recall / (precision + recall) if precision and recall else (0.0 if n else None)
        per_label[label] = {
            "precision": None if precision is None else round(float(precision), 3),
            "recall": None if recall is None else round(float(recall), 3),
            "f1": None if f1 is None else round(float(f1), 3),
            "n": n,
        }
    base_correct = None
    out_baseline = None
    if baseline is not None:
        bprobs = baseline["probs"]
        base_correct = bprobs.argmax(axis=1) == truth
        bconf = bprobs.max(axis=1)
        out_baseline = {
            "accuracy": _share(base_correct),
            "expected_calibration_error": round(ece(bconf, base_correct), 4),
            "temperature": round(float(baseline["temperature"]), 4),
        }
    lang = np.array([x or "unknown" for x in langs])
    per_language = {}
    for name, n in Counter(lang.tolist()).most_common():
        m = lang == name
        per_language[name] = {
            "n": int(n),
            "accuracy": _share(correct[m]),
            "baseline_accuracy": _share(base_correct[m]) if base_correct is not None else None,
            "unreadable_share": _share(flags[m]),
            "uncertain_share": _share(uncertain[m]),
            "accuracy_when_confident": _share(correct[m & confident]) if (m & confident).any() else None,
        }
    out = {
        "tickets": int(len(truth)),
        "labels": list(labels),
        "accuracy": _share(correct),
        "baseline": out_baseline,
        "per_label": per_label,
        "per_language": per_language,
        "confusion": confusion.tolist(),
        "expected_calibration_error": round(ece(conf, correct), 4),
        "mean_confidence": round(float(conf.mean()), 4) if len(conf) else None,
        "uncertain_share": _share(uncertain),
        "unreadable_share": _share(flags),
        "accuracy_when_confident": _share(correct[confident]) if confident.any() else None,
        "accuracy_when_uncertain": _share(correct[uncertain]) if uncertain.any() else None,
    }
    if groups is not None:
        out["per_group"] = _per_group(labels, truth, pred, correct, confident, base_correct, groups)
    return out


def _check_groups(option: str, column: str, groups: list) -> None:
    """A group or language column holds queues, intents or language codes, not a value per ticket (ticket text,
    ids): refused, by counts only, so that no ticket's text is printed as a group."""
    if looks_per_ticket(groups):
        what = "language codes" if option == "--lang-column" else "queues, types or intents"
        raise ConfigError(
            f"{option} {column!r} has {len(set(groups))} distinct values among {len(groups)} tickets: name a "
            f"column of {what} (a few values shared by many tickets)"
        )


def _per_group(labels, truth, pred, correct, confident, base_correct, groups) -> dict:
    """Per value of the group column, most tickets first: n, the label most of them carry, accuracy (and the
    baseline's), the uncertain share, accuracy when confident, and the wrong label chosen most often."""
    groups = np.array(groups)
    out = {}
    for name, n in sorted(Counter(groups.tolist()).items(), key=lambda kv: (-kv[1], kv[0])):
        m = groups == name
        wrong = Counter(labels[k] for k in pred[m & ~correct]).most_common(1)
        out[name] = {
            "n": int(n),
            "label": labels[Counter(truth[m].tolist()).most_common(1)[0][0]],
            "accuracy": _share(correct[m]),
            "baseline_accuracy": _share(base_correct[m]) if base_correct is not None else None,
            "uncertain_share": _share(~confident[m]),
            "accuracy_when_confident": _share(correct[m & confident]) if (m & confident).any() else None,
            "most_often_wrong_as": wrong[0][0] if wrong else None,
        }
    return out


def _share(mask: np.ndarray) -> float | None:
    return round(float(np.mean(mask)), 4) if len(mask) else None


def render(report: dict) -> str:
    labels = report["labels"]
    width = max(12, max(len(x) for x in labels))
    base = report["baseline"]
    lines = [
        f"{report['tickets']} tickets from {report['set']}",
        f"head: {report['head']}; {report['protocol']}",
        *_fit_time_line(report.get("head_fit")),
        *describe_labels_read(report.get("labels_read") or {}),
        f"accuracy: {report['accuracy']:.3f}"
        + (f"   (plain baseline, one description per label: {base['accuracy']:.3f})" if base else ""),
        f"expected calibration error: {report['expected_calibration_error']:.3f}"
        + (f"   (baseline {base['expected_calibration_error']:.3f})" if base else "")
        + f"; temperature {report['temperature']}"
        + _direction(report.get("mean_confidence"), report["accuracy"]),
        f"uncertain (confidence < {report['uncertain_below']} or unreadable): {report['uncertain_share']:.1%} of tickets"
        f" ({report['unreadable_share']:.1%} unreadable, {report.get('glossed_share') or 0:.1%} read through a gloss);"
        f" accuracy when confident {_fmt(report['accuracy_when_confident'])},"
        f" when uncertain {_fmt(report['accuracy_when_uncertain'])}",
        "",
        f"{'language':<{width}}  n      accuracy  baseline  unreadable  uncertain  confident acc.",
    ]
    for name, m in report["per_language"].items():
        lines.append(
            f"{name:<{width}}  {m['n']:<5}  {_fmt(m['accuracy']):<8}  {_fmt(m['baseline_accuracy']):<8}  "
            f"{_fmt(m['unreadable_share']):<10}  {_fmt(m['uncertain_share']):<9}  {_fmt(m['accuracy_when_confident'])}"
        )
    if report.get("summaries"):
        m = report["summaries"]
        lines += [
            "",
            f"summaries ({m['summaries']}): open with a greeting/thanks {m['greeting_first']:.3f}, only filler"
            f" {m['only_filler']:.3f}, open in a quoted reply/signature {m['quoted_first']:.3f};"
            f" category of the summary alone = the ticket's {m['category_agreement']:.3f}",
        ]
    if report.get("per_group"):
        groups = report["per_group"]
        gw = max(width, max(len(g) for g in groups))
        lines += [
            "",
            f"{report['group_column']:<{gw}}  n      label             accuracy  baseline  uncertain  confident acc."
            "  most often wrong as",
        ]
        for name, m in groups.items():
            lines.append(
                f"{name:<{gw}}  {m['n']:<5}  {m['label']:<16}  {_fmt(m['accuracy']):<8}  "
                f"{_fmt(m['baseline_accuracy']):<8}  {_fmt(m['uncertain_share']):<9}  "
                f"{_fmt(m['accuracy_when_confident']):<14}  {m['most_often_wrong_as'] or '-'}"
            )
    lines += ["", f"{'label':<{width}}  precision  recall  f1     n"]
    for label in labels:
        m = report["per_label"][label]
        lines.append(
            f"{label:<{width}}  {_fmt(m['precision']):<9}  {_fmt(m['recall']):<6}  {_fmt(m['f1']):<5}  {m['n']}"
        )
    lines += ["", "confusion (rows: truth, columns: predicted, in the order above):"]
    lines += [
        f"{label:<{width}}  " + " ".join(f"{n:4d}" for n in row)
        for label, row in zip(labels, report["confusion"], strict=True)
    ]
    return "\n".join(lines)


def _fit_time_line(fit: dict | None) -> list[str]:
    if not fit or fit.get("held_out_accuracy") is None:
        return []
    return [
        f"when fitted ({fit.get('fitted_at') or 'time not recorded'}): {fit['tickets']} tickets, held-out accuracy"
        f" {fit['held_out_accuracy']:.3f} ({fit.get('protocol') or 'cross-validation'})"
        + (f", L2 penalty {fit['l2']:g}" if fit.get("l2") is not None else "")
    ]


def _direction(mean_confidence: float | None, accuracy: float | None) -> str:
    """Which way the head errs: the mean confidence beside the accuracy it should match."""
    if mean_confidence is None or accuracy is None:
        return ""
    way = "overconfident" if mean_confidence > accuracy else "underconfident" if mean_confidence < accuracy else ""
    return f"; mean confidence {mean_confidence:.3f}" + (f" ({way})" if way else "")


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"
