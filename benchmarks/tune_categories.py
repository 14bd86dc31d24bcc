"""Category head research (issue 14): compare recipes across every labelled set, with honest protocols.

    .venv/bin/python benchmarks/tune_categories.py                  # all recipes, all sets found
    .venv/bin/python benchmarks/tune_categories.py --recipes default # the recommended recipe and the baselines
    .venv/bin/python benchmarks/tune_categories.py --json /tmp/tune.json

Protocol (nothing is ever scored against prototypes or weights that contain the ticket):
- Training pool = the bundled examples (inference/data/fewshot_examples.jsonl) + the development set
  (dev_tickets.jsonl) + the taxonomy descriptions, exactly what a deployment ships.
- `dev` is scored by 5-fold cross-validation: each fold's tickets are scored by a head fitted on the
  few-shot examples + the other four folds.
- Every other set (`eval`, `bitext`, `banking77`, `demo`) is scored by a head fitted on the whole pool.
- Temperatures / calibrators are fitted on out-of-fold predictions of the training pool only (inner
  5-fold CV), never on the set being reported.
- `eval` is the project's held-out set: reported, never used to choose a recipe. The recipe is chosen
  by the worst set among dev(CV), bitext, banking77 and demo; `--loso` also shows, for each of those sets,
  which recipe would win if that set were left out of the choice (if it is the same recipe, that set's
  number is not inflated by the choice).

Baseline ("plain baseline" of issue 14): one description per label (the first, general sentence of each
label in the default taxonomy), argmax cosine; its confidence is a softmax at a temperature fitted the
same way as the heads' (pool OOF).

Everything here is numpy (no scikit-learn needed), so the chosen recipe can move into the head as is.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ticket_sets import LABELS, CachedEncoder, TicketSet, load_sets, load_taxonomy  # noqa: E402

K = len(LABELS)
TEMPERATURES = np.geomspace(0.005, 5.0, 140)
SELECTION_SETS = ("dev", "bitext", "banking77", "demo")
UNCERTAIN_BELOW = 0.5


# --------------------------------------------------------------------------------------------------
# numpy building blocks (ready to move into the head)
# --------------------------------------------------------------------------------------------------
def unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-12)


def log_softmax(z: np.ndarray) -> np.ndarray:
    top = z.max(axis=1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True))


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(z))


def fit_temperature(scores: np.ndarray, y: np.ndarray) -> float:
    """Maximum-likelihood temperature over a grid (scores are logits at T=1)."""
    best, best_nll = 1.0, np.inf
    for t in TEMPERATURES:
        nll = -log_softmax(scores / t)[np.arange(len(y)), y].mean()
        if nll < best_nll:
            best, best_nll = float(t), nll
    return best


def fit_logreg(
    X: np.ndarray, y: np.ndarray, l2: float, weights: np.ndarray | None = None, iters: int = 400
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression with an L2 penalty `l2 * ||W||^2 / 2` on the mean loss,
    by Nesterov-accelerated gradient descent (X is small: hundreds of rows). Returns (W [d,K], b [K])."""
    n, d = X.shape
    w = np.ones(n) if weights is None else weights.astype(np.float64)
    w = w / w.sum()
    Y = np.eye(K)[y]
    # step from the Lipschitz bound of the softmax loss: 0.5 * max eigenvalue of X^T diag(w) X, plus l2
    lip = 0.5 * np.linalg.eigvalsh((X * w[:, None]).T @ X).max() + 0.5 + l2
    step = 1.0 / lip
    W = np.zeros((d, K))
    b = np.zeros(K)
    Wv, bv = W.copy(), b.copy()
    for k in range(iters):
        P = softmax(X @ Wv + bv)
        G = (P - Y) * w[:, None]
        gW = X.T @ G + l2 * Wv
        gb = G.sum(axis=0)
        W_new, b_new = Wv - step * gW, bv - step * gb
        mom = k / (k + 3)
        Wv, bv = W_new + mom * (W_new - W), b_new + mom * (b_new - b)
        W, b = W_new, b_new
    return W, b


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Same definition as inference/evaluate.py (10 equal-width bins, weighted |conf - acc|)."""
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (conf > low) & (conf <= high)
        if inside.any():
            total += inside.mean() * abs(conf[inside].mean() - correct[inside].mean())
    return float(total)


# --------------------------------------------------------------------------------------------------
# "Can the model read it?": a cheap signal from the text and the tokenizer, no model call
# --------------------------------------------------------------------------------------------------
EN_FUNCTION_WORDS = set(
    """a about after again all also am an and any are as at be been before being but by can cannot
    could did do does doing don't down during each even ever every for from get got had has have
    having he her here him his how i i'm i've if in into is isn't it it's its just let me more most my
    need no not now of off on once only or other our out over please same she should since so some
    still such than that the their them then there these they this those through to too under until
    up us very was wasn't we were what when where which while who why will with won't would you your
    yet able want cant dont doesnt didnt im ive hi hello thanks thank""".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


# Frequent function words of the other languages tickets arrive in (Latin script), minus any that are
# also English words ("die", "den", "in", "was", "also", "a", "no", "me", ...).
OTHER_FUNCTION_WORDS = (
    set(
        """de la el los las del que y en un una por con para es se lo le su sus al mi mis tu pero como mas más
    muy ya hay esta está este estoy tengo puedo gracias hola porque cuando donde también sin sobre
    le les des du et est pas je vous une dans pour qui ne sur avec mon ma mes votre vos nous ce cette
    il elle sont ai bonjour merci
    der das und ist nicht ich sie mit ein eine einen zu auf für von dem des bei aus wir ihr mein meine
    ihre bitte danke hallo kann nach noch wie oder aber auch habe wurde seit
    het een van ik niet dat voor op zijn maar ook bij naar mijn uw hebben kunnen graag
    di che non per sono della delle nel con ho mio mia questo grazie buongiorno ciao
    um uma não com os meu minha olá obrigado obrigada você está também
    och att det som jag inte på är för med av till hej tack
    się nie w z na jest czy jak dla że mój moja dzień dobry proszę""".split()
    )
    - EN_FUNCTION_WORDS
)


@dataclass
class Readability:
    words: int
    function_share: float  # share of words (first 60) that are English function words
    other_share: float  # share of words (first 60) that are function words of other Latin-script languages
    nonlatin_share: float  # share of letters outside the Latin script
    fragment_share: float  # share of word-piece continuation tokens among word tokens
    unk_share: float


def readability(text: str, tokens: list[str], first_words: int = 60) -> Readability:
    """Judged on the first 60 words (the prose; pasted logs and quoted threads come later)."""
    words = [w.lower() for w in _WORD.findall(text)][:first_words]
    letters = [c for c in text if c.isalpha()]
    nonlatin = sum(1 for c in letters if not unicodedata.name(c, "").startswith("LATIN")) / max(len(letters), 1)
    func = sum(1 for w in words if w in EN_FUNCTION_WORDS) / max(len(words), 1)
    other = sum(1 for w in words if w in OTHER_FUNCTION_WORDS) / max(len(words), 1)
    pieces = [t for t in tokens if t not in ("[CLS]", "[SEP]") and any(ch.isalpha() for ch in t)]
    frag = sum(1 for t in pieces if t.startswith("##")) / max(len(pieces), 1)
    unk = sum(1 for t in tokens if t == "[UNK]") / max(len(tokens) - 2, 1)
    return Readability(len(words), func, other, nonlatin, frag, unk)


def unreadable(
    r: Readability, min_words: int = 4, min_english: float = 0.12, nonlatin: float = 0.3, fragments: float = 0.2
) -> bool:
    """Not English enough for an English-only encoder: mostly non-Latin letters (or unknown tokens), or,
    with enough words to judge, more foreign than English function words, or almost no English function
    words while the tokenizer has to cut the words into pieces (a language it has no vocabulary for;
    telegraphic English like "troubles entering another shipping address" is cut into whole words).
    Texts too short to judge stay readable."""
    if r.nonlatin_share >= nonlatin or r.unk_share >= 0.2:
        return True
    if r.words < min_words:
        return False
    return r.other_share > r.function_share or (r.function_share < min_english and r.fragment_share >= fragments)


# --------------------------------------------------------------------------------------------------
# Recipes: fit(pool) -> scorer(X) -> logits at temperature 1
# --------------------------------------------------------------------------------------------------
@dataclass
class Pool:
    X: np.ndarray  # examples (unit vectors)
    y: np.ndarray
    D: np.ndarray  # all description vectors
    dy: np.ndarray  # their labels
    D1: np.ndarray  # the first (general) description of each label [K, d]


Scorer = Callable[[np.ndarray], np.ndarray]


def _protos(X, y) -> tuple[np.ndarray, np.ndarray]:
    sums = np.zeros((K, X.shape[1]))
    np.add.at(sums, y, X)
    counts = np.bincount(y, minlength=K)
    return sums, counts


def r_baseline(pool: Pool) -> Scorer:
    D1 = unit(pool.D1)
    return lambda E: E @ D1.T


def r_desc(pool: Pool) -> Scorer:
    sums, _ = _protos(pool.D, pool.dy)
    P = unit(sums)
    return lambda E: E @ P.T


def r_mix(w: float, shrink: float = 0.0) -> Callable[[Pool], Scorer]:
    """w * cos(description prototype) + (1 - w) * cos(example prototype); the current head is w=0.
    `shrink` > 0: example prototype = unit(sum of examples + shrink * description prototype)."""

    def fit(pool: Pool) -> Scorer:
        dsum, _ = _protos(pool.D, pool.dy)
        Dp = unit(dsum)
        sums, counts = _protos(pool.X, pool.y)
        Ep = unit(sums + shrink * Dp)
        has = (counts > 0)[None, :]
        return lambda E: np.where(has, w * (E @ Dp.T) + (1 - w) * (E @ Ep.T), E @ Dp.T)

    return fit


def r_knn(k: int, with_desc: bool = True) -> Callable[[Pool], Scorer]:
    """Per label, the mean cosine of the k nearest labelled points (examples, and descriptions)."""

    def fit(pool: Pool) -> Scorer:
        X = np.vstack([pool.X, pool.D]) if with_desc else pool.X
        y = np.concatenate([pool.y, pool.dy]) if with_desc else pool.y

        def score(E):
            S = E @ X.T
            out = np.full((len(E), K), -1.0)
            for c in range(K):
                sc = S[:, y == c]
                kk = min(k, sc.shape[1])
                out[:, c] = -np.sort(-sc, axis=1)[:, :kk].mean(axis=1)
            return out

        return score

    return fit


def r_logreg(l2: float, desc_weight: float = 1.0, zs: float = 0.0) -> Callable[[Pool], Scorer]:
    """Multinomial logistic regression on the embeddings, trained on the examples plus the description
    sentences (each description counts `desc_weight` examples). `zs` > 0 adds the zero-shot
    description-prototype log-probabilities (temperature 0.05) with that weight."""

    def fit(pool: Pool) -> Scorer:
        X = np.vstack([pool.X, pool.D])
        y = np.concatenate([pool.y, pool.dy])
        wts = np.concatenate([np.ones(len(pool.X)), np.full(len(pool.D), desc_weight)])
        W, b = fit_logreg(X, y, l2, wts)
        dsum, _ = _protos(pool.D, pool.dy)
        Dp = unit(dsum)
        if zs:
            return lambda E: log_softmax(E @ W + b) + zs * log_softmax((E @ Dp.T) / 0.05)
        return lambda E: E @ W + b

    return fit


RECIPES: dict[str, Callable[[Pool], Scorer]] = {
    "baseline (1 description/label)": r_baseline,
    "descriptions (8/label, prototype)": r_desc,
    "current head (examples only, w=0)": r_mix(0.0),
}
for _w in (0.2, 0.4, 0.5, 0.6, 0.8):
    RECIPES[f"mix w={_w}"] = r_mix(_w)
for _s in (5.0, 10.0, 20.0, 40.0):
    RECIPES[f"shrink {_s:g}"] = r_mix(0.0, _s)
for _k in (3, 7, 15):
    RECIPES[f"knn k={_k}"] = r_knn(_k)
for _l2 in (0.3, 0.1, 0.03, 0.01, 0.003):
    RECIPES[f"logreg l2={_l2}"] = r_logreg(_l2)
for _l2 in (0.03, 0.01, 0.003):
    for _dw in (3.0, 6.0, 12.0):
        RECIPES[f"logreg l2={_l2} descx{_dw:g}"] = r_logreg(_l2, _dw)
    for _zs in (0.5, 1.0):
        RECIPES[f"logreg l2={_l2} +zs{_zs:g}"] = r_logreg(_l2, 1.0, _zs)

DEFAULT_RECIPE = (
    "logreg l2=0.003 descx12"  # chosen by the worst-set criterion below; see benchmarks/README-categories.md
)


# --------------------------------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------------------------------
def folds(y: np.ndarray, k: int = 5, seed: int = 0) -> np.ndarray:
    """Stratified fold index per row."""
    rng = np.random.default_rng(seed)
    out = np.empty(len(y), dtype=int)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        out[idx] = np.arange(len(idx)) % k
    return out


@dataclass
class Fitted:
    score: Scorer
    temperature: float
    oof_scores: np.ndarray  # pool OOF logits (for calibrators)
    oof_y: np.ndarray


def fit_with_calibration(recipe: Callable[[Pool], Scorer], pool: Pool) -> Fitted:
    """The recipe on the whole pool, and its temperature from inner 5-fold out-of-fold predictions."""
    f = folds(pool.y, 5, seed=1)
    oof = np.zeros((len(pool.y), K))
    for j in range(5):
        tr = f != j
        inner = Pool(pool.X[tr], pool.y[tr], pool.D, pool.dy, pool.D1)
        oof[~tr] = recipe(inner)(pool.X[~tr])
    return Fitted(recipe(pool), fit_temperature(oof, pool.y), oof, pool.y)


@dataclass
class Scored:
    scores: np.ndarray
    probs: np.ndarray
    temperature: float


def score_set(recipe, name: str, sets: dict[str, TicketSet], emb: dict[str, np.ndarray], pool_parts) -> Scored:
    few, dev, D, dy, D1 = pool_parts
    if name == "dev":
        f = folds(sets["dev"].labels, 5, seed=0)
        scores = np.zeros((len(f), K))
        probs = np.zeros((len(f), K))
        temps = []
        for j in range(5):
            tr = f != j
            pool = Pool(
                np.vstack([emb["fewshot"], emb["dev"][tr]]),
                np.concatenate([sets["fewshot"].labels, sets["dev"].labels[tr]]),
                D,
                dy,
                D1,
            )
            fitted = fit_with_calibration(recipe, pool)
            s = fitted.score(emb["dev"][~tr])
            scores[~tr] = s
            probs[~tr] = softmax(s / fitted.temperature)
            temps.append(fitted.temperature)
        return Scored(scores, probs, float(np.median(temps)))
    pool = Pool(
        np.vstack([emb["fewshot"], emb["dev"]]),
        np.concatenate([sets["fewshot"].labels, sets["dev"].labels]),
        D,
        dy,
        D1,
    )
    fitted = _FIT_CACHE.get(id(recipe))
    if fitted is None:
        fitted = _FIT_CACHE[id(recipe)] = fit_with_calibration(recipe, pool)
    s = fitted.score(emb[name])
    return Scored(s, softmax(s / fitted.temperature), fitted.temperature)


_FIT_CACHE: dict[int, Fitted] = {}


def metrics(s: TicketSet, sc: Scored, flags: np.ndarray | None, cap: float | None) -> dict:
    pred = sc.probs.argmax(axis=1)
    conf = sc.probs.max(axis=1)
    if flags is not None and cap is not None:
        conf = np.where(flags, np.minimum(conf, cap), conf)
    correct = pred == s.labels
    uncertain = conf < UNCERTAIN_BELOW
    if flags is not None:
        uncertain = uncertain | flags
    langs = np.array(s.langs)
    en = langs == "en"
    sweep = {}
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        unc_t = (conf < t) | (flags if flags is not None else False)
        sweep[str(t)] = {
            "uncertain_share": round(float(unc_t.mean()), 4),
            "confident_accuracy": round(float(correct[~unc_t].mean()), 4) if (~unc_t).any() else None,
        }
    out = {
        "n": len(s),
        "accuracy": round(float(correct.mean()), 4),
        "ece": round(ece(conf, correct), 4),
        "uncertain_share": round(float(uncertain.mean()), 4),
        "confident_accuracy": round(float(correct[~uncertain].mean()), 4) if (~uncertain).any() else None,
        "confident_wrong_share": round(float((~uncertain & ~correct).mean()), 4),
        "temperature": round(sc.temperature, 4),
        "threshold_sweep": sweep,
        "english_flagged": round(float(flags[en].mean()), 4) if flags is not None and en.any() else None,
        "recall": {LABELS[c]: round(float(correct[s.labels == c].mean()), 3) for c in np.unique(s.labels)},
    }
    if (~en).any():
        out["accuracy_en"] = round(float(correct[en].mean()), 4)
        out["accuracy_non_en"] = round(float(correct[~en].mean()), 4)
        out["n_non_en"] = int((~en).sum())
        out["non_en_flagged"] = round(float(uncertain[~en].mean()), 4)
        out["non_en_confident_wrong"] = int((~uncertain & ~correct & ~en).sum())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", default="all", help="all | default | names separated by semicolons")
    parser.add_argument("--json", help="write every number here")
    parser.add_argument("--loso", action="store_true", help="leave-one-set-out check of the recipe choice")
    parser.add_argument("--no-flag", action="store_true", help="without the unreadable-language flag")
    parser.add_argument(
        "--uncertain-below", type=float, default=0.8, help="confidence below which a ticket is uncertain (default 0.8)"
    )
    parser.add_argument(
        "--cap", default="none", help="confidence cap for flagged (unreadable) tickets: a number, or none (default)"
    )
    args = parser.parse_args()

    sets = load_sets()
    enc = CachedEncoder()
    emb = {name: enc.embed(s.texts) for name, s in sets.items()}
    taxonomy = load_taxonomy()
    assert list(taxonomy) == LABELS
    desc_texts = [t for label in LABELS for t in taxonomy[label]]
    dy = np.array([LABELS.index(label) for label in LABELS for _ in taxonomy[label]])
    D = enc.embed(desc_texts, tag="descriptions")
    D1 = np.stack([D[np.flatnonzero(dy == c)[0]] for c in range(K)])
    pool_parts = (emb["fewshot"], emb["dev"], D, dy, D1)

    # readability flags per set
    flags = {}
    for name, s in sets.items():
        toks = enc.tokens(s.texts)
        flags[name] = np.array([unreadable(readability(t, tk)) for t, tk in zip(s.texts, toks, strict=True)])
    if args.no_flag:
        flags = {name: None for name in sets}

    names = (
        list(RECIPES)
        if args.recipes == "all"
        else ["baseline (1 description/label)", "current head (examples only, w=0)", DEFAULT_RECIPE]
        if args.recipes == "default"
        else [r.strip() for r in args.recipes.split(";")]
    )
    cap = None if args.cap == "none" else float(args.cap)
    global UNCERTAIN_BELOW
    UNCERTAIN_BELOW = args.uncertain_below
    report_sets = [n for n in ("dev", "eval", "bitext", "banking77", "demo") if n in sets]
    results: dict[str, dict[str, dict]] = {}
    for rname in names:
        recipe = RECIPES[rname]
        results[rname] = {}
        for sname in report_sets:
            sc = score_set(recipe, sname, sets, emb, pool_parts)
            # cap for flagged tickets: the pool's own accuracy on its non-English tickets (OOF)
            results[rname][sname] = metrics(sets[sname], sc, flags[sname], cap=cap)
        print(_row(rname, results[rname], report_sets), flush=True)

    sel = [s for s in SELECTION_SETS if s in report_sets]
    chosen = choose(results, names, sel)
    print(f"\nchosen (worst-set accuracy over {sel}, ties within 0.005 broken by mean ECE): {chosen}")
    if args.loso:
        for left in sel:
            print(f"  without {left}: {choose(results, names, [s for s in sel if s != left])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "chosen": chosen}, indent=1))
    return 0


def choose(results: dict, names: list[str], sel: list[str], tie: float = 0.005) -> str:
    """The recipe with the best worst-set accuracy; recipes within `tie` of it count as tied and the
    one with the lowest mean ECE over the same sets wins (calibration is half of the goal)."""
    worst = {r: min(results[r][s]["accuracy"] for s in sel) for r in names}
    top = max(worst.values())
    tied = [r for r in names if worst[r] >= top - tie]
    return min(tied, key=lambda r: np.mean([results[r][s]["ece"] for s in sel]))


def _row(rname: str, res: dict, report_sets: list[str]) -> str:
    cells = []
    for s in report_sets:
        m = res[s]
        cells.append(
            f"{s}:{m['accuracy']:.3f}/e{m['ece']:.3f}/c{m['confident_accuracy'] or 0:.3f}/u{m['uncertain_share']:.2f}"
        )
    return f"{rname:<38} " + "  ".join(cells)


if __name__ == "__main__":
    sys.exit(main())
