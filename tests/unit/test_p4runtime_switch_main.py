"""The p4lite-switch command line (simple_switch_grpc's layout)."""

from __future__ import annotations

import pytest

from p4lite.switch.process.main import TlsOptions, UsageError, parse_args

TUTORIAL = ("-i 1@s1-eth1 -i 2@s1-eth2 --pcap /tmp/pcaps --nanolog ipc:///tmp/bm-0-log.ipc "
            "--device-id 0 build/basic.json --log-console --thrift-port 9090 -- "
            "--grpc-server-addr 0.0.0.0:50051 --cpu-port 510")


def test_tutorial_command_line():
    o = parse_args(TUTORIAL.split())
    assert o.interfaces == {1: "s1-eth1", 2: "s1-eth2"}
    assert (o.json_path, o.pcap_dir, o.device_id, o.log_console) == ("build/basic.json", "/tmp/pcaps", 0, True)
    assert (o.grpc_addr, o.cpu_port, o.priority_queues, o.drop_port) == ("0.0.0.0:50051", 510, 1, 511)
    assert set(o.ignored) == {"--thrift-port", "--nanolog"}


def test_defaults_and_unknown_flags_are_reported_not_fatal():
    o = parse_args("-i 0@veth0 --no-p4 --some-new-flag 3 -- --max-mc-groups 8 --enable-swap".split())
    assert o.grpc_addr == "0.0.0.0:9559" and o.no_p4 and o.json_path is None
    assert o.ignored == ["--some-new-flag 3", "--max-mc-groups 8", "--enable-swap"]


def test_bare_pcap_and_priority_queues():
    o = parse_args("--pcap prog.json -- --priority-queues 8 --drop-port 100 --queue-rate 500".split())
    assert (o.pcap_dir, o.json_path, o.priority_queues, o.drop_port) == (".", "prog.json", 8, 100)
    assert (o.queue_rate, o.queue_depth) == (500.0, 64)


@pytest.mark.parametrize("argv", [
    "-i 1@a -- --cpu-port 1", "-- --cpu-port 0", "-- --cpu-port 512", "-i 1 --no-p4",
    "-i 1@a -i 1@b", "x.json --no-p4", "-L chatty", "-- --queue-rate 0", "-- --queue-depth 0"])
def test_bad_command_lines(argv):
    with pytest.raises(UsageError):
        parse_args(argv.split())


def test_the_core_factory_reuses_the_compiled_program_but_never_the_state():
    """A pipeline pushed again with the same JSON (the one the switch was started with,
    or a reconnecting controller's) costs no second compile; each core has its own
    tables and registers."""
    import json
    from pathlib import Path

    from p4lite.switch.process.main import core_factory

    golden = Path(__file__).resolve().parents[1] / "golden" / "p4src" / "aggregate.json"
    program = json.loads(golden.read_text())
    make = core_factory(parse_args(["prog.json"]))
    first, second = make(program), make(json.loads(golden.read_text()))
    assert first.program is second.program
    first.registers["MyIngress.slot_counter"].values[3] = 1
    assert second.registers["MyIngress.slot_counter"].values[3] == 0
    other = dict(program, __meta__={**program.get("__meta__", {}), "x": 1})
    assert make(other).program is not first.program


def test_simple_switch_grpcs_tls_flags():
    o = parse_args(("--no-p4 -- --grpc-server-ssl --grpc-server-cert c.pem --grpc-server-key c.key "
                    "--grpc-server-cacert ca.pem --grpc-server-with-client-auth "
                    "--grpc-server-writer controller-client").split())
    assert o.tls == TlsOptions("c.pem", "c.key", "ca.pem", True, ("controller-client",))
    assert o.ignored == []
    o = parse_args("--no-p4 -- --grpc-server-ssl --grpc-server-cert c.pem --grpc-server-key k".split())
    assert o.tls == TlsOptions("c.pem", "k", None, False, ())
    assert parse_args(["--no-p4"]).tls is None


@pytest.mark.parametrize(("argv", "message"), [
    ("-- --grpc-server-ssl --grpc-server-cert c.pem", "needs --grpc-server-cert and"),
    ("-- --grpc-server-cert c.pem --grpc-server-key k", "without --grpc-server-ssl"),
    ("-- --grpc-server-ssl --grpc-server-cert c --grpc-server-key k "
     "--grpc-server-with-client-auth", "needs --grpc-server-cacert"),
    ("-- --grpc-server-ssl --grpc-server-cert c --grpc-server-key k --grpc-server-writer x",
     "needs --grpc-server-with-client-auth"),
    ("--grpc-server-ssl --no-p4", "a target option"),
])
def test_tls_command_lines_that_would_serve_plaintext_or_nothing_are_refused(argv, message):
    with pytest.raises(UsageError, match=message):
        parse_args(argv.split())
