"""Every language's http_req example answers as docs/SDK_GUIDE.md says."""

from __future__ import annotations

import pytest

from conftest import HTTP_REQ, LANGUAGES, NO_VALUE, XML_INFO, cell, value_xml


# (id, request body, expected response body)
CASES = [
    ("42", b"value\x0042\x00", value_xml(42)),
    ("plus-leading-zeros", b"value\x00+007\x00", value_xml(7)),
    ("negative", b"value\x00-3\x00", value_xml(-3)),
    ("leading-zeros", b"value\x00007\x00", value_xml(7)),
    ("minus-zero", b"value\x00-0\x00", value_xml(0)),
    ("i64-max", b"value\x009223372036854775807\x00", value_xml("9223372036854775807")),
    ("i64-min", b"value\x00-9223372036854775808\x00", value_xml("-9223372036854775808")),
    ("other-keys-around", b"a\x00b\x00value\x005\x00z\x00\x00", value_xml(5)),
    ("i64-max-plus-1", b"value\x009223372036854775808\x00", NO_VALUE),
    ("i64-min-minus-1", b"value\x00-9223372036854775809\x00", NO_VALUE),
    ("huge", b"value\x00" + b"9" * 40 + b"\x00", NO_VALUE),
    ("abc", b"value\x00abc\x00", NO_VALUE),
    ("empty-value", b"value\x00\x00", NO_VALUE),
    ("sign-only", b"value\x00-\x00", NO_VALUE),
    ("double-sign", b"value\x00+-1\x00", NO_VALUE),
    ("leading-space", b"value\x00 42\x00", NO_VALUE),
    ("trailing-space", b"value\x0042 \x00", NO_VALUE),
    ("hex", b"value\x000x10\x00", NO_VALUE),
    ("underscore", b"value\x001_000\x00", NO_VALUE),
    ("exponent", b"value\x001e3\x00", NO_VALUE),
    ("decimal", b"value\x001.0\x00", NO_VALUE),
    ("arabic-indic-digits", b"value\x00" + "\u0664\u0662".encode() + b"\x00", NO_VALUE),
    ("fullwidth-digits", b"value\x00" + "\uff14\uff12".encode() + b"\x00", NO_VALUE),
    ("not-utf8", b"value\x00\xff\x00", NO_VALUE),
    ("no-value-key", b"other\x0042\x00", NO_VALUE),
    ("key-case", b"Value\x0042\x00", NO_VALUE),
    ("key-prefix", b"values\x0042\x00", NO_VALUE),
    ("value-as-value", b"key\x00value\x0042\x00", NO_VALUE),  # malformed: odd number of fields
    ("empty-body", b"", NO_VALUE),
    ("malformed-key-only", b"value\x00", NO_VALUE),
    ("malformed-no-final-nul", b"value\x0042", NO_VALUE),
    ("malformed-odd-fields", b"value\x0042\x00extra\x00", NO_VALUE),
    ("malformed-trailing-bytes", b"value\x0042\x00x", NO_VALUE),
]


def _params():
    for lang in LANGUAGES:
        for case, body, expected in CASES:
            yield pytest.param(lang, body, expected, id=f"{lang}-{case}", marks=cell(lang, "http_req"))


@pytest.mark.parametrize("lang,body,expected", list(_params()))
def test_http_req(api, lang, body, expected):
    info, response = api.send_sync(HTTP_REQ.format(lang), body, timeout=10_000)
    assert (response, info) == (expected, XML_INFO)
