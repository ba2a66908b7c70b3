"""The PBox: a multi-process UDP aggregation server with slot-to-core affinity.

PHub gives every chunk of a gradient one core; the PBox does the same per slot, so a
slot's state never moves between caches and no lock is needed. Here N worker processes
each bind their own UDP socket to the same port with SO_REUSEPORT, and a classic BPF program attached to the group
(SO_ATTACH_REUSEPORT_CBPF) picks the socket from the packet's slot field:
``socket index = slot mod N``. One slot therefore always lands in the same process,
which owns that slot's state in its own sharded :class:`~hosts.pbox.aggregator.Aggregator`
and sends the results from the same port. If the program cannot be attached the
PBox falls back to a single process (and says so).

The main process is a supervisor: it forks the workers, serves the control channel
(newline-delimited JSON over TCP) and fans every command out to the workers over
pipes. SIGTERM/SIGINT stop everything and print the final counters.

Modules, each importing only those above it:

* ``job_config``: a job's description (``JobConfig``, ``Parent``), its checks
  (``AggregatorError``) and counters (``JobStats``).
* ``aggregator``: sans-I/O. ``Aggregator``, the slot aggregator (the PBox's core and
  the switch program's reference model).
* ``core``: sans-I/O. ``ControlCore`` (control request -> reply, the job mirror,
  summed stats) over a ``Shards`` link; ``ShardCore`` (one shard's aggregator,
  counters and commands); the JSON-lines framing. Tested in-process.
* ``steering``: the reuseport sockets and the cBPF slot-steering program.
* ``worker``: ``ShardWorker``, the poll loop of one worker process around a ShardCore.
* ``supervisor``: ``PBox``, forks the workers and runs the ControlCore over their pipes.
* ``server``: ``ControlServer`` (TCP control channel) and ``serve``, the main loop
  of ``p4hub-pbox``.
* ``cli``: ``p4hub-pbox``'s arguments and ``main`` (also ``python -m p4hub.hosts.pbox``).
"""

from __future__ import annotations

from p4hub.hosts.pbox.core import (
    MAX_CONTROL_LINE,
    ControlCore,
    LineBuffer,
    LocalShards,
    PBoxError,
    ShardCore,
    Shards,
    answer_line,
    encode_reply,
    merge_counters,
)
from p4hub.hosts.pbox.server import ControlServer, serve
from p4hub.hosts.pbox.steering import (
    SLOT_OFFSET,
    SO_ATTACH_REUSEPORT_CBPF,
    attach_steering,
    open_sockets,
    steering_program,
)
from p4hub.hosts.pbox.supervisor import PBox, PBoxConfig, PipeShards
from p4hub.hosts.pbox.worker import RECV_BATCH, ShardWorker

__all__ = [
    "MAX_CONTROL_LINE", "RECV_BATCH", "SLOT_OFFSET", "SO_ATTACH_REUSEPORT_CBPF",
    "ControlCore", "ControlServer", "LineBuffer", "LocalShards", "PBox", "PBoxConfig",
    "PBoxError", "PipeShards", "ShardCore", "ShardWorker", "Shards", "answer_line",
    "attach_steering", "encode_reply", "merge_counters", "open_sockets", "serve",
    "steering_program",
]
