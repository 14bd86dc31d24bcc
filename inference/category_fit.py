"""A linear category head on the encoder's embeddings: fitting, calibration, cross-validation, storage.

numpy only (no scikit-learn). The recipe is the one chosen in benchmarks/tune_categories.py (`r_logreg`,
"logreg l2=0.003 descx12"), with the anchor chosen in benchmarks/recipe_sweep.py (BENCHMARKS.md):

- multinomial logistic regression on unit embeddings, trained on labelled tickets at weight 1 plus each
  label's taxonomy descriptions at weight 12, an L2 penalty `l2 * ||W||^2 / 2` on the weighted mean loss
  (bias unpenalised), Nesterov-accelerated gradient descent, 400 steps of 1/Lipschitz: deterministic;
- an anchor (`Recipe.anchor`, 0.25): the plain baseline's logits (cosine to each label's first description)
  are added to the regression's, weighted so that the head is the product of the two calibrated models'
  probabilities with the baseline's raised to 0.25 (`anchor_weight`): where a ticket unlike the training
  tickets leaves the regression unsure, the descriptions have a say. Only when every label has a
  description (the default head; `fit-categories` on taxonomy labels);
- a temperature fitted by maximum likelihood on 5-fold out-of-fold logits of the labelled tickets (each
  fold scored by a head fitted without it, anchor included), so the confidence is calibrated on tickets the
  head has not seen.

`fit-categories` fits this recipe on a help desk's own tickets with the L2 penalty chosen by its
cross-validation (`choose_l2`). The default head keeps 0.003, chosen for other people's tickets by the
worst-set rule (BENCHMARKS.md): on the bundled tickets' own folds `choose_l2` picks 0.0003, at which the
development set's confident accuracy falls to 0.947, under the 0.95 goal.

`Recipe.prior` (0 by default) starts the regression from, and shrinks it towards, the labels' mean descriptions;
measured with benchmarks/recipe_sweep.py and not adopted (BENCHMARKS.md, "A head that starts from the
descriptions").

The category head fits it at task start from the bundled files (cached), or loads one fitted on a help
desk's own labelled tickets by `python -m inference fit-categories` (`LinearHead.save` / `load`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from inference.errors import ConfigError

FORMAT = "ticket-inference-category-head/1"
TEMPERATURES = np.geomspace(0.005, 5.0, 140)
# `choose_l2`'s candidates for a help desk's own tickets (fit-categories): half-decades around the default's 0.003
L2_CANDIDATES = (3e-2, 3e-3, 3e-4, 3e-5, 3e-6)


@dataclass(frozen=True)
class Recipe:
    l2: float = 0.003
    description_weight: float = 12.0
    iters: int = 400
    folds: int = 5
    prior: float = 0.0  # > 0: start from, and shrink towards, `prior` x each label's mean description
    anchor: float = 0.25  # > 0: the plain baseline's cosine logits added at this weight (`anchor_weight`)

    def key(self) -> str:
        key = f"logreg-l2={self.l2}-desc={self.description_weight}-iters={self.iters}-folds={self.folds}"
        return key + (f"-prior={self.prior}" if self.prior else "") + (f"-anchor={self.anchor}" if self.anchor else "")


DEFAULT_RECIPE = Recipe()


# --- numpy building blocks ---------------------------------------------------------------------------
def unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-12)


def log_softmax(z: np.ndarray) -> np.ndarray:
    top = z.max(axis=1, keepdims=True)
    return z - top - np.log(np.exp(z - top).sum(axis=1, keepdims=True))


def softmax(z: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(z))


def fit_logreg(
    X: np.ndarray,
    y: np.ndarray,
    k: int,
    l2: float,
    weights: np.ndarray | None = None,
    iters: int = 400,
    W0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression, L2 `l2 * ||W - W0||^2 / 2` on the weighted mean loss (W0 = 0 unless
    given; the descent starts there), by Nesterov gradient descent with the step 1 / Lipschitz bound.
    Returns (W [d, k], b [k]), float64."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    Y = np.eye(k)[y]
    lip = 0.5 * np.linalg.eigvalsh((X * w[:, None]).T @ X).max() + 0.5 + l2
    step = 1.0 / lip
    W0 = np.zeros((d, k)) if W0 is None else np.asarray(W0, dtype=np.float64)
    W, b = W0.copy(), np.zeros(k)
    Wv, bv = W.copy(), b.copy()
    for it in range(iters):
        G = (softmax(X @ Wv + bv) - Y) * w[:, None]
        W_new = Wv - step * (X.T @ G + l2 * (Wv - W0))
        b_new = bv - step * G.sum(axis=0)
        mom = it / (it + 3)
        Wv, bv = W_new + mom * (W_new - W), b_new + mom * (b_new - b)
        W, b = W_new, b_new
    return W, b


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """Maximum-likelihood temperature over a fixed grid (logits at temperature 1)."""
    best, best_nll = 1.0, np.inf
    for t in TEMPERATURES:
        nll = -log_softmax(logits / t)[np.arange(len(y)), y].mean()
        if nll < best_nll:
            best, best_nll = float(t), nll
    return best


def folds(y: np.ndarray, k: int = 5, seed: int = 0) -> np.ndarray:
    """A stratified fold index per row (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    out = np.empty(len(y), dtype=int)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        out[idx] = np.arange(len(idx)) % k
    return out


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error: 10 equal-width bins, |mean confidence - accuracy| weighted by share."""
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            total += inside.mean() * abs(confidence[inside].mean() - correct[inside].mean())
    return float(total)


def text_digest(text: str) -> str:
    """A short digest of a training text: the fitted head records them, so `eval` can leave its own
    training tickets out (never scoring a ticket with a head that was fitted on it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# --- the head ------------------------------------------------------------------------------------------
@dataclass
class LinearHead:
    labels: list[str]
    W: np.ndarray  # [dim, K]
    b: np.ndarray  # [K]
    temperature: float
    prototypes: np.ndarray  # [K, dim] unit: each label's training mean (the `category_score` cosine)
    meta: dict = field(default_factory=dict)  # model it was fitted on, recipe, report, training digests

    @property
    def dim(self) -> int:
        return int(self.W.shape[0])

    def logits(self, emb: np.ndarray) -> np.ndarray:
        """Logits at temperature 1 (the summary head ranks sentences by them)."""
        return np.nan_to_num(np.asarray(emb, dtype=np.float64), nan=0.0) @ self.W + self.b

    def probabilities(self, emb: np.ndarray) -> np.ndarray:
        return softmax(self.logits(emb) / self.temperature)

    def cosines(self, emb: np.ndarray) -> np.ndarray:
        return np.nan_to_num(np.asarray(emb, dtype=np.float64), nan=0.0) @ self.prototypes.T

    def fingerprint(self) -> str:
        """Everything that changes the head's outputs (labels, weights, temperature, prototypes)."""
        h = hashlib.sha256(json.dumps({"labels": self.labels, "temperature": self.temperature}).encode())
        for a in (self.W, self.b, self.prototypes):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Atomically (a concurrent reader never sees half a file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.meta, "format": FORMAT, "fingerprint": self.fingerprint()}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            np.savez(
                fh,
                labels=np.array(self.labels),
                W=self.W,
                b=self.b,
                temperature=np.array(self.temperature),
                prototypes=self.prototypes,
                meta=np.array(json.dumps(meta, sort_keys=True)),
            )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> LinearHead:
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                head = cls(
                    [str(x) for x in data["labels"]],
                    data["W"],
                    data["b"],
                    float(data["temperature"]),
                    data["prototypes"],
                    meta,
                )
        except FileNotFoundError:
            raise ConfigError(f"category head file {path} does not exist (INFERENCE_CATEGORY_HEAD)") from None
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            raise ConfigError(f"category head file {path} is not a fitted head ({type(exc).__name__})") from None
        if meta.get("format") != FORMAT:
            raise ConfigError(f"category head file {path} has format {meta.get('format')!r}, expected {FORMAT}")
        if meta.get("fingerprint") != head.fingerprint():
            raise ConfigError(f"category head file {path} is damaged (its content does not match its fingerprint)")
        return head


# --- fitting -----------------------------------------------------------------------------------------
@dataclass
class TrainingData:
    """Unit embeddings of labelled tickets and of label descriptions, with label indexes into `labels`."""

    labels: list[str]
    X: np.ndarray  # tickets [n, dim]
    y: np.ndarray
    D: np.ndarray  # descriptions [m, dim] (m may be 0)
    dy: np.ndarray
    digests: list[str] = field(default_factory=list)  # text_digest of each ticket

    def without(self, drop: np.ndarray) -> TrainingData:
        keep = ~drop
        digests = [self.digests[i] for i in np.flatnonzero(keep)] if self.digests else []
        return TrainingData(self.labels, self.X[keep], self.y[keep], self.D, self.dy, digests)


def _fit_weights(data: TrainingData, recipe: Recipe) -> tuple[np.ndarray, np.ndarray]:
    X = np.vstack([data.X, data.D]) if len(data.D) else data.X
    y = np.concatenate([data.y, data.dy]).astype(int) if len(data.D) else data.y
    w = np.concatenate([np.ones(len(data.X)), np.full(len(data.D), recipe.description_weight)])
    W0 = None
    if recipe.prior and len(data.D):
        means = np.zeros((len(data.labels), data.D.shape[1]))
        np.add.at(means, data.dy.astype(int), data.D)
        W0 = recipe.prior * unit(means).T
    return fit_logreg(X, y, len(data.labels), recipe.l2, w, recipe.iters, W0)


def out_of_fold_logits(data: TrainingData, recipe: Recipe, seed: int = 1) -> np.ndarray:
    """Each ticket's logits from a head fitted on the other folds (descriptions always in)."""
    k = len(data.labels)
    f = folds(data.y, recipe.folds, seed=seed)
    oof = np.zeros((len(data.y), k))
    for j in range(recipe.folds):
        test = f == j
        if not test.any():
            continue
        W, b = _fit_weights(data.without(test), recipe)
        oof[test] = data.X[test] @ W + b
    return oof


def first_descriptions(data: TrainingData) -> np.ndarray | None:
    """Each label's first description [K, dim] (the plain baseline's), or None when a label has none."""
    dy = np.asarray(data.dy, dtype=int)
    firsts = [np.flatnonzero(dy == k) for k in range(len(data.labels))]
    if not len(data.D) or any(not len(f) for f in firsts):
        return None
    return unit(np.asarray(data.D, dtype=np.float64)[[int(f[0]) for f in firsts]])


def anchor_weight(data: TrainingData, oof: np.ndarray, recipe: Recipe, D1: np.ndarray) -> float:
    """How much of the plain baseline's cosine logits `X @ D1.T` the head's logits get: `recipe.anchor` on the
    scale of the two calibrated models (the head's out-of-fold temperature over the baseline's own, both fitted
    on the training tickets), so that the sum is the head's calibrated log-probabilities plus `anchor` times the
    baseline's, a product of the two models' probabilities."""
    return recipe.anchor * fit_temperature(oof, data.y) / fit_temperature(data.X @ D1.T, data.y)


def calibrated_oof(data: TrainingData, recipe: Recipe) -> tuple[np.ndarray, float, np.ndarray | None]:
    """The out-of-fold logits `fit` calibrates on (anchor included), the anchor weight and the first
    descriptions it anchors to (None: no anchor)."""
    oof = out_of_fold_logits(data, recipe)
    D1 = first_descriptions(data) if recipe.anchor else None
    kappa = anchor_weight(data, oof, recipe, D1) if D1 is not None else 0.0
    if kappa:
        oof = oof + kappa * (np.asarray(data.X, dtype=np.float64) @ D1.T)
    return oof, kappa, D1


def held_out_loss(oof: np.ndarray, y: np.ndarray) -> float:
    """Mean negative log-likelihood of out-of-fold logits at their own fitted temperature."""
    t = fit_temperature(oof, y)
    return float(-log_softmax(oof / t)[np.arange(len(y)), y].mean())


def choose_l2(
    data: TrainingData,
    recipe: Recipe = DEFAULT_RECIPE,
    candidates: Sequence[float] = L2_CANDIDATES,
    progress=None,
) -> tuple[Recipe, list[dict], tuple]:
    """The L2 penalty for a help desk's own tickets, chosen by the same k-fold cross-validation that reports
    the head's held-out accuracy: the candidate whose out-of-fold logits (anchor included, at their fitted
    temperature) have the lowest log-loss. The search starts at the candidate nearest `recipe.l2` and walks
    towards weaker penalties while the loss falls (many tickets need less of it), else towards stronger ones;
    a candidate replaces the current one only when its loss is lower. `progress(trial)` is called after each
    candidate tried.
    Returns (the recipe with that l2, every trial {l2, accuracy, loss} in the order tried, and the chosen
    candidate's `calibrated_oof`, so `fit` need not compute it again)."""
    grid = sorted({float(c) for c in candidates}, reverse=True)  # strongest penalty first
    if not grid or grid[-1] <= 0:
        raise ValueError("choose_l2: the candidates must be positive numbers")
    start = min(range(len(grid)), key=lambda i: abs(np.log(grid[i]) - np.log(recipe.l2)))
    trials: list[dict] = []
    losses: dict[int, float] = {}
    kept: list = [np.inf, None]  # the lowest loss so far and its scores (the walk ends on it): one set in memory

    def score(i: int) -> float:
        if i not in losses:
            oof = calibrated_oof(data, replace(recipe, l2=grid[i]))
            loss = losses[i] = held_out_loss(oof[0], data.y)
            if loss < kept[0]:
                kept[:] = [loss, oof]
            trial = {
                "l2": grid[i],
                "accuracy": round(float((oof[0].argmax(axis=1) == data.y).mean()), 4),
                "loss": round(loss, 4) + 0.0,  # never -0.0
            }
            trials.append(trial)
            if progress is not None:
                progress(trial)
        return losses[i]

    best = start
    score(start)
    for step in (1, -1):  # weaker penalties first; stronger ones only when the first step down did not help
        i = best
        while 0 <= i + step < len(grid) and score(i + step) < score(i):
            i += step
        if i != best:
            best = i
            break
    chosen = replace(recipe, l2=grid[best])
    # the walk stops on the lowest loss it has seen, whose scores were kept (unless the losses were not numbers)
    return chosen, trials, kept[1] if losses[best] == kept[0] else calibrated_oof(data, chosen)


def fit(
    data: TrainingData,
    recipe: Recipe = DEFAULT_RECIPE,
    meta: dict | None = None,
    scored: tuple | None = None,
) -> tuple[LinearHead, np.ndarray]:
    """The head on all the data, its temperature from out-of-fold logits; returns (head, those logits).
    With no labelled tickets (zero-shot), the descriptions play their part at weight 1 (and no anchor: the
    descriptions are the training data then). `recipe.anchor` > 0 and a description for every label: the
    plain baseline's cosine logits are added to the head's (`anchor_weight`), before the temperature is fitted
    on the out-of-fold logits, so the head stays one linear map with one temperature. `scored`: this
    recipe's `calibrated_oof` when already computed (`choose_l2`)."""
    if len(data.X) == 0:
        data = TrainingData(data.labels, data.D, data.dy, data.D[:0], data.dy[:0])
        recipe = replace(recipe, description_weight=1.0, anchor=0.0)
        scored = None
    oof, kappa, D1 = scored if scored is not None else calibrated_oof(data, recipe)
    temperature = fit_temperature(oof, data.y)
    W, b = _fit_weights(data, recipe)
    if kappa:
        W = W + kappa * D1.T
    sums = np.zeros((len(data.labels), data.X.shape[1]))
    np.add.at(sums, data.y, data.X)
    if len(data.D):
        np.add.at(sums, data.dy.astype(int), data.D)
    head = LinearHead(list(data.labels), W, b, temperature, unit(sums), dict(meta or {}))
    head.meta.setdefault("recipe", asdict(recipe))
    head.meta.setdefault("training_tickets", int(len(data.X)))
    head.meta["anchor_weight"] = float(kappa)
    head.meta["training_digests"] = list(data.digests)
    return head, oof


def report(labels: Sequence[str], y: np.ndarray, probs: np.ndarray) -> dict:
    """Accuracy, per-label recall and n, ECE of held-out predictions."""
    pred = probs.argmax(axis=1)
    conf = probs.max(axis=1)
    correct = pred == y
    return {
        "tickets": int(len(y)),
        "accuracy": round(float(correct.mean()), 4) if len(y) else None,
        "expected_calibration_error": round(ece(conf, correct), 4) if len(y) else None,
        "per_label": {
            label: {
                "n": int((y == k).sum()),
                "recall": round(float(correct[y == k].mean()), 3) if (y == k).any() else None,
            }
            for k, label in enumerate(labels)
        },
    }
