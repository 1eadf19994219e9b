#!/usr/bin/env python3
"""A calculator behind the HTTP gateway: POST /calculator/add (also sub, mul,
div) with the JSON body {"args": [a, b]} answers {"result": x}.

Each operation is its own service name (/calculator/add/post, ...), so the
gateway routes by URL. A bad body, or a division by zero, is answered with
HTTP status 400 through response_info and a JSON {"error": ...}.
"""

from __future__ import annotations

import json
import operator
import os
import sys
from numbers import Real
from typing import Callable, Tuple

try:
    import cumulo
except ImportError:  # not installed: use the SDK of this source tree
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python", "src"))
    import cumulo

JSON = ("content-type", "application/json")
Answer = Tuple[list, bytes]


class BadRequest(ValueError):
    pass


def operands(body: bytes) -> Tuple[Real, Real]:
    try:
        args = json.loads(body)["args"]
    except (ValueError, KeyError, TypeError):
        raise BadRequest('the body must be JSON like {"args": [a, b]}') from None
    numbers = isinstance(args, list) and all(isinstance(a, Real) and not isinstance(a, bool) for a in args)
    if not numbers or len(args) != 2:
        raise BadRequest('"args" must be a list of two numbers')
    return args[0], args[1]


def divide(a: Real, b: Real) -> Real:
    if b == 0:
        raise BadRequest("division by zero")
    return a / b


def worker(api: cumulo.API) -> Tuple[str, str]:
    """A response header naming the instance that answered (process.thread):
    the 4 instances share every name, and the core takes them in turn."""
    return ("x-calculator-worker", "%d.%d" % (api.process_index, api.thread_index))


def answer(operation: Callable[[Real, Real], Real]) -> Callable[[cumulo.API, cumulo.Request], Answer]:
    def handler(api: cumulo.API, request: cumulo.Request) -> Answer:
        try:
            result = operation(*operands(request.request))
        except BadRequest as why:
            return [("status", "400"), JSON, worker(api)], json.dumps({"error": str(why)}).encode()
        return [JSON, worker(api)], json.dumps({"result": result}).encode()

    return handler


OPERATIONS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": divide}


def setup(api: cumulo.API) -> None:
    for name, operation in OPERATIONS.items():
        api.subscribe(name + "/post", answer(operation))


if __name__ == "__main__":
    cumulo.run(setup)
