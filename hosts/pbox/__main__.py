"""``python -m p4hub.hosts.pbox``: the same as ``p4hub-pbox`` (hosts/pbox/cli.py)."""

from __future__ import annotations

import sys

from p4hub.hosts.pbox.cli import main

sys.exit(main())
