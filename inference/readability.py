"""Can an English-only encoder read this ticket? A cheap signal from the text and its tokens, no model call.

The bundled all-MiniLM-L6-v2 was trained on English: on the project's own sets, tickets in other languages
are classified far worse (0.636 against 0.939) and often confidently. The category head marks a ticket it
cannot read `uncertain` (INFERENCE_FLAG_UNREADABLE, on by default; turn it off for a multilingual
INFERENCE_MODEL), and reads it through an English gloss where it can (inference.gloss). Judged on the first
60 words (the prose; pasted logs and quoted threads come later):

- mostly letters outside the Latin script, or many unknown tokens: unreadable;
- with at least 4 words: more function words of other Latin-script languages than English ones, or almost
  no English function words while the tokenizer has to cut the words into pieces (a language it has no
  vocabulary for; telegraphic English like "troubles entering another shipping address" is cut into
  whole words);
- texts of 1 to 3 words, too short for shares: unreadable when they hold no English function word and one
  glossary (inference.gloss) knows most of their words, one of which it translates into something else
  and the tokenizer has no whole token for ("Passwort vergessen", "remboursement svp"); short English
  ("cancelling pro account", "refund pls") keeps whole tokens for the words a glossary knows.

Tuned in benchmarks/tune_categories.py (`unreadable`); measured in BENCHMARKS.md.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from inference.mailtext import EN_FUNCTION_WORDS, WORD

VERSION = "readability-2"  # part of the category head's fingerprint: change it when the rules change
SHORT_WORDS = 4  # texts with fewer words are too short for shares and are judged word by word (`_foreign_short`)
SHORT_KNOWN = 0.6  # share of a short text's words its glossary must know

# Frequent function words of the other languages tickets arrive in (Latin script), minus any that are
# also English words ("die", "den", "in", "was", "also", "a", "no", "me", ...).
_OTHER_WORDS = frozenset(
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
OTHER_FUNCTION_WORDS = _OTHER_WORDS - EN_FUNCTION_WORDS


@dataclass(frozen=True)
class Readability:
    words: int
    function_share: float  # share of words (first 60) that are English function words
    other_share: float  # share of words (first 60) that are function words of other Latin-script languages
    nonlatin_share: float  # share of letters outside the Latin script
    fragment_share: float  # share of word-piece continuation tokens among word tokens
    unk_share: float  # share of unknown tokens
    foreign_short: bool = False  # 1-3 words of another language (`_foreign_short`)


def readability(text: str, tokens: Sequence[str] = (), first_words: int = 60) -> Readability:
    """`tokens`: the tokenizer's token strings for `text` (WordPiece: "##" continuations, "[UNK]");
    without them the token-based shares are 0."""
    words = [w.lower() for w in WORD.findall(text)][:first_words]
    letters = [c for c in text if c.isalpha()]
    nonlatin = sum(1 for c in letters if not unicodedata.name(c, "").startswith("LATIN")) / max(len(letters), 1)
    func = sum(1 for w in words if w in EN_FUNCTION_WORDS) / max(len(words), 1)
    other = sum(1 for w in words if w in OTHER_FUNCTION_WORDS) / max(len(words), 1)
    special = {"[CLS]", "[SEP]", "<s>", "</s>"}
    pieces = [t for t in tokens if t not in special and any(ch.isalpha() for ch in t)]
    frag = sum(1 for t in pieces if t.startswith("##")) / max(len(pieces), 1)
    real = [t for t in tokens if t not in special]
    unk = sum(1 for t in real if t in ("[UNK]", "<unk>")) / max(len(real), 1)
    short = 0 < len(words) < SHORT_WORDS and func == 0 and _foreign_short(words, pieces)
    return Readability(len(words), func, other, nonlatin, frag, unk, short)


def _plain(word: str) -> str:
    """Lower case without accents, as an uncased WordPiece tokenizer sees a word (inference.gloss.fold also
    spells out letters such as "ß" and "ł", which the tokenizer keeps)."""
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if not unicodedata.combining(c))


def _split_words(pieces: Sequence[str]) -> set[str]:
    """The words the tokenizer had to cut into pieces (a first piece and "##" continuations)."""
    out, current, parts = set(), "", 0
    for t in [*pieces, ""]:
        if t.startswith("##"):
            current, parts = current + t[2:], parts + 1
            continue
        if parts > 1:
            out.add(current)
        current, parts = t, 1
    return out


def _foreign_short(words: Sequence[str], pieces: Sequence[str]) -> bool:
    """Most of `words` are known to one glossary, and one of them it translates into another word and the
    tokenizer has no whole token for (so not a loanword or an English word the glossary happens to list)."""
    if not pieces:
        return False
    from inference.gloss import glossaries

    split = _split_words(pieces)
    for book in glossaries():
        hits = [book.lookup(w) for w in words]
        if sum(h is not None for h in hits) / len(words) < SHORT_KNOWN:
            continue
        if any(
            h is not None and _plain(h) != _plain(w) and _plain(w) in split for w, h in zip(words, hits, strict=True)
        ):
            return True
    return False


def unreadable(
    r: Readability,
    min_words: int = SHORT_WORDS,
    min_english: float = 0.12,
    nonlatin: float = 0.3,
    fragments: float = 0.2,
) -> bool:
    """Not English enough for an English-only encoder (see the module docstring)."""
    if r.nonlatin_share >= nonlatin or r.unk_share >= 0.2:
        return True
    if r.words < min_words:
        return r.foreign_short
    return r.other_share > r.function_share or (r.function_share < min_english and r.fragment_share >= fragments)


def unreadable_flags(texts: Sequence[str], tokens: Sequence[Sequence[str]] | None = None) -> list[bool]:
    if tokens is None:
        tokens = [()] * len(texts)
    return [unreadable(readability(t, tk)) for t, tk in zip(texts, tokens, strict=True)]
