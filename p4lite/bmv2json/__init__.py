"""The typed BMv2 JSON model: what p4lite-c emits and what the switch and the STF runner
load, validated once (``load``) with errors that name the JSON object; ``dump`` writes it
back exactly. Imports nothing else of p4lite.
"""

from p4lite.bmv2json.document import dump, load
from p4lite.bmv2json.errors import Bmv2JsonError
from p4lite.bmv2json.model import Program

__all__ = ["Bmv2JsonError", "Program", "dump", "load"]
