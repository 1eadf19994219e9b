"""{{name}}: a cumulo service. Subscribes ``{{name}}/get`` under its prefix and
answers "hello from {{name}}", with the request's ``value`` parameter when it
has one. Runs CUMULO_THREAD_COUNT instances, one per thread."""

import sys

sys.path.append("{{sdk}}/python/src")  # the SDK's source, where it is not installed
import cumulo  # noqa: E402

TEXT = cumulo.info_encode([("content-type", "text/plain; charset=utf-8")])


def get(api: cumulo.API, request: cumulo.Request) -> "tuple[bytes, bytes]":
    try:
        value = dict(cumulo.info_parse(request.request)).get(b"value")
    except cumulo.DecodeError:  # malformed key/value bytes: as if there were no value
        value = None
    if value is None:
        return TEXT, b"hello from {{name}}"
    return TEXT, b"hello from {{name}} (value %s)" % value


if __name__ == "__main__":
    cumulo.run(lambda api: api.subscribe("{{name}}/get", get))
