"""p4lite-switch offline: --use-files reads <iface>_in.pcap and writes <iface>_out.pcap (no root)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from bench._frames import ipv4_frame
from p4lite.switch.process.pcap import PcapWriter, read_pcap
from tests.e2e.p4.netns import VENV_BIN, compile_program, free_port
from tests.support.wait import wait_until

P4 = Path(__file__).parent / "p4" / "p4l_switch.p4"
H2_MAC = bytes.fromhex("080000000222")


def push_routes(port: int, json_path: Path, p4info_path: Path) -> None:
    p4info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
    lpm = next(t for t in p4info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
    fwd = next(a for a in p4info.actions if a.preamble.name == "MyIngress.ipv4_forward")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=0, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = json_path.read_bytes()
        stub.SetForwardingPipelineConfig(req, timeout=10)
        te = p4runtime_pb2.TableEntry(table_id=lpm.preamble.id)
        fm = te.match.add(field_id=1)
        fm.lpm.value, fm.lpm.prefix_len = b"\x0a\x00\x02\x00", 24
        te.action.action.action_id = fwd.preamble.id
        te.action.action.params.add(param_id=1, value=H2_MAC)
        te.action.action.params.add(param_id=2, value=b"\x02")
        stub.Write(p4runtime_pb2.WriteRequest(device_id=0, updates=[p4runtime_pb2.Update(
            type=p4runtime_pb2.Update.INSERT, entity=p4runtime_pb2.Entity(table_entry=te))]), timeout=10)


def run_offline(tmp_path: Path, records: list[tuple[int, bytes]], *target: str) -> list[bytes]:
    """Replay ``records`` into port 1 of an offline switch; the frames port 2 wrote."""
    json_path, p4info_path = compile_program(P4, tmp_path / "build")
    with PcapWriter(tmp_path / "p4lf1_in.pcap") as w:
        for ts, frame in records:
            w.write(frame, ts)
    port = free_port()
    proc = subprocess.Popen(
        [str(VENV_BIN / "p4lite-switch"), "--use-files", "2", "-i", "1@p4lf1", "-i", "2@p4lf2",
         "--no-p4", "--log-file", str(tmp_path / "sw.log"), "--",
         "--grpc-server-addr", f"127.0.0.1:{port}", *target],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    try:
        assert proc.stdout.readline().startswith("Server listening on")
        push_routes(port, json_path, p4info_path)  # within the 2 s wait
        out = tmp_path / "p4lf2_out.pcap"
        # wait for the first frame out, then until nothing more arrives for 0.5 s
        seen, quiet_since = 0, time.monotonic()

        def output_settled() -> bool:
            nonlocal seen, quiet_since
            count = len(list(read_pcap(out))) if out.exists() else 0
            if count != seen:
                seen, quiet_since = count, time.monotonic()
                return False
            return bool(seen) and time.monotonic() - quiet_since > 0.5

        with contextlib.suppress(TimeoutError):  # the assertions below say what is missing
            wait_until(output_settled, timeout=15)
        assert list(read_pcap(tmp_path / "p4lf1_out.pcap")) == []
        return [f for _, f in read_pcap(out)]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


def test_use_files_replays_input_pcaps_and_writes_output_pcaps(tmp_path):
    records = [(1000 * i, ipv4_frame(b"\x0a\x00\x02\x02", b"file%d" % i)) for i in range(5)]
    records += [(9000, ipv4_frame(b"\x0a\x00\x09\x09", b"no-route")), (9500, b"\x08\x00")]
    got = run_offline(tmp_path, records)
    assert len(got) == 5
    assert all(f[:6] == H2_MAC and f[14 + 8] == 63 for f in got)
    assert [f[-5:] for f in got] == [b"file%d" % i for i in range(5)]


def test_priority_queues_serve_higher_priority_first(tmp_path):
    # Same timestamp: the frames arrive together, so the queues hold them all at once.
    prios = [0, 5, 1, 7, 3, 5]
    records = [(1000, ipv4_frame(b"\x0a\x00\x02\x02", b"file%d" % p, diffserv=p)) for p in prios]
    got = run_offline(tmp_path, records, "--priority-queues", "8")
    assert [f[-1] - ord("0") for f in got] == [7, 5, 5, 3, 1, 0]
    single = run_offline(tmp_path / "one-queue", records)  # BMv2: priority >= queues is dropped
    assert [f[-1] - ord("0") for f in single] == [0]
