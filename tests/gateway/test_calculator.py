"""examples/calculator behind the gateway, run from its own config file."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, Core, free_port
from gateway_client import request

EXAMPLE = ROOT / "examples" / "calculator"


@pytest.fixture(scope="module")
def calculator(built, tmp_path_factory):
    work = tmp_path_factory.mktemp("calculator")
    port = free_port()
    config = (EXAMPLE / "cumulo.toml").read_text()
    config = re.sub(r'(?m)^socket = ".*"$', 'socket = "%s/cumulo.sock"' % work, config)
    config = re.sub(r"(?m)^port = 8080$", "port = %d" % port, config)
    # Run from the example's folder, as `cumulo run -c examples/calculator/cumulo.toml` would.
    config = config.replace('args = ["calculator.py"]', 'args = ["%s"]' % (EXAMPLE / "calculator.py"))
    core = Core(config, work)
    try:
        ops = ["/calculator/" + op for op in ("add", "sub", "mul", "div")]
        core.wait_served(port, ops, method="POST", body=b'{"args": [1, 1]}')
        yield port
    finally:
        core.stop()


def call(port: int, op: str, body) -> tuple:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = request(port, "POST", "/calculator/" + op, body=raw)
    assert r.header("content-type") == "application/json"
    return r.status, json.loads(r.body)


def test_operations(calculator):
    assert call(calculator, "add", {"args": [2, 3]}) == (200, {"result": 5})
    assert call(calculator, "sub", {"args": [2, 3.5]}) == (200, {"result": -1.5})
    assert call(calculator, "mul", {"args": [6, 7]}) == (200, {"result": 42})
    assert call(calculator, "div", {"args": [7, 2]}) == (200, {"result": 3.5})


def test_division_by_zero_is_400(calculator):
    assert call(calculator, "div", {"args": [1, 0]}) == (400, {"error": "division by zero"})


def test_bad_bodies_are_400(calculator):
    for body in (b"not json", {"args": [1]}, {"args": [1, "2"]}, {"args": [True, 1]}, {"nums": [1, 2]}):
        status, answer = call(calculator, "add", body)
        assert status == 400 and "error" in answer, body


def test_get_is_not_an_operation(calculator):
    r = request(calculator, "GET", "/calculator/add")
    assert (r.status, r.header("allow")) == (405, "POST"), r
    assert request(calculator, "GET", "/calculator/pow").status == 404


def test_four_workers_share_each_name_in_turn(calculator):
    # 2 processes x 2 threads subscribe every operation; sequential requests
    # go to each instance in turn (round robin). The fixture waits for the
    # first answer, not for the last instance to subscribe: first see all four.
    def worker():
        return request(calculator, "POST", "/calculator/add", body=b'{"args": [1, 2]}').header("x-calculator-worker")

    seen = set()
    for _ in range(200):
        seen.add(worker())
        if len(seen) == 4:
            break
    assert sorted(seen) == ["0.0", "0.1", "1.0", "1.1"], seen
    workers = [worker() for _ in range(8)]
    assert sorted(set(workers)) == ["0.0", "0.1", "1.0", "1.1"], workers
    assert workers[:4] == workers[4:], workers
