"""Settings the gateway refuses, with a message that says why, and a port
already in use: each stops the core at start instead of leaving a gateway
that never answers."""

from __future__ import annotations

import socket
import subprocess

import pytest

from conftest import CUMULO, free_port


def start_fails(tmp_path, settings: str) -> str:
    config = tmp_path / "cumulo.toml"
    config.write_text(
        f'[core]\nsocket = "{tmp_path}/cumulo.sock"\n\n'
        f'[[service]]\nprefix = "/"\ninternal = "http"\n[service.settings]\n{settings}\n'
    )
    run = subprocess.run([str(CUMULO), "run", "--config", str(config)], capture_output=True, text=True, timeout=10)
    assert run.returncode != 0
    return run.stdout + run.stderr


@pytest.mark.parametrize(
    "settings, message",
    [
        ("prot = 8080", "unknown setting 'prot'"),
        ('port = "8080"', "settings.port must be an integer"),
        ("port = 99999", "settings.port = 99999 is out of range"),
        ('query_format = "json"', 'settings.query_format must be "kv" or "raw"'),
        ('address = "0.0.0.0"\nport = 0', "is not a loopback address; set settings.allow_remote = true"),
        ('access_log = "/no/such/dir/access.log"\nport = 0', "http: cannot open access_log /no/such/dir/access.log"),
        ("headers = 1", 'settings.headers must be "all", "none" or a list of header names'),
    ],
)
def test_bad_settings_are_refused(built, tmp_path, settings, message):
    assert message in start_fails(tmp_path, settings)


def test_port_in_use_is_a_clear_error(built, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = start_fails(tmp_path, "port = %d" % port)
    assert "http: cannot listen on 127.0.0.1:%d" % port in out
    assert "in use" in out


def test_free_port_helper_gives_a_bindable_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
