"""examples/users behind the gateway, run from its own config file: the same
users API in Ruby (port 9080 in the example) and in JavaScript (9050)."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, Core, free_port
from gateway_client import request

EXAMPLE = ROOT / "examples" / "users"
USERS = b'{"users":[{"id":1,"name":"alicia"}]}'
LANGUAGES = ("ruby", "javascript")


@pytest.fixture(scope="module")
def users(built, tmp_path_factory):
    for program in ("ruby", "node"):
        if shutil.which(program) is None:
            pytest.fail("%s is needed for examples/users (scripts/setup.sh installs it)" % program)
    work = tmp_path_factory.mktemp("users")
    ports = {"ruby": free_port(), "javascript": free_port()}
    config = (EXAMPLE / "cumulo.toml").read_text()
    config = re.sub(r'(?m)^socket = ".*"$', 'socket = "%s/cumulo.sock"' % work, config)
    config = config.replace("port = 9080", "port = %d" % ports["ruby"])
    config = config.replace("port = 9050", "port = %d" % ports["javascript"])
    # Run from the example's folder, as `cumulo run -c examples/users/cumulo.toml` would.
    config = config.replace('args = ["ruby/', 'args = ["%s/ruby/' % EXAMPLE)
    config = config.replace('args = ["javascript/', 'args = ["%s/javascript/' % EXAMPLE)
    core = Core(config, work)
    try:
        for port in ports.values():
            core.wait_served(port, ["/v1/users"])
        yield ports
    finally:
        core.stop()


@pytest.mark.parametrize("language", LANGUAGES)
def test_users_answers_the_json_list(users, language):
    r = request(users[language], "GET", "/v1/users")
    assert r.status == 200
    assert r.header("content-type") == "application/json"
    assert r.header("content-length") == "36"
    assert r.body == USERS
    assert json.loads(r.body) == {"users": [{"id": 1, "name": "alicia"}]}


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_port_reaches_only_its_language(users, language):
    # The gateway's name_prefix keeps the two services apart: a path that is
    # not /v1/users is no service on either port; another method of it is
    # not allowed.
    assert request(users[language], "GET", "/v1/users/1").status == 404
    r = request(users[language], "POST", "/v1/users", body=b"{}")
    assert (r.status, r.header("allow")) == (405, "GET"), r


@pytest.mark.parametrize("language", LANGUAGES)
def test_concurrent_clients_all_get_the_body(users, language):
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda _: request(users[language], "GET", "/v1/users"), range(200)))
    assert [(r.status, r.body) for r in replies] == [(200, USERS)] * 200
