"""``python -m p4lite.xcheck`` (``make xcheck``): p4lite checked against the real p4c and BMv2.

Three ways for every ``tests/p4`` pair (``X.p4`` + ``X.stf``), and every ``p4src``
program with an STF beside it (``p4src/aggregate.stf``):

* ``p4c+bmv2``: real ``p4c-bm2-ss`` and real ``simple_switch``, run by p4c's STF
  runner (``$P4C_SRC/backends/bmv2/run-bmv2-test.py``);
* ``p4lite-c json on bmv2``: the same runner, with p4lite-c standing in for p4c;
* ``p4c json on p4lite``: real p4c's JSON, run by ``python -m p4lite.stf --json``;

plus real p4c (compile only) on every ``p4src/`` and ``bench/programs/`` program.
The tools are found on ``PATH`` and through the variables an install's ``env.sh``
sets (``P4REF``, ``P4C_SRC``, ``REF_PY``, ``BM_PYTHONPATH``, ``LD_LIBRARY_PATH``);
see ``tools.py``. Nothing here is needed by ``make test``: without the tools the
command says what is missing and exits 2. Documented in ``docs/p4lite.md`` §9.
"""
