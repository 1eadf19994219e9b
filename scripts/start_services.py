#!/usr/bin/env python3
"""The example services of start.sh, by language (examples/cumulo.toml).

  config EXAMPLES OUT LANG...   write OUT: EXAMPLES with only the services of
                                these languages (and those of none: echo,
                                the gateway), its relative paths made absolute
  gateway CONFIG                print the URL of CONFIG's HTTP gateway
  serving CONFIG LANG           wait until LANG's services in the running
                                core of CONFIG subscribe; print their patterns
  add CONFIG EXAMPLES LANG      add LANG's services of EXAMPLES to the running
                                core of CONFIG (POST /v1/services), then as
                                `serving`

A service's language is the folder of its program under examples/http_req/
(python_c and python_cloudi are Python's, javascript_cloudi JavaScript's);
the Rust examples are target/release/http_req and http_req_cloudi, the
latter `rust_cloudi` (a build of its own: crates.io's cloudi).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

SAME_LANGUAGE = {"python_c": "python", "python_cloudi": "python", "javascript_cloudi": "javascript"}
# Keys holding a file path relative to the config's folder, wherever they
# are: core.socket, token files, TLS files (a service's path and dir: below).
PATH_KEY = re.compile(r"socket|.*_file|tls_(cert|key|client_ca)")


def language(service: dict) -> str | None:
    for word in [service.get("path", "")] + service.get("args", []):
        m = re.search(r"(?:^|/)http_req/(\w+)/", word)
        if m:
            return SAME_LANGUAGE.get(m.group(1), m.group(1))
        m = re.search(r"target/release/http_req(_cloudi)?$", word)
        if m:
            return "rust" + (m.group(1) or "")
    return None


def absolute(value, base: Path, key: str = ""):
    """value with the relative paths under PATH_KEY keys made absolute."""
    if isinstance(value, dict):
        return {k: absolute(v, base, k) for k, v in value.items()}
    if isinstance(value, list):
        return [absolute(v, base, key) for v in value]
    if isinstance(value, str) and value and PATH_KEY.fullmatch(key) and not value.startswith("/"):
        return str(base / value)
    return value


def service(s: dict, base: Path) -> dict:
    """A [[service]] table that means the same in a config in another folder."""
    s = absolute(s, base)
    path = s.get("path")
    if path is not None:
        # a path without a slash is a command looked up in PATH
        if "/" in path and not path.startswith("/"):
            s["path"] = str(base / path)
        # the processes run in the config's folder (their args are relative to it)
        s["dir"] = str(base / s.get("dir", "."))
    return s


def toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise ValueError(f"cannot write {v!r} as TOML")


def table(header: str, t: dict) -> str:
    return header + "\n" + "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in t.items())


def load(path: str) -> tuple[dict, Path]:
    p = Path(path).resolve()
    with open(p, "rb") as f:
        return tomllib.load(f), p.parent


def config(examples: str, out: str, languages: list[str]) -> None:
    doc, base = load(examples)
    services = doc.pop("service", [])
    port = os.environ.get("CUMULO_START_ADMIN_PORT")
    if port:
        doc.setdefault("admin", {})["port"] = int(port)
    port = os.environ.get("CUMULO_START_GATEWAY_PORT")
    for s in services:
        if port and s.get("internal") == "http":
            s.setdefault("settings", {})["port"] = int(port)
    parts = [f"# Written by start.sh from {examples}: the services of {', '.join(languages)}\n"]
    for key, value in absolute(doc, base).items():
        if isinstance(value, list):  # [[client]]
            parts += [table(f"[[{key}]]", t) for t in value]
        else:
            parts.append(table(f"[{key}]", value))
    for s in services:
        if language(s) is None or language(s) in languages:
            parts.append(table("[[service]]", service(s, base)))
    Path(out).write_text("\n".join(parts))


class Admin:
    def __init__(self, config_path: str):
        doc, base = load(config_path)
        a = doc.get("admin", {})
        self.url = f"http://{a.get('address', '127.0.0.1')}:{a.get('port', 7311)}"
        token = a.get("token")
        if a.get("token_file"):
            token = (base / a["token_file"]).read_text().splitlines()[0]
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise SystemExit(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}") from None


def serving(admin: Admin, ids: list[int], timeout: float) -> None:
    """Prints the patterns of the services `ids` once each subscribes one."""
    deadline = time.monotonic() + timeout
    while True:
        subs = admin.call("GET", "/v1/subscriptions")["subscriptions"]
        patterns = {
            i: sorted({s["pattern"] for s in subs for x in s["instances"] if x["service_id"] == i}) for i in ids
        }
        if all(patterns.values()):
            print(" ".join(sorted({p for ps in patterns.values() for p in ps})))
            return
        status = {s["id"]: s["status"] for s in admin.call("GET", "/v1/services")["services"]}
        waiting = [i for i in ids if not patterns[i]]
        failed = [i for i in waiting if status.get(i) == "failed"]
        if failed or time.monotonic() > deadline:
            why = (
                "failed (its processes exited; the core's log says why)"
                if failed
                else f"not subscribed after {timeout:.0f}s"
            )
            raise SystemExit(f"service {', '.join(map(str, failed or waiting))}: {why}")
        time.sleep(0.3)


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    if cmd == "config":
        config(args[0], args[1], args[2:])
        return
    if cmd == "gateway":
        doc, _ = load(args[0])
        http = next(s.get("settings", {}) for s in doc.get("service", []) if s.get("internal") == "http")
        host = http.get("address", "127.0.0.1").replace("0.0.0.0", "127.0.0.1")
        print(f"http://{host}:{http.get('port', 8080)}")
        return
    admin, lang = Admin(args[0]), args[-1]
    if cmd == "serving":
        doc, _ = load(args[0])
        ids = [i for i, s in enumerate(doc.get("service", []), 1) if language(s) == lang]
    elif cmd == "add":
        doc, base = load(args[1])
        services = [service(s, base) for s in doc.get("service", []) if language(s) == lang]
        ids = admin.call("POST", "/v1/services", services)["ids"]
    else:
        raise SystemExit(__doc__)
    # a JVM or an Erlang VM is given timeout_init to start (30 s in the examples)
    limit = max([s.get("timeout_init", 5000) for s in doc.get("service", []) if language(s) == lang] + [5000])
    serving(admin, ids, limit / 1000 + 30)


if __name__ == "__main__":
    main(sys.argv[1:])
