"""The `filesystem` internal service through the real gateway: content
types, validators and 304s, byte ranges, index files, refusals of paths that
leave the directory, large files streamed, a file changed on disk served
fresh after the refresh interval, and the same service asked by name from
another service."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from conftest import CUMULO, Core, free_port
from gateway_client import raw_exchange, request

FETCH = Path(__file__).resolve().parent / "services" / "fetch.py"
REFRESH_MS = 300
CACHE_FILE_MAX = 64 * 1024
MAX_ANSWER = 1024 * 1024
BIG = bytes(range(256)) * (3 * 4096)  # 3 MiB: over cache_file_max and max_answer
# 48 KiB: cached, and large enough that the gateway takes the cache's bytes
# uncopied (stream.rs MEMORY_MIN, 16 KiB)
MID = bytes(reversed(range(256))) * (48 * 4)
SECRET = b"outside the served directory\n"


class Static:
    def __init__(self, core: Core, port: int, root: Path) -> None:
        self.core, self.port, self.root = core, port, root

    def get(self, path: str, headers: dict | None = None, method: str = "GET"):
        return request(self.port, method, path, headers=headers)


@pytest.fixture(scope="module")
def static(built: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Static]:
    work = tmp_path_factory.mktemp("static")
    root = work / "public"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_bytes(b"hello, files\n")
    (root / "page.html").write_bytes(b"<p>page</p>\n")
    (root / "app.js").write_bytes(b"console.log(1)\n")
    (root / "index.html").write_bytes(b"<h1>root index</h1>\n")
    (root / "sub" / "index.html").write_bytes(b"<h1>sub index</h1>\n")
    (root / "big.bin").write_bytes(BIG)
    (root / "mid.bin").write_bytes(MID)
    (root / ".hidden").write_bytes(b"hidden\n")
    (work / "secret.txt").write_bytes(SECRET)
    os.symlink(work / "secret.txt", root / "link-out")
    os.symlink(root / "a.txt", root / "link-in")
    port = free_port()
    config = f"""
[core]
socket = "{work}/cumulo.sock"

[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {port}

[[service]]
prefix = "/static/"
internal = "filesystem"
[service.settings]
directory = "{root}"
refresh_ms = {REFRESH_MS}
cache_file_max = {CACHE_FILE_MAX}
max_answer = {MAX_ANSWER}

[[service]]
prefix = "/fetch/"
path = "{sys.executable}"
args = ["{FETCH}"]
env = {{ PYTHONUNBUFFERED = "1", CUMULO_PURE_PYTHON = "1" }}
"""
    core = Core(config, work)
    try:
        core.wait_served(port, ["/static/a.txt", "/fetch?name=/static/a.txt/get"])
        yield Static(core, port, root)
    finally:
        core.stop()


def test_a_file_with_its_type_and_validators(static: Static) -> None:
    r = static.get("/static/a.txt")
    assert r.status == 200 and r.body == b"hello, files\n"
    assert r.header("content-type") == "text/plain; charset=utf-8"
    assert r.header("etag", ).startswith('"') and r.header("last-modified").endswith("GMT")
    assert r.header("accept-ranges") == "bytes"
    assert r.header("content-length") == "13"
    assert static.get("/static/page.html").header("content-type") == "text/html; charset=utf-8"
    assert "javascript" in static.get("/static/app.js").header("content-type")
    assert static.get("/static/big.bin").header("content-type") == "application/octet-stream"


def test_head_has_the_length_and_no_body(static: Static) -> None:
    r = static.get("/static/a.txt", method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("content-length") == "13"
    r = static.get("/static/big.bin", method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("content-length") == str(len(BIG))


def test_conditional_requests_get_304(static: Static) -> None:
    first = static.get("/static/a.txt")
    etag, modified = first.header("etag"), first.header("last-modified")
    r = static.get("/static/a.txt", {"If-None-Match": etag})
    assert r.status == 304 and r.body == b"" and r.header("etag") == etag
    assert static.get("/static/a.txt", {"If-None-Match": '"other", ' + etag}).status == 304
    assert static.get("/static/a.txt", {"If-None-Match": '"other"'}).status == 200
    assert static.get("/static/a.txt", {"If-Modified-Since": modified}).status == 304
    assert static.get("/static/a.txt", {"If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}).status == 200
    # If-None-Match wins over If-Modified-Since
    r = static.get("/static/a.txt", {"If-None-Match": '"other"', "If-Modified-Since": modified})
    assert r.status == 200
    assert static.get("/static/big.bin", {"If-None-Match": static.get("/static/big.bin", method="HEAD").header("etag")}).status == 304


def test_byte_ranges(static: Static) -> None:
    r = static.get("/static/a.txt", {"Range": "bytes=0-4"})
    assert r.status == 206 and r.body == b"hello" and r.header("content-range") == "bytes 0-4/13"
    r = static.get("/static/a.txt", {"Range": "bytes=-6"})
    assert r.status == 206 and r.body == b"files\n"
    r = static.get("/static/a.txt", {"Range": "bytes=7-"})
    assert r.status == 206 and r.body == b"files\n" and r.header("content-range") == "bytes 7-12/13"
    r = static.get("/static/a.txt", {"Range": "bytes=13-"})
    assert r.status == 416 and r.header("content-range") == "bytes */13"
    for ignored in ("bytes=0-1,3-4", "bytes=5-2", "lines=1-2", "bytes=x-y"):
        r = static.get("/static/a.txt", {"Range": ignored})
        assert r.status == 200 and r.body == b"hello, files\n", ignored
    # If-Range that does not match: the whole file
    r = static.get("/static/a.txt", {"Range": "bytes=0-4", "If-Range": '"stale"'})
    assert r.status == 200
    # a range of a large (streamed) file
    r = static.get("/static/big.bin", {"Range": "bytes=1000000-1000999"})
    assert r.status == 206 and r.body == BIG[1000000:1001000]
    assert r.header("content-range") == "bytes 1000000-1000999/%d" % len(BIG)


def test_a_cached_file_handed_to_the_gateway_uncopied(static: Static) -> None:
    for _ in range(3):  # the first read fills the cache; the others come from it
        r = static.get("/static/mid.bin")
        assert r.status == 200 and r.body == MID and r.header("content-length") == str(len(MID))
        assert r.header("cumulo-file-handle") is None
    r = static.get("/static/mid.bin", method="HEAD")
    assert r.status == 200 and r.body == b"" and r.header("content-length") == str(len(MID))
    assert static.get("/static/mid.bin", {"If-None-Match": r.header("etag")}).status == 304
    r = static.get("/static/mid.bin", {"Range": "bytes=1000-40999"})  # over 16 KiB: handed over
    assert r.status == 206 and r.body == MID[1000:41000]
    assert r.header("content-range") == "bytes 1000-40999/%d" % len(MID)
    r = static.get("/static/mid.bin", {"Range": "bytes=-100"})  # small: in the answer
    assert r.status == 206 and r.body == MID[-100:]
    # another service gets the bytes in its answer, never a handle
    r = static.get("/fetch?name=/static/mid.bin/get")
    assert r.header("x-fetched-status") == "200" and r.body == MID
    assert r.header("x-fetched-cumulo-file-handle") is None


def test_index_files(static: Static) -> None:
    assert static.get("/static/").body == b"<h1>root index</h1>\n"
    assert static.get("/static").body == b"<h1>root index</h1>\n"
    r = static.get("/static/sub/")
    assert r.status == 200 and r.body == b"<h1>sub index</h1>\n"
    assert r.header("content-type") == "text/html; charset=utf-8"


@pytest.mark.parametrize(
    "path",
    [
        "/static/../secret.txt",
        "/static/sub/../../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/%2E%2E/%2e%2e/etc/passwd",
        "/static/sub/..%2f..%2fsecret.txt",
        "/static/..%5csecret.txt",
        "/static/a.txt%00.html",
        "/static/link-out",
        "/static/.hidden",
        "/static//etc/passwd",
    ],
)
def test_paths_that_leave_the_directory_are_refused(static: Static, path: str) -> None:
    # raw bytes: no client library normalises the path first
    r = raw_exchange(static.port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    assert r.status in (403, 404), (path, r)
    assert SECRET not in r.body and b"root:" not in r.body


def test_a_link_inside_the_directory_is_served(static: Static) -> None:
    assert static.get("/static/link-in").body == b"hello, files\n"


def test_missing_files_and_other_methods(static: Static) -> None:
    r = static.get("/static/nope.txt")
    assert r.status == 404 and b"no such file" in r.body
    assert static.get("/static/sub/nope/").status == 404
    r = static.get("/static/a.txt", method="DELETE")
    assert r.status == 405 and r.header("allow") == "GET, HEAD"
    # the service keeps serving after all of the above
    assert static.get("/static/a.txt").status == 200


def test_a_large_file_is_streamed_whole(static: Static) -> None:
    r = static.get("/static/big.bin")
    assert r.status == 200 and r.header("content-length") == str(len(BIG)) and r.body == BIG


def test_a_large_file_costs_the_core_no_memory_of_its_size(static: Static) -> None:
    huge = static.root / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(256 * 1024 * 1024)  # sparse: 256 MiB of zeros, instant to make
    try:
        before = rss_kib(static.core.proc.pid)
        r = static.get("/static/huge.bin", method="GET")
        assert r.status == 200 and len(r.body) == 256 * 1024 * 1024
        grown = rss_kib(static.core.proc.pid) - before
        assert grown < 64 * 1024, "the core grew %d KiB serving a 256 MiB file" % grown
    finally:
        huge.unlink()


def rss_kib(pid: int) -> int:
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_file_changed_on_disk_is_served_fresh_after_the_refresh_interval(static: Static) -> None:
    path = static.root / "changing.txt"
    path.write_bytes(b"version 1\n")
    first = static.get("/static/changing.txt")
    assert first.body == b"version 1\n"
    path.write_bytes(b"version 2, longer\n")
    time.sleep(REFRESH_MS / 1000 + 0.3)
    second = static.get("/static/changing.txt")
    assert second.body == b"version 2, longer\n"
    assert second.header("etag") != first.header("etag")
    # same size, new content and time
    time.sleep(0.01)
    path.write_bytes(b"version 3, longer\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    time.sleep(REFRESH_MS / 1000 + 0.3)
    assert static.get("/static/changing.txt").body == b"version 3, longer\n"
    path.unlink()
    time.sleep(REFRESH_MS / 1000 + 0.3)
    assert static.get("/static/changing.txt").status == 404


def test_another_service_asks_by_name(static: Static) -> None:
    r = static.get("/fetch?name=/static/a.txt/get")
    assert r.status == 200 and r.body == b"hello, files\n"
    assert r.header("x-fetched-content-type") == "text/plain; charset=utf-8"
    assert r.header("x-fetched-cumulo-file-handle") is None
    r = static.get("/fetch?name=/static/a.txt/get&range=bytes%3D0-4")
    assert r.header("x-fetched-status") == "206" and r.body == b"hello"
    # a large file by name: over max_answer it must be asked for in ranges
    r = static.get("/fetch?name=/static/big.bin/get")
    assert r.header("x-fetched-status") == "413" and b"max_answer" in r.body
    r = static.get("/fetch?name=/static/big.bin/get&range=bytes%3D2000000-2000099")
    assert r.header("x-fetched-status") == "206" and r.body == BIG[2000000:2000100]
    r = static.get("/fetch?name=/static/../secret.txt/get")
    assert r.header("x-fetched-status") == "403"


def test_a_directory_that_does_not_exist_is_refused_at_start(tmp_path: Path) -> None:
    import subprocess

    config = tmp_path / "c.toml"
    config.write_text(
        '[[service]]\nprefix = "/s/"\ninternal = "filesystem"\n[service.settings]\ndirectory = "%s/nope"\n' % tmp_path
    )
    r = subprocess.run([str(CUMULO), "check", "--config", str(config)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "settings.directory" in (r.stdout + r.stderr), r
