"""Faulty service: /tests/faulty/python/boom raises, /ok answers "ok"."""

import cumulo


class FaultyError(Exception):
    pass


def boom(api: cumulo.API, request: cumulo.Request) -> bytes:
    raise FaultyError("boom from python")


def setup(api: cumulo.API) -> None:
    api.subscribe("boom", boom)
    api.subscribe("ok", lambda api, request: b"ok")


if __name__ == "__main__":
    cumulo.run(setup)
