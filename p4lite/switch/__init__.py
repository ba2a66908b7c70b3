"""p4lite's software switch, in three tiers (each imports only the tiers above it here):

* ``core``: the sans-I/O v1model switch: loads a BMv2 JSON into generated Python and
  runs packets (``core.switch.Switch``); ``core.runtime_api`` is its contract with the
  control-plane adapters, ``core.errors`` the layer's one error root (``SwitchError``).
* ``p4runtime``: the P4Runtime server over gRPC on top of a core (``p4runtime.device``
  owns the committed pipeline, ``p4runtime.server`` the RPCs).
* ``process``: the ``p4lite-switch`` program: command line (``process.main``), AF_PACKET
  and pcap-file packet I/O (``process.io``, ``process.pcap``).
"""
