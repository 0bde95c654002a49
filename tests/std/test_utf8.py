"""A big text's UTF-8 bytes are encoded once: the writer takes what the digest was taken of."""

from __future__ import annotations

from relaxrepro.std import utf8


def _big(s: str) -> str:
    return (s * (utf8.KEPT_MIN_CHARS // len(s) + 1))[:utf8.KEPT_MIN_CHARS + 1]


def test_the_bytes_kept_for_a_text_are_taken_once() -> None:
    text = _big("café \udcff x\n")
    data = text.encode("utf-8", "surrogateescape")
    utf8.keep(text, data)
    assert utf8.take(text) is data
    again = utf8.take(text)  # taken already: encoded here, the same bytes
    assert again == data and again is not data


def test_an_equal_text_that_is_another_object_is_encoded_anew() -> None:
    text = _big("token ’ x\n")
    data = text.encode("utf-8")
    utf8.keep(text, data)
    copy = "".join(list(text))
    assert copy == text and copy is not text
    assert utf8.take(copy) == data and utf8.take(copy) is not data
    utf8.forget(text)
    assert utf8.take(text) is not data


def test_short_texts_are_not_kept_and_the_oldest_go_first() -> None:
    short = "a" * 10
    utf8.keep(short, b"a" * 10)
    assert utf8.take(short) == b"a" * 10
    texts = [_big("%d\n" % i) for i in range(20)]
    datas = [t.encode() for t in texts]
    for t, d in zip(texts, datas):
        utf8.keep(t, d)
    assert utf8.take(texts[-1]) is datas[-1] and utf8.take(texts[0]) is not datas[0]
    for t in texts:
        utf8.forget(t)
