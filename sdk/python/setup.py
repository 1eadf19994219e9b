"""Declares the optional C extension (codec, serve loop, key/value parser); the rest is in pyproject.toml."""

import os

from setuptools import Extension, setup

# CUMULO_PURE_PYTHON=1 at install time skips the extension altogether.
build_c = os.environ.get("CUMULO_PURE_PYTHON", "") in ("", "0")

setup(
    ext_modules=[
        Extension(
            "cumulo._ccodec",
            sources=["src_c/_ccodec.c", "src_c/serve.c", "src_c/kv.c"],
            depends=["src_c/codec.h"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
            if os.name == "posix" else [],
            # Without a compiler pip installs the pure-Python codec instead.
            optional=True,
        )
    ] if build_c else [],
)
