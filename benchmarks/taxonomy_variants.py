"""Taxonomy variants (issue 14): each edit of the previous default taxonomy scored by `python -m inference eval`.

    .venv/bin/python benchmarks/taxonomy_variants.py --set dev --set ../shared/eval/real_bitext.jsonl \
        --set /tmp/banking77/train_mapped.jsonl --set /tmp/demo_labelled.jsonl --set eval \
        --set /tmp/banking77/banking77_mapped.jsonl [--variants before,V6] [--json /tmp/variants.json]

The variants are edits (drop / replace / add descriptions) of benchmarks/data/taxonomy_before_2026-12-05.json,
listed in benchmarks/data/taxonomy_variants.json. Each variant is written to a temporary INFERENCE_TAXONOMY file
and every set is scored exactly as `python -m inference eval --set SET` scores it (the default head refitted
from the bundled examples + that taxonomy; dev by 5-fold cross-validation). The rule that chose the default:
the best worst-set accuracy among dev, bitext, BANKING77's train split and demo; eval and BANKING77's test
split are printed, not used to choose (BENCHMARKS.md says which of them are not blind).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

BEFORE = HERE / "data" / "taxonomy_before_2026-12-05.json"
VARIANTS = HERE / "data" / "taxonomy_variants.json"


def apply(base: dict[str, list[str]], edits: dict) -> dict[str, list[str]]:
    """`base` with `edits` applied: {"drop": {label: [text]}, "replace": {label: [[old, new]]},
    "add": {label: [text]}}; an edit naming a description that is not there is an error."""
    out = {label: list(texts) for label, texts in base.items()}
    for label, texts in edits.get("drop", {}).items():
        for text in texts:
            out[label].remove(text)
    for label, pairs in edits.get("replace", {}).items():
        for old, new in pairs:
            out[label][out[label].index(old)] = new
    for label, texts in edits.get("add", {}).items():
        out[label].extend(texts)
    return out


def summary_line(name: str, which: str, r: dict) -> str:
    """One report on one line: accuracy, ECE, confident accuracy, uncertain share, mean confidence, baseline."""
    return (
        f"{name:12s} {Path(which).stem[:24]:24s} accuracy {r['accuracy']:.3f}  "
        f"ECE {r['expected_calibration_error']:.3f}  "
        f"confident {r['accuracy_when_confident'] or float('nan'):.3f}  "
        f"uncertain {r['uncertain_share']:.3f}  mean conf {r['mean_confidence']:.3f}  "
        f"baseline {r['baseline']['accuracy'] if r.get('baseline') else float('nan'):.3f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", action="append", required=True, help="a set as `python -m inference eval --set` takes it")
    p.add_argument("--variants", help="names separated by commas (default: all)")
    p.add_argument("--json", type=Path, help="write every report here")
    args = p.parse_args()

    from inference.config import settings_from_env
    from inference.engine.encoder import Encoder
    from inference.evaluate import evaluate

    variants = {k: v for k, v in json.loads(VARIANTS.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    names = args.variants.split(",") if args.variants else list(variants)
    base = json.loads(BEFORE.read_text(encoding="utf-8"))
    settings = settings_from_env()
    encoder = Encoder.from_settings(settings)
    reports: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(apply(base, variants[name])), encoding="utf-8")
            for which in args.set:
                r = evaluate(settings.replace(taxonomy_file=str(path)), which, encoder=encoder)
                reports.setdefault(name, {})[which] = r
                print(summary_line(name, which, r), flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
