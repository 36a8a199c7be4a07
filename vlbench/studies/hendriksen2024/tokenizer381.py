"""NLTK 3.8.1's word tokenizer, so that the authors-compatible perturbations do not depend on the installed NLTK.

The authors pinned NLTK 3.8.1. Later releases changed the word tokenizer (``NLTKWordTokenizer``, what
``nltk.word_tokenize`` runs on each Punkt sentence) in three ways that change tokens of real captions:
an opening single quote is split from any following word (3.8.1: only from a one-letter word, so "'walk"
stays one token), whitespace is collapsed before the clitic rules, and figure / en / em dashes are split.
With NLTK 3.10.4 the compatible synonyms differ from the authors' output on 3 of the 25,000 COCO test
captions ("the word 'walk'", "reading 'Alameda Street'", "a 'No Parking' sign"). This module applies the
rule passes of 3.8.1 itself (the same regular expressions, in the same order), checked equal to NLTK 3.8.1's
tokenizer on all 30,000 COCO and Flickr30k test captions.
"""

from __future__ import annotations

import re

#: the word-tokenizer rules the compatible synonyms and trigram shuffles use, whatever NLTK is installed
TOKENIZER = "NLTKWordTokenizer of NLTK 3.8.1 (the authors' pin), reimplemented in vlbench; Punkt sentences"


def _rules():
    """The rule passes of NLTK 3.8.1's ``NLTKWordTokenizer`` (what ``word_tokenize`` runs on each sentence), in
    their order. Later NLTK releases changed three of them, which changes the output on real captions:
    3.9+ splits an opening single quote from any following word (3.8.1 only from a one-letter word: "'A"),
    collapses whitespace before the clitic rules, and splits figure/en/em dashes. vlbench applies the 3.8.1
    passes itself, so the compatible perturbations do not depend on the NLTK version."""
    c = re.compile
    starting = [(c("([«“‘„]|[`]+)"), r" \1 "), (c(r"^\""), r"``"), (c(r"(``)"), r" \1 "),
                (c(r"([ \(\[{<])(\"|\'{2})"), r"\1 `` "),
                (c(r"(?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b"), r"\1 \2")]  # 3.8.1: a one-letter word only
    punctuation = [(c(r'([^\.])(\.)([\]\)}>"\'' "»”’ " r"]*)\s*$"), r"\1 \2 \3 "),
                   (c(r"([:,])([^\d])"), r" \1 \2"), (c(r"([:,])$"), r" \1 "), (c(r"\.{2,}"), r" \g<0> "),
                   (c(r"[;@#$%&]"), r" \g<0> "), (c(r'([^\.])(\.)([\]\)}>"\']*)\s*$'), r"\1 \2\3 "),
                   (c(r"[?!]"), r" \g<0> "), (c(r"([^'])' "), r"\1 ' "), (c(r"[*]"), r" \g<0> ")]
    brackets = [(c(r"[\]\[\(\)\{\}\<\>]"), r" \g<0> "), (c(r"--"), r" -- ")]
    ending = [(c("([»”’])"), r" \1 "), (c(r"''"), " '' "), (c(r'"'), " '' "),
              (c(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
              (c(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 ")]
    contractions = [(c(p), r" \1 \2 ") for p in (
        r"(?i)\b(can)(?#X)(not)\b", r"(?i)\b(d)(?#X)('ye)\b", r"(?i)\b(gim)(?#X)(me)\b", r"(?i)\b(gon)(?#X)(na)\b",
        r"(?i)\b(got)(?#X)(ta)\b", r"(?i)\b(lem)(?#X)(me)\b", r"(?i)\b(more)(?#X)('n)\b",
        r"(?i)\b(wan)(?#X)(na)(?=\s)", r"(?i) ('t)(?#X)(is)\b", r"(?i) ('t)(?#X)(was)\b")]
    return starting + punctuation + brackets, ending + contractions


_RULES = None


def tokenize_sentence(sentence: str) -> list[str]:
    """NLTK 3.8.1's word tokenization of one sentence (``NLTKWordTokenizer().tokenize``)."""
    global _RULES
    if _RULES is None:
        _RULES = _rules()
    before, after = _RULES
    text = sentence
    for pattern, repl in before:
        text = pattern.sub(repl, text)
    text = " " + text + " "
    for pattern, repl in after:
        text = pattern.sub(repl, text)
    return text.split()


