"""Text that came from a user (file names, class names, run names, URL values, the messages that quote them)
shown by Streamlit elements that read Markdown (``st.warning``, ``st.error``, ``st.caption``, ``st.markdown``,
image captions, progress texts, subheaders): :func:`plain` makes it show as the text it is."""

from __future__ import annotations

import re

# what can start a link, an image, HTML or an autolink (<...>), emphasis, code, strikethrough, a formula or a
# Streamlit directive (:red[...]); an underscore only where it can open or close emphasis (not inside a word,
# so "relu_core.limits" reads as it is)
_INLINE = re.compile(r"([\\`*\[\]<>$~])|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# a heading or a list when the text starts with it ("> quote" and "* item" are escaped above)
_HEADING_OR_BULLET = re.compile(r"^(?=(?:#{1,6}|[-+])(?:\s|$))")
_NUMBERED = re.compile(r"^(\d{1,9})(?=[.)](?:\s|$))")
# GitHub-flavoured Markdown links bare URLs and e-mail addresses, escapes or not: an invisible word joiner
# inside "://", "www." and "name@host" keeps them text
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=\w)", re.IGNORECASE)
_WORD_JOINER = "\u2060"
# characters that would act instead of showing (NUL, ESC and the other C0 controls, DEL, C1 controls, bidirectional
# overrides): each is shown as a visible stand-in, so that a link's "evil\x00\x1b[2J" reads "evil␀␛[2J"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode's control pictures: ␀ ... ␛ ...
    return "\u2421" if code == 0x7F else "\ufffd"


def plain(text: object) -> str:
    """``text`` on one line, as Markdown that renders as that text: no link, image, HTML, emphasis, heading,
    list, formula or colour directive from what a user typed or named (escaped with backslashes, which the
    page does not show); control characters are shown as visible stand-ins (NUL as ␀, ESC as ␛, a C1 control or a
    bidirectional override as �), never passed on."""
    line = _CONTROL.sub(_visible, " ".join(str(text).split()))
    line = _INLINE.sub(lambda m: "\\" + m.group(0), _AUTOLINK.sub(_WORD_JOINER, line))
    return _NUMBERED.sub(r"\1\\", _HEADING_OR_BULLET.sub(r"\\", line))


#: Words that start with a vowel letter but a consonant sound ("a unicorn", "a one-piece"), and with a consonant
#: letter but a vowel sound ("an hour").
_A_BEFORE = re.compile(r"^(?:uni|use|usu|uti|ure|eu|one|once)", re.IGNORECASE)
_AN_BEFORE = re.compile(r"^(?:hour|honest|honou?r|heir)", re.IGNORECASE)
# numbers read with a vowel sound: 8, 11, 18, 80-89, 800-899 ... ("an 8")
_AN_NUMBER = re.compile(r"^(?:8|11(?!\d)|18(?!\d)|11\d{3}(?!\d)|18\d{3}(?!\d))")


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an" as it is said: "an airplane", "a cat", "an 8", "a T-shirt/top", "an Ankle
    boot", "a unicycle" (class names, in a sentence)."""
    word = str(noun).strip()
    if _A_BEFORE.match(word):
        return f"a {word}"
    if _AN_BEFORE.match(word) or _AN_NUMBER.match(word) or (word != "" and word[0].lower() in "aeiou"):
        return f"an {word}"
    return f"a {word}"
