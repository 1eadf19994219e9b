"""The "HTTP" section of the SDK READMEs, run behind the real gateway for
the SDKs whose example runs as written, without a build step: Python,
JavaScript, Ruby, Perl and PHP. Each README's example (the fenced block of
its "## HTTP" section) subscribes `items/*` and answers a POST with 201 and
its body back, any other method with 405 and `allow: POST`."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from conftest import ROOT, THREADS, Core, free_port
from gateway_client import request

SDK = ROOT / "sdk"
# language: (file name, fence, command line of the service)
RUN = {
    "python": ("items.py", "python", [sys.executable, "items.py"]),
    "javascript": ("items.mjs", "js", ["node", "items.mjs"]),
    "ruby": ("items.rb", "ruby", ["ruby", "-I%s" % (SDK / "ruby" / "lib"), "items.rb"]),
    "perl": ("items.pl", "perl", ["perl", "-I%s" % (SDK / "perl" / "lib"), "items.pl"]),
    "php": ("items.php", "php", ["php", "items.php"]),
}


def http_example(language: str) -> str:
    readme = (SDK / language / "README.md").read_text()
    section = re.search(r"^## HTTP\n(.*?)^## ", readme, re.S | re.M)
    assert section, "sdk/%s/README.md has an HTTP section" % language
    assert "(../../docs/GUIDE.md)" in section.group(1), "it links to docs/GUIDE.md"
    fence = RUN[language][1]
    code = re.search(r"^```%s\n(.*?)^```$" % fence, section.group(1), re.S | re.M)
    assert code, "the HTTP section of sdk/%s/README.md has a %s example" % (language, fence)
    return code.group(1)


def test_every_sdk_readme_has_an_http_section_linking_the_guide():
    for readme in sorted(SDK.glob("*/README.md")):
        text = readme.read_text()
        assert "\n## HTTP\n" in text, readme
        assert "(../../docs/GUIDE.md)" in text, readme


@pytest.mark.parametrize("language", list(RUN))
def test_readme_http_example_answers_201_and_405(built, tmp_path, language):
    name, _, command = RUN[language]
    if shutil.which(command[0]) is None:
        pytest.fail("%s is needed for sdk/%s (scripts/setup.sh installs it)" % (command[0], language))
    code = http_example(language)
    if language == "php":
        code = code.replace("__DIR__ . '/vendor/autoload.php'", repr(str(SDK / "php" / "autoload.php")))
    (tmp_path / name).write_text(code)
    if language == "javascript":
        (tmp_path / "node_modules").mkdir()
        (tmp_path / "node_modules" / "cumulo").symlink_to(SDK / "javascript")
    port = free_port()
    config = """
[core]
socket = "%s/cumulo.sock"
threads = %d
[admin]
port = 0

[[service]]
prefix = "/gateway/"
internal = "http"
[service.settings]
port = %d

[[service]]
prefix = "/api/"
path = %s
args = [%s]
env = { PYTHONPATH = "%s" }
""" % (
        tmp_path,
        THREADS,
        port,
        '"%s"' % command[0],
        ", ".join('"%s"' % a for a in command[1:]),
        SDK / "python" / "src",
    )
    core = Core(config, tmp_path)
    try:
        core.wait_served(port, ["/api/items"])
        created = request(port, "POST", "/api/items", body=b'{"a": 1}')
        assert (created.status, created.header("content-type"), created.body) == (201, "application/json", b'{"a": 1}')
        for method in ("GET", "DELETE", "PUT"):
            refused = request(port, method, "/api/items", body=b"x" if method == "PUT" else None)
            assert (refused.status, refused.header("allow"), refused.body) == (405, "POST", b""), method
    finally:
        assert core.stop() == 0, core.log()
