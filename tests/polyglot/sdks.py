"""The SDKs of the cross-language suite, in ONE list (`SDKS`).

An SDK joins every scenario of the suite by adding its entry here: its
http_req example(s), how to build and run its client (`clients/`) and its
faulty service (`services/`), what its handler-failure message names, and
how to read the names it exports (for `test_guide.py`). The tests take their
languages from this list only.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXAMPLES = ROOT / "examples"
SDK = ROOT / "sdk"
CLIENTS = HERE / "clients"
SERVICES = HERE / "services"
PYTHON = SDK / "python" / ".venv" / "bin" / "python"
RELEASE = ROOT / "target" / "release"
# C1 only: halves the start of a JVM that runs a source file.
JAVA = ["java", "-XX:TieredStopAtLevel=1"]

Command = Callable[[Path], list]  # the build folder -> argv


def run(cmd: list, **kw) -> None:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


# ---------------------------------------------------------------- building


def _newest_mtime(*dirs: Path) -> float:
    return max(p.stat().st_mtime for d in dirs for p in d.rglob("*") if p.is_file())


# What a program linking the C SDK's static library needs besides it (OpenSSL: TLS).
C_LIBS = ["-lssl", "-lcrypto", "-lpthread"]


def _libcumulo(build: Path) -> Path:
    """The C SDK's static library: the one the C example built if it is newer
    than every SDK source (else it may not match the header), else our own."""
    prebuilt = EXAMPLES / "http_req" / "c" / "build" / "cumulo-sdk" / "libcumulo.a"
    if prebuilt.is_file() and prebuilt.stat().st_mtime >= _newest_mtime(SDK / "c" / "src", SDK / "c" / "include"):
        return prebuilt
    out = build / "cumulo-c"
    if not (out / "libcumulo.a").is_file():
        run(["cmake", "-S", SDK / "c", "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DCUMULO_BUILD_TESTS=OFF"])
        run(["cmake", "--build", out, "--target", "cumulo_static", "-j2"])
    return out / "libcumulo.a"


def _build_c(build: Path) -> None:
    lib, inc = _libcumulo(build), ["-I", SDK / "c" / "include"]
    run(["cc", "-std=c11", "-O2", "-Wall", *inc, "-o", build / "c_client", CLIENTS / "client.c", lib, *C_LIBS])
    run(["cc", "-std=c11", "-O2", "-Wall", *inc, "-o", build / "c_faulty", SERVICES / "faulty.c", lib, *C_LIBS])


def _build_cpp(build: Path) -> None:
    lib, inc = _libcumulo(build), ["-I", SDK / "c" / "include", "-I", SDK / "cpp" / "include"]
    for program, source in (("cpp_client", CLIENTS / "client.cpp"), ("cpp_faulty", SERVICES / "faulty.cpp")):
        run(["c++", "-std=c++17", "-O2", "-Wall", *inc, "-o", build / program, source, lib, *C_LIBS])


def _build_go(build: Path) -> None:
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"}
    run(["go", "build", "-o", build / "go_client", "client.go"], cwd=CLIENTS, env=env)
    run(["go", "build", "-o", build / "go_faulty", "faulty.go"], cwd=SERVICES, env=env)


def _build_rust(build: Path) -> None:
    # A workspace member (tests/polyglot/Cargo.toml), built as
    # scripts/setup.sh builds the workspace: quick when up to date.
    all_targets = ["--all-targets"] if os.environ.get("CUMULO_ALL_TARGETS") else []
    run(["cargo", "build", "--release", "--quiet", "--workspace", *all_targets], cwd=ROOT)


def _build_haskell(build: Path) -> None:
    # ghc --make keeps its objects in target/ between runs and recompiles only
    # what changed: the first build takes minutes on a busy 2-core machine.
    objects = RELEASE.parent / "polyglot-haskell"
    for program, source, module in (("haskell_client", CLIENTS / "client.hs", "Client"),
                                    ("haskell_faulty", SERVICES / "faulty.hs", "Faulty")):
        run(["ghc", "--make", "-v0", "-O", "-threaded", "-main-is", module, f"-i{SDK / 'haskell' / 'src'}",
             "-outputdir", objects, "-o", build / program, source])
ERLANG_EBIN = SDK / "erlang" / "_build" / "default" / "lib" / "cumulo" / "ebin"


def _build_erlang(build: Path) -> None:
    assert (ERLANG_EBIN / "cumulo.beam").is_file(), "the Erlang SDK is not built: run scripts/setup.sh"
    run(["erlc", "-Werror", "-o", build, CLIENTS / "client.erl", SERVICES / "faulty.erl"])


def _erl(build: Path, module: str) -> list:
    return ["erl", "-noshell", "-noinput", "+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none",
            "-pa", ERLANG_EBIN, "-pa", build, "-s", module, "main", "-extra"]


OCAML_LIB = SDK / "ocaml" / "_install" / "lib"


def _build_ocaml(build: Path) -> None:
    # Against the SDK scripts/setup.sh installed (dune install --prefix); the
    # sources are copied so the compiler's outputs land in the build folder.
    assert (OCAML_LIB / "cumulo" / "META").is_file(), "the OCaml SDK is not installed: run scripts/setup.sh"
    env = {**os.environ, "OCAMLPATH": str(OCAML_LIB)}
    out = build / "ocaml"
    out.mkdir(exist_ok=True)
    for program, source in (("ocaml_client", CLIENTS / "client.ml"), ("ocaml_faulty", SERVICES / "faulty.ml")):
        (out / source.name).write_bytes(source.read_bytes())
        run(["ocamlfind", "ocamlopt", "-package", "cumulo", "-linkpkg", "-thread", "-o", build / program, source.name],
            cwd=out, env=env)


def _build_ats2(build: Path) -> None:
    # The SDK (and the C SDK under it) once, by its Makefile; then each program.
    ats2 = SDK / "ats2"
    run(["make", "-s", "-C", ats2, "lib"])
    flags = ["-DATS_MEMALLOC_LIBC", "-D_GNU_SOURCE", "-O2", "-IATS", ats2, "-I", ats2, "-I", SDK / "c" / "include"]
    libs = [ats2 / "build" / "cumulo_dats.o", ats2 / "build" / "cumulo-c" / "libcumulo.a", *C_LIBS]
    for program, source in (("ats2_client", CLIENTS / "client.dats"), ("ats2_faulty", SERVICES / "faulty.dats")):
        run(["patscc", *flags, "-o", build / program, source, *libs], cwd=build)  # patscc writes its C here


def java_jar() -> Path:
    jars = [j for j in (SDK / "java" / "target").glob("cumulo-*.jar")
            if not j.name.endswith(("-sources.jar", "-javadoc.jar"))]
    assert jars, "the Java SDK jar is missing: run scripts/setup.sh"
    return jars[0]


def _build_java(build: Path) -> None:
    java_jar()


# ------------------------------------------------- exported names (the guide)


def snake(name: str) -> str:
    return name


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(w.capitalize() for w in rest)


def pascal_go(name: str) -> str:
    return "".join("ID" if w == "id" else w.capitalize() for w in name.split("_"))


def c_prefixed(name: str) -> str:
    return "cumulo_" + name


@dataclass(frozen=True)
class Exports:
    """Where an SDK's public names are, and how it spells a guide name."""

    files: tuple[str, ...]  # globs, relative to the repository root
    patterns: tuple[str, ...]  # regexes whose groups capture exported names
    spell: Callable[[str], str]
    cut_at: str | None = None  # a regex: what follows it in a file is private
    exclude: str | None = None  # a regex: files whose name matches it are not read

    def names(self) -> set[str]:
        """Every exported name, bare and as `<file stem>.<name>` (so the
        guide can name `Info.encode`, a function of Info.java, say)."""
        found: set[str] = set()
        for pattern in self.files:
            for path in sorted(ROOT.glob(pattern)):
                if self.exclude and re.search(self.exclude, path.name):
                    continue
                text = path.read_text(errors="replace")
                if self.cut_at:
                    text = re.split(self.cut_at, text, maxsplit=1, flags=re.M)[0]
                for regex in self.patterns:
                    for m in re.finditer(regex, text, flags=re.M):
                        for group in m.groups():
                            for name in re.findall(r"\w+[?!]?", group or ""):
                                found |= {name, f"{path.stem}.{name}"}
        return found


# ---------------------------------------------------------------- the list


@dataclass(frozen=True)
class Sdk:
    name: str  # the folder sdk/<name>, and the row of the summary table
    http_req: tuple[str, ...]  # its http_req examples, named as they subscribe (<x>.xml/get)
    build: Callable[[Path], None] | None  # compiles its client and faulty service into the build folder
    client: Command  # clients/: client SOCKET NAME HEX_BODY [sync|async]
    faulty: Command  # services/: boom fails, ok answers "ok", trace_* call the echo service (test_trace.py)
    failure_words: tuple[str, ...]  # what boom's SERVICE_ERROR message must contain
    exports: Exports


SDKS: list[Sdk] = [
    Sdk("rust", ("rust",), _build_rust,
        lambda b: [RELEASE / "polyglot_client"],
        lambda b: [RELEASE / "polyglot_faulty"],
        ("handler panicked", "boom from rust"),
        Exports(("sdk/rust/src/*.rs", "proto/codec/src/info.rs"), (r"^\s*pub fn (\w+)", r"^\s*pub (\w+):"), snake)),
    Sdk("c", ("c",), _build_c,
        lambda b: [b / "c_client"],
        lambda b: [b / "c_faulty"],
        # C has no exceptions: the SDK names the pattern and the status the handler returned.
        ("/tests/faulty/c/boom", "INVALID_ARGUMENT"),
        Exports(("sdk/c/include/cumulo.h",), (r"\b(cumulo_\w+)\s*\(",), c_prefixed)),
    Sdk("cpp", ("cpp",), _build_cpp,
        lambda b: [b / "cpp_client"],
        lambda b: [b / "cpp_faulty"],
        ("runtime_error", "boom from cpp"),
        Exports(("sdk/cpp/include/cumulo.hpp",), (r"^\s*(?:static\s+|inline\s+)*[\w:<>]+[\s*&]+([a-z_]\w*)\s*\(",),
                snake)),
    Sdk("python", ("python", "python_c"), None,
        lambda b: [PYTHON, CLIENTS / "client.py"],
        lambda b: [PYTHON, SERVICES / "faulty.py"],
        ("FaultyError", "boom from python"),
        Exports(("sdk/python/src/cumulo/api.py", "sdk/python/src/cumulo/info.py"),
                (r"^\s*def ([a-z]\w*)\(", r"^\s+([a-z]\w*) = staticmethod\(", r"^\s+self\.([a-z]\w*)(?:: [^=]+)? = "),
                snake)),
    Sdk("go", ("go",), _build_go,
        lambda b: [b / "go_client"],
        lambda b: [b / "go_faulty"],
        ("boom from go",),
        Exports(("sdk/go/*.go",), (r"^func (?:\(\w+ \*?\w+\) )?([A-Z]\w*)\(",), pascal_go, exclude=r"_test\.go$")),
    Sdk("java", ("java",), _build_java,
        lambda b: [*JAVA, "-cp", java_jar(), CLIENTS / "Client.java"],
        lambda b: [*JAVA, "-cp", java_jar(), SERVICES / "Faulty.java"],
        ("FaultyException", "boom from java"),
        Exports(("sdk/java/src/main/java/dev/cumulo/*.java",), (r"^\s*public (?:static )?(?:final )?[\w<>\[\],.? ]+? (\w+)\(",),
                camel)),
    Sdk("javascript", ("javascript",), None,
        lambda b: ["node", CLIENTS / "client.mjs"],
        lambda b: ["node", SERVICES / "faulty.mjs"],
        ("FaultyError", "boom from javascript"),
        Exports(("sdk/javascript/api.js", "sdk/javascript/info.js"),
                (r"^  (?:static )?(?:async )?(?:get )?([a-z]\w*)\(.*\{", r"^export (?:async )?function (\w+)"), camel)),
    Sdk("ruby", ("ruby",), None,
        lambda b: ["ruby", CLIENTS / "client.rb"],
        lambda b: ["ruby", SERVICES / "faulty.rb"],
        ("FaultyError", "boom from ruby"),
        Exports(("sdk/ruby/lib/cumulo/api.rb", "sdk/ruby/lib/cumulo/info.rb"),
                (r"^\s*def (?:self\.)?([a-z]\w*[?!]?)", r"^\s*attr_reader((?:\s*:\w+,?)+)"), snake,
                cut_at=r"^\s*private\s*$")),
    Sdk("php", ("php",), None,
        lambda b: ["php", CLIENTS / "client.php"],
        lambda b: ["php", SERVICES / "faulty.php"],
        ("FaultyException", "boom from php"),
        Exports(("sdk/php/src/Api.php", "sdk/php/src/Info.php"), (r"public (?:static )?function (\w+)\(",), camel)),
    Sdk("perl", ("perl",), None,
        lambda b: ["perl", CLIENTS / "client.pl"],
        lambda b: ["perl", SERVICES / "faulty.pl"],
        ("boom from perl",),
        Exports(("sdk/perl/lib/Cumulo/API.pm", "sdk/perl/lib/Cumulo/Info.pm"), (r"^sub ([a-z]\w*)",), snake)),
    Sdk("erlang", ("erlang",), _build_erlang,
        lambda b: _erl(b, "client"),
        lambda b: _erl(b, "faulty"),
        ("faulty_error", "boom from erlang"),
        Exports(("sdk/erlang/src/cumulo.erl",), (r"^-export\(\[([^\]]*)\]\)",), snake)),
    Sdk("ocaml", ("ocaml",), _build_ocaml,
        lambda b: [b / "ocaml_client"],
        lambda b: [b / "ocaml_faulty"],
        ("Faulty_error", "boom from ocaml"),
        Exports(("sdk/ocaml/src/cumulo.mli",), (r"^val (\w+)",), snake)),
]

# Haskell: the names are those of the export list of the one public module.
SDKS.append(
    Sdk("haskell", ("haskell",), _build_haskell,
        lambda b: [b / "haskell_client"],
        lambda b: [b / "haskell_faulty"],
        ("FaultyError", "boom from haskell"),
        Exports(("sdk/haskell/src/Cumulo.hs",), (r"^\s*[(,]\s*([a-z]\w*(?:,\s*[a-z]\w*)*)\s*$",), camel,
                cut_at=r"^\s*\) where")))

# ATS2: on top of the C SDK, as C++ is; as in C, a failing handler returns a status.
SDKS.append(
    Sdk("ats2", ("ats2",), _build_ats2,
        lambda b: [b / "ats2_client"],
        lambda b: [b / "ats2_faulty"],
        ("/tests/faulty/ats2/boom", "INVALID_ARGUMENT"),
        Exports(("sdk/ats2/SATS/cumulo.sats",), (r"^fun\s+([a-z]\w*)",), snake)))

BY_NAME = {s.name: s for s in SDKS}

# http_req examples written against CloudI's own APIs (docs/CLOUDI.md), run
# by the core's CloudI adapter: services of the suite, not SDKs of cumulo.
CLOUDI_HTTP_REQ = ["python_cloudi", "rust_cloudi", "javascript_cloudi"]


def sdk_of_example(example: str) -> str:
    """The table row of an http_req example: its SDK, or itself (CloudI's)."""
    return next((s.name for s in SDKS if example in s.http_req), example)
