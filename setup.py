"""The compiled extensions; everything else is in pyproject.toml.

* hosts/_kernels.c (+ hosts/_pbox_kernels.c, the PBox core's common contribution): the
  data-path kernels; hosts/native.py falls back to numpy when the
  extension is missing (or P4HUB_NO_NATIVE=1);
* p4lite/switch/core/_vecops.c: p4lite-switch's register runs over lane views;
  p4lite/switch/core/vecops.py falls back to the numpy form when it is missing (or
  P4LITE_NO_NATIVE=1). p4lite never imports hosts/, so it has its own.

``pip install -e .`` (``make``'s venv step) builds both in place.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "p4hub.hosts._kernels",
            # _pbox_kernels.c: the PBox core's common contribution, in the same module
            # (one build, one fallback switch)
            sources=["hosts/_kernels.c", "hosts/_pbox_kernels.c"],
            # a machine without a C compiler still installs (hosts/native.py falls back
            # to numpy); tests/unit/test_kernels.py fails there, so `make test` says so
            optional=True,
            # -O3: gcc vectorizes the copy and max loops; never -ffast-math (the kernels
            # must round exactly like numpy)
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "p4lite.switch.core._vecops",
            sources=["p4lite/switch/core/_vecops.c"],
            optional=True,  # as above: vecops.py falls back; test_switch_vecops.py says so
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
    ]
)
