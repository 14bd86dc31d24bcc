"""Word-by-word English glosses of tickets the English-only encoder cannot read.

The bundled all-MiniLM-L6-v2 was trained on English. A ticket in German, French, Spanish, Italian, Dutch,
Portuguese, Swedish or Polish is flagged unreadable (inference.readability) and, without help, mostly
classified wrong. The category head therefore reads a gloss of such a ticket instead: each word replaced by
its English meaning from a bundled glossary (inference/data/glossary/LANG.tsv, customer-support vocabulary
written without looking at the evaluation sets), words the glossary lacks kept as they are (product names,
codes, international words such as "app" or "login"). The result is broken English ("I can me not log in,
my password becomes not accepted"), but its keywords are the ones the head was fitted on.

- The language is the glossary that knows the most words of the ticket (at least `MIN_COVERAGE` of them);
  a ticket no glossary covers keeps its own embedding.
- Phrases first, longest first ("mot de passe" -> "password", "säga upp" -> "cancel"), then words, exact or
  without accents. Compounds (German, Dutch, Swedish) are split into known parts: "Passwortzurücksetzung" ->
  "password reset"; German and Dutch verbs with their separable prefix attached are read as the verb
  ("abstürzt"); German typed without umlauts is read as with them ("kuendigen"); elisions ("l'application",
  "dell'ordine") are looked up as article + word.
- The ticket stays flagged `uncertain` (INFERENCE_FLAG_UNREADABLE): the category comes from a gloss, not
  from the text. INFERENCE_GLOSS_UNREADABLE=false turns glossing off (for a multilingual INFERENCE_MODEL,
  turn off both).

Measured in BENCHMARKS.md ("Category accuracy", languages). The category head reads glosses (at run time
and when fitted), and the summary head ranks a glossed ticket's sentences by their glosses, but the summary
is still the ticket's own sentence.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inference.errors import ConfigError

GLOSSARY_DIR = Path(__file__).resolve().parent / "data" / "glossary"
VERSION = "gloss-3"  # part of the category head's fingerprint, with the glossaries' digest
MIN_COVERAGE = 0.3  # share of a ticket's words its glossary must know
COMPOUND_LANGS = frozenset({"de", "nl", "sv"})
_LINKS = ("", "s", "es", "n", "en", "e")  # German/Dutch/Swedish linking elements between compound parts
_MIN_PART = 3
_SEPARABLE = {  # separable verb prefixes, longest first
    "de": tuple("zurück wieder durch fest nach weg auf aus ein mit vor los ab an zu".split()),
    "nl": tuple("terug door over mee uit aan weg toe af op in".split()),
}
_LONGEST_COMPOUND = 40  # longer runs of letters (encoded blobs, pasted hashes) are not split

WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_JOINED = re.compile(r"[ \t]{1,3}|-")
_SPACES = re.compile(r"[ \t]{2,}")
_BEFORE_PUNCT = re.compile(r" ([,.;:!?)])")


_UMLAUT_SPELLED = re.compile(r"(?<=[^aeiouäöü\W])(?:ae|oe|ue)|^(?:ae|oe|ue)")
_UNDECOMPOSED = str.maketrans({"ß": "ss", "ł": "l", "ø": "o", "æ": "ae", "œ": "oe", "đ": "d"})


def fold(word: str) -> str:
    """Lowercase without accents ("Zurücksetzen" -> "zurucksetzen"): the lookup key beside the exact form."""
    decomposed = unicodedata.normalize("NFKD", word.lower().translate(_UNDECOMPOSED))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).replace("’", "'")


@dataclass(frozen=True)
class Glossary:
    lang: str
    words: dict[str, str]  # exact lowercase form and folded form -> English ("" drops the word)
    phrases: dict[tuple[str, ...], str] = field(default_factory=dict)  # folded words -> English
    longest: int = 1  # words in the longest phrase
    entries: int = 0  # lines of the file (words and phrases)

    def phrase(self, words: Sequence[str]) -> str | None:
        return self.phrases.get(tuple(fold(w) for w in words))

    def lookup(self, word: str) -> str | None:
        low = word.lower().replace("’", "'")
        hit = self.words.get(low)
        if hit is None:
            hit = self.words.get(fold(low))
        if hit is None and self.lang == "de" and _UMLAUT_SPELLED.search(low):
            # German typed without umlauts: "kuendigen", "Rueckerstattung", "moechte"
            hit = self.words.get(fold(_UMLAUT_SPELLED.sub(lambda m: m.group()[0], low)))
        return hit

    def translate(self, word: str) -> str | None:
        """The word's English, splitting elisions and (for compounding languages) compounds; None if unknown."""
        hit = self.lookup(word)
        if hit is not None:
            return hit
        if "'" in word or "’" in word:
            head, _, rest = word.replace("’", "'").partition("'")
            first = self.lookup(head + "'")
            if first is None:
                first = self.lookup(head)
            second = self.translate(rest) if rest else ""
            if first is not None and second is not None:
                return f"{first} {second}".strip()
            return None
        if self.lang in COMPOUND_LANGS and len(word) <= _LONGEST_COMPOUND:
            hit = self._compound(word.lower(), depth=2)
            if hit is None:
                hit = self._separable(word.lower())
            return hit
        return None

    def _separable(self, word: str) -> str | None:
        """A verb with its separable prefix attached (German and Dutch subordinate clauses, "dass die App
        abstürzt"): the verb's meaning, when the rest is a known form."""
        for prefix in _SEPARABLE.get(self.lang, ()):
            rest = word[len(prefix) :]
            if word.startswith(prefix) and len(rest) >= 4:
                hit = self.lookup(rest)
                if hit:
                    return hit
        return None

    def _compound(self, word: str, depth: int) -> str | None:
        """Longest known head first; the rest known as a whole, or split once more."""
        for cut in range(len(word) - _MIN_PART, _MIN_PART - 1, -1):
            first = self.lookup(word[:cut])
            if first is None:
                continue
            rest = word[cut:]
            for link in _LINKS:
                if not rest.startswith(link) or len(rest) - len(link) < _MIN_PART:
                    continue
                tail = rest[len(link) :]
                second = self.lookup(tail)
                if second is None and depth > 1:
                    second = self._compound(tail, depth - 1)
                if second is not None:
                    return f"{first} {second}".strip()
        return None


def _read(path: Path) -> Glossary:
    """Lines `form<TAB>english` ("-": drop the word); a form of several words is a phrase ("mot de passe")."""
    words: dict[str, str] = {}
    phrases: dict[tuple[str, ...], str] = {}
    entries = 0
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        entries += 1
        form, sep, english = line.partition("\t")
        if not sep or not form.strip() or not english.strip():
            raise ValueError(f"{path.name} line {n}: expected 'form<TAB>english'")
        english = "" if english.strip() == "-" else english.strip()
        form = form.strip().lower().replace("’", "'")
        parts = WORD.findall(form)
        if len(parts) > 1:
            phrases.setdefault(tuple(fold(w) for w in parts), english)
            continue
        words.setdefault(form, english)
        words.setdefault(fold(form), english)
    return Glossary(path.stem, words, phrases, max((len(k) for k in phrases), default=1), entries)


@functools.cache
def glossaries(directory: str = str(GLOSSARY_DIR)) -> tuple[Glossary, ...]:
    return tuple(_read(p) for p in sorted(Path(directory).glob("*.tsv")))


def _own_files(extra_dir: str | None) -> list[Path]:
    """A help desk's own glossaries (INFERENCE_GLOSSARY_DIR): LANG.tsv files in that folder."""
    if not extra_dir:
        return []
    folder = Path(extra_dir)
    if not folder.is_dir():
        raise ConfigError(f"INFERENCE_GLOSSARY_DIR {extra_dir} is not a folder")
    files = sorted(folder.glob("*.tsv"))
    if not files:
        raise ConfigError(f"INFERENCE_GLOSSARY_DIR {extra_dir} holds no glossary (LANG.tsv files)")
    return files


def books_for(extra_dir: str | None = None) -> tuple[Glossary, ...]:
    """The bundled glossaries, with a help desk's own beside them: a file of theirs named like a bundled one
    (de.tsv) adds to it, its entries winning; others add a language. Read again when a file of theirs changes."""
    files = _own_files(extra_dir)
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _books(stamp)


@functools.cache
def _books(stamp: tuple) -> tuple[Glossary, ...]:
    books = {b.lang: b for b in glossaries()}
    for path, _, _ in stamp:
        try:
            book = _read(Path(path))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"INFERENCE_GLOSSARY_DIR: {exc}") from None
        base = books.get(book.lang)
        if base is not None:  # their entries first, the bundled ones for every other form
            book = Glossary(
                book.lang,
                {**base.words, **book.words},
                {**base.phrases, **book.phrases},
                max(base.longest, book.longest),
                base.entries + book.entries,
            )
        books[book.lang] = book
    return tuple(books[lang] for lang in sorted(books))


def glossary_digest(directory: str = str(GLOSSARY_DIR), extra_dir: str | None = None) -> str:
    """Of the glossaries read (the bundled ones in `directory` and a help desk's own) and this module's
    VERSION: part of the category head's fingerprint."""
    h = hashlib.sha256(VERSION.encode())
    for p in sorted(Path(directory).glob("*.tsv")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    for p in _own_files(extra_dir):
        h.update(b"own\0" + p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def language_of(words: Sequence[str], books: Sequence[Glossary]) -> tuple[Glossary | None, float]:
    """The glossary knowing the most of `words` (exact or folded forms, no compound splitting) and its share."""
    if not words:
        return None, 0.0
    best, best_share = None, 0.0
    for book in books:
        share = sum(1 for w in words if book.lookup(w) is not None) / len(words)
        if share > best_share:
            best, best_share = book, share
    return best, best_share


def language(text: str, books: Sequence[Glossary] | None = None) -> Glossary | None:
    """The glossary of `text`'s language: the one knowing most of its words, if it knows `MIN_COVERAGE`."""
    books = glossaries() if books is None else books
    book, share = language_of(WORD.findall(text)[:200], books)
    return book if share >= MIN_COVERAGE else None


def gloss(text: str, books: Sequence[Glossary] | None = None, book: Glossary | None = None) -> str | None:
    """`text` glossed into English word by word (digits, punctuation and line breaks kept), or None when no
    glossary covers it. `book`: gloss in that language (a sentence of a ticket whose language is known)."""
    book = book or language(text, books)
    if book is None:
        return None
    matches = list(WORD.finditer(text))
    pieces: list[str] = []
    pos = i = 0
    while i < len(matches):
        n, hit = _phrase_at(text, matches, i, book)
        if hit is None:
            hit = book.translate(matches[i].group())
            n = 1
        pieces.append(text[pos : matches[i].start()])
        pieces.append(matches[i].group() if hit is None else hit)
        pos = matches[i + n - 1].end()
        i += n
    pieces.append(text[pos:])
    out = _SPACES.sub(" ", "".join(pieces))
    return _BEFORE_PUNCT.sub(r"\1", out).strip()


def _phrase_at(text: str, matches: Sequence[re.Match], i: int, book: Glossary) -> tuple[int, str | None]:
    """The longest phrase of the glossary starting at word `i` (words apart by spaces or a hyphen)."""
    for n in range(min(book.longest, len(matches) - i), 1, -1):
        run = matches[i : i + n]
        if all(_JOINED.fullmatch(text[a.end() : b.start()]) for a, b in zip(run, run[1:], strict=False)):
            hit = book.phrase([m.group() for m in run])
            if hit is not None:
                return n, hit
    return 1, None


def languages(
    texts: Sequence[str], flags: Sequence[bool], books: Sequence[Glossary] | None = None, extra_dir: str | None = None
) -> dict:
    """Index -> glossary for the flagged texts a glossary covers (`books`, default the bundled glossaries and
    those of `extra_dir`; read only when a text is flagged)."""
    if not any(flags):
        return {}
    books = books_for(extra_dir) if books is None else books
    out = {}
    for k, (text, flag) in enumerate(zip(texts, flags, strict=True)):
        if flag:
            book = language(text, books)
            if book is not None:
                out[k] = book
    return out


def glossed(
    texts: Sequence[str], flags: Sequence[bool], books: Sequence[Glossary] | None = None, extra_dir: str | None = None
) -> dict[int, str]:
    """Index -> gloss for the flagged texts a glossary covers."""
    return {k: gloss(texts[k], book=book) for k, book in languages(texts, flags, books, extra_dir).items()}
