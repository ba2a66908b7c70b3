"""``python -m p4lite.compiler``: the same as the ``p4lite-c`` command."""

from p4lite.compiler.cli import main

raise SystemExit(main())
