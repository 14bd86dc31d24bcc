"""`python -m inference eval`: the category head on a labelled set: accuracy, per label, confusion, calibration.

The default set is the held-out evaluation set (inference/data/eval_tickets.jsonl), never used for
tuning. The head is built exactly as the pipeline builds it (taxonomy + few-shot examples).
"""

from __future__ import annotations

import numpy as np

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.examples import DEV_SET, EVAL_SET, load_examples
from inference.heads.category import classifier_for
from inference.taxonomy import load_taxonomy

SETS = {"eval": EVAL_SET, "dev": DEV_SET}


def evaluate(settings: Settings, which: str = "eval") -> dict:
    labels = list(load_taxonomy(settings))
    examples = load_examples(SETS.get(which, which), set(labels))
    encoder = Encoder.from_settings(settings)
    head = classifier_for(settings, encoder)
    out = encoder.encode([e.text for e in examples])
    got = head(out.embeddings)
    truth = np.array([labels.index(e.label) for e in examples])
    pred = np.array([labels.index(x) for x in got.labels])
    confusion = np.zeros((len(labels), len(labels)), dtype=int)
    np.add.at(confusion, (truth, pred), 1)
    per_label = {}
    for k, label in enumerate(labels):
        tp = confusion[k, k]
        precision = tp / confusion[:, k].sum() if confusion[:, k].sum() else 0.0
        recall = tp / confusion[k].sum() if confusion[k].sum() else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_label[label] = {
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "f1": round(f1, 3),
            "n": int(confusion[k].sum()),
        }
    correct = pred == truth
    confident = ~got.uncertain
    return {
        "set": str(SETS.get(which, which)),
        "tickets": len(examples),
        "fewshot": settings.fewshot_file or "bundled",
        "accuracy": round(float(correct.mean()), 4),
        "per_label": per_label,
        "labels": labels,
        "confusion": confusion.tolist(),
        "temperature": round(head.temperature, 4),
        "expected_calibration_error": round(_ece(got.confidence, correct), 4),
        "uncertain_share": round(float(got.uncertain.mean()), 4),
        "accuracy_when_confident": round(float(correct[confident].mean()), 4) if confident.any() else None,
        "accuracy_when_uncertain": round(float(correct[~confident].mean()), 4) if (~confident).any() else None,
    }


def _ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            total += inside.mean() * abs(confidence[inside].mean() - correct[inside].mean())
    return float(total)


def render(report: dict) -> str:
    labels = report["labels"]
    width = max(len(x) for x in labels)
    lines = [
        f"{report['tickets']} tickets from {report['set']} (few-shot examples: {report['fewshot']})",
        f"accuracy: {report['accuracy']:.3f}",
        "",
        f"{'label':<{width}}  precision  recall  f1     n",
    ]
    for label in labels:
        m = report["per_label"][label]
        lines.append(f"{label:<{width}}  {m['precision']:<9.3f}  {m['recall']:<6.3f}  {m['f1']:<5.3f}  {m['n']}")
    lines += ["", "confusion (rows: truth, columns: predicted, in the order above):"]
    lines += [
        f"{label:<{width}}  " + " ".join(f"{n:4d}" for n in row)
        for label, row in zip(labels, report["confusion"], strict=True)
    ]
    lines += [
        "",
        f"confidence: temperature {report['temperature']}, expected calibration error {report['expected_calibration_error']}",
        f"uncertain: {report['uncertain_share']:.1%} of tickets; accuracy when confident {report['accuracy_when_confident']},"
        f" when uncertain {report['accuracy_when_uncertain']}",
    ]
    return "\n".join(lines)
