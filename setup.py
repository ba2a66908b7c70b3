"""The compiled data-path kernels (hosts/_kernels.c); everything else is in pyproject.toml.

``pip install -e .`` (``make``'s venv step) builds the extension in place, next to
hosts/native.py, which falls back to numpy when it is missing (or P4HUB_NO_NATIVE=1).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "p4hub.hosts._kernels",
            sources=["hosts/_kernels.c"],
            # a machine without a C compiler still installs (hosts/native.py falls back
            # to numpy); tests/unit/test_kernels.py fails there, so `make test` says so
            optional=True,
            # -O3: gcc vectorizes the copy and max loops; never -ffast-math (the kernels
            # must round exactly like numpy)
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
