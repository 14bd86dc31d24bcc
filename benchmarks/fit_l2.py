"""How much the L2 penalty that `fit-categories` chooses by cross-validation helps, and how optimistic the
held-out accuracy it then reports is (issue 14: "users with history do better").

    .venv/bin/python benchmarks/fit_l2.py --from FILE [--label-column C] [--body-column B] [--nested]

For one file of labelled tickets, read and embedded exactly as `fit-categories` reads them
(`inference.fit_categories.prepare`), prints the held-out (5-fold) accuracy and ECE of:

- `--l2 0.003`: the default head's penalty, what `fit-categories` used before it chose one;
- auto: the penalty chosen by the same folds (`choose_l2`), the number `fit-categories` reports;
- with `--nested`, nested cross-validation: each outer fold scored by a head whose penalty was chosen
  (and whose temperature was fitted) on the other folds alone, so no ticket helped choose the penalty that
  scores it, beside `--l2 0.003` on the same outer folds. The difference to "auto" is the optimism of
  choosing on the reported folds. It costs about five times as much as a fit: leave it out for large files
  and score a held-out split with `eval` instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def held_out(y, probs) -> dict:
    from inference.category_fit import ece

    pred, conf = probs.argmax(axis=1), probs.max(axis=1)
    return {"accuracy": round(float((pred == y).mean()), 4), "ece": round(ece(conf, pred == y), 4)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="from_file", type=Path, required=True)
    p.add_argument("--label-column", default="label")
    p.add_argument("--body-column", default="body")
    p.add_argument("--subject-column")
    p.add_argument("--nested", action="store_true", help="also nested cross-validation (about 5x the time)")
    args = p.parse_args()

    import numpy as np

    from inference.category_fit import DEFAULT_RECIPE, choose_l2, fit, folds, softmax
    from inference.config import settings_from_env
    from inference.engine.encoder import Encoder
    from inference.fit_categories import prepare, read_file
    from inference.labelled_files import Columns

    settings = settings_from_env()
    encoder = Encoder.from_settings(settings)
    rows = list(read_file(args.from_file, Columns.from_flags(args.label_column, args.body_column, args.subject_column)))
    data = prepare(settings, encoder, rows).data
    out: dict = {"file": str(args.from_file), "tickets": int(len(data.y)), "labels": len(data.labels)}

    head, oof = fit(data, DEFAULT_RECIPE)
    out["l2=0.003"] = held_out(data.y, softmax(oof / head.temperature))
    recipe, trials, scored = choose_l2(data, DEFAULT_RECIPE)
    head, oof = fit(data, recipe, scored=scored)
    out["auto"] = {**held_out(data.y, softmax(oof / head.temperature)), "l2": recipe.l2, "tried": trials}
    if args.nested:
        outer = folds(data.y, DEFAULT_RECIPE.folds, seed=2)  # not the inner folds' seed
        probs = np.zeros((len(data.y), len(data.labels)))
        fixed = np.zeros_like(probs)
        chosen = []
        for j in range(DEFAULT_RECIPE.folds):
            test = outer == j
            inner = data.without(test)
            r, _, s = choose_l2(inner, DEFAULT_RECIPE)
            h, _ = fit(inner, r, scored=s)
            probs[test] = h.probabilities(data.X[test])
            chosen.append(r.l2)
            fixed[test] = fit(inner, DEFAULT_RECIPE)[0].probabilities(data.X[test])
        out["nested"] = {**held_out(data.y, probs), "l2_per_fold": chosen}
        out["l2=0.003, the same outer folds"] = held_out(data.y, fixed)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
