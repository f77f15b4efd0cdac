"""Stop names for a transit map: short, pronounceable words built from syllables drawn from the seed.

A name is two syllables (a consonant onset, a vowel, sometimes a closing consonant), or one syllable and a
place-name ending (``Kalby``, ``Dorwick``), 4 to 7 letters, capitalised. The names of one map are unique and
differ in their first three letters, so no name is a prefix of another and two are never read alike at a
glance; none is a word of the answer form (``ride``, ``to``, ``line``, ``the``) or a line's name.
"""

from __future__ import annotations

import numpy as np

_ONSETS = (
    "b", "br", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n",
    "p", "pr", "r", "s", "st", "t", "tr", "v", "w", "z",
)  # fmt: skip
#: Onsets of a second syllable: one consonant, so no cluster of three is ever spelled.
_INNER_ONSETS = ("b", "d", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o")
_CODAS = ("", "", "", "n", "r", "l", "s", "m")
_ENDINGS = ("by", "ton", "ham", "ley", "wick", "mere", "well", "dale")
MIN_LETTERS, MAX_LETTERS = 4, 7
#: Words a stop may not be called: the answer form's own.
RESERVED = frozenset({"ride", "to", "line", "the", "stop", "station"})
#: Names drawn before giving up (far more than any map's stops need: the draws rarely collide).
MAX_DRAWS = 20_000


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _syllable(rng: np.random.Generator, onsets: tuple[str, ...], closed: bool) -> str:
    onset = _pick(rng, onsets)
    return onset + _pick(rng, _VOWELS) + (_pick(rng, _CODAS) if closed else "")


def _name(rng: np.random.Generator) -> str:
    first = _syllable(rng, _ONSETS, closed=True)
    if rng.random() < 0.4:
        second = _pick(rng, _ENDINGS)
    else:
        second = _syllable(rng, _INNER_ONSETS, closed=rng.random() < 0.4)
    return (first + second).capitalize()


def stop_names(count: int, rng: np.random.Generator, taken: frozenset[str] = frozenset()) -> list[str]:
    """``count`` distinct names drawn from ``rng``, none (in lower case) in ``taken`` or :data:`RESERVED`,
    no two sharing their first three letters."""
    names: list[str] = []
    prefixes: set[str] = set()
    banned = RESERVED | {word.lower() for word in taken}
    for _ in range(MAX_DRAWS):
        if len(names) == count:
            return names
        name = _name(rng)
        low = name.lower()
        if not MIN_LETTERS <= len(name) <= MAX_LETTERS or low in banned or low[:3] in prefixes:
            continue
        names.append(name)
        prefixes.add(low[:3])
    raise ValueError(f"could not draw {count} distinct stop names")
