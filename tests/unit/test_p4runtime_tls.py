"""P4Runtime over TLS: p4lite-switch's gRPC server (port 0, a fake core) with a run's
certificates (p4hub.controller.pki), reached by the controller's own P4Runtime client and
by raw gRPC clients without the CA, without a client certificate, or with a stranger's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4hub.controller import pki
from p4hub.controller.core.topology import TlsConf
from p4hub.controller.p4rt_client import P4RuntimeClient, P4RuntimeError
from p4lite.switch.p4runtime.device import Device
from p4lite.switch.p4runtime.server import serve
from p4lite.switch.process.main import TlsOptions, server_credentials
from tests.unit.fakes_switch import CPU_PORT, DEVICE_ID, FakeSwitch, bmv2_json_bytes, p4info

REFUSED_WAIT = 1.0  # how long a refused client waits for a channel that never gets ready


@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> pki.RunCredentials:
    return pki.run_credentials(tmp_path_factory.mktemp("run"), switches=["s1"], hosts=[])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> pki.RunCredentials:
    """Another run's certificates: a CA the switch does not trust, and vice versa."""
    return pki.run_credentials(tmp_path_factory.mktemp("other"), switches=["s1"], hosts=[])


def _switch(creds: pki.RunCredentials, *, client_auth: bool = True,
            writers: tuple[str, ...] = ()) -> tuple[grpc.Server, int]:
    device = Device(DEVICE_ID, lambda j: FakeSwitch(j, cpu_port=CPU_PORT), cpu_port=CPU_PORT,
                    transmit=lambda port, data: None)
    sw = creds.switches["s1"]
    tls = TlsOptions(str(sw.cert), str(sw.key), str(creds.ca), client_auth, writers)
    return serve(device, "127.0.0.1:0", credentials=server_credentials(tls), writers=writers)


@pytest.fixture
def switch(creds: pki.RunCredentials) -> Iterator[int]:
    server, port = _switch(creds)
    yield port
    server.stop(None)


def _conf(ca: Path, cred: pki.Credential | None = None) -> TlsConf:
    return TlsConf(str(ca), str(cred.cert) if cred else "", str(cred.key) if cred else "")


def _client(port: int, tls: TlsConf | None, election: int = 100,
            timeout: float = 5.0) -> P4RuntimeClient:
    return P4RuntimeClient(f"127.0.0.1:{port}", DEVICE_ID, (0, election), timeout=timeout,
                           tls=tls)


def test_the_runs_controller_connects_programs_and_reads(switch: int,
                                                         creds: pki.RunCredentials) -> None:
    with _client(switch, _conf(creds.ca, creds.controller_client)) as client:
        client.set_pipeline(p4info(), bmv2_json_bytes(), cookie=7)
        installed = client.get_pipeline()
        assert installed is not None and installed[1] == 7


@pytest.mark.parametrize("who", ["plaintext", "no CA", "no client certificate",
                                 "a stranger's client certificate"])
def test_clients_without_the_runs_credentials_are_refused(switch: int, creds: pki.RunCredentials,
                                                          stranger: pki.RunCredentials,
                                                          who: str) -> None:
    tls = {"plaintext": None,
           "no CA": _conf(stranger.ca, creds.controller_client),
           "no client certificate": _conf(creds.ca),
           "a stranger's client certificate": _conf(creds.ca, stranger.controller_client),
           }[who]
    client = _client(switch, tls, timeout=REFUSED_WAIT)
    with pytest.raises(P4RuntimeError) as refused:
        client.connect()
    assert refused.value.code == "UNAVAILABLE"
    # and the switch was not touched: the run's controller finds no pipeline on it
    with _client(switch, _conf(creds.ca, creds.controller_client)) as good:
        assert good.get_pipeline() is None


def test_raw_grpc_without_the_ca_gets_no_answer(switch: int, stranger: pki.RunCredentials) -> None:
    """Below our client: gRPC itself with the system's CAs / a stranger's CA."""
    for creds in (grpc.ssl_channel_credentials(),
                  grpc.ssl_channel_credentials(stranger.ca.read_bytes())):
        with grpc.secure_channel(f"127.0.0.1:{switch}", creds) as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=REFUSED_WAIT)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_server_authentication_alone_when_client_auth_is_off(creds: pki.RunCredentials) -> None:
    """--grpc-server-ssl without --grpc-server-with-client-auth: the client checks the
    switch, the switch asks for no certificate (simple_switch_grpc's meaning)."""
    server, port = _switch(creds, client_auth=False)
    try:
        with _client(port, _conf(creds.ca)) as client:
            assert client.get_pipeline() is None
    finally:
        server.stop(None)


def test_a_reader_can_read_but_never_write_nor_demote_the_controller(
        creds: pki.RunCredentials) -> None:
    """With writers = the controller's certificate, the operator's certificate (admin)
    is a backup whatever election id it sends, and every write it tries is refused."""
    server, port = _switch(creds, writers=("controller-client",))
    controller = _client(port, _conf(creds.ca, creds.controller_client), election=100)
    reader = _client(port, _conf(creds.ca, creds.admin), election=1 << 40)
    try:
        controller.connect()
        controller.set_pipeline(p4info(), bmv2_json_bytes(), cookie=1)
        with pytest.raises(P4RuntimeError, match="not primary"):
            reader.connect()  # a higher election id, answered as a backup
        stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.secure_channel(
            f"127.0.0.1:{port}", grpc.ssl_channel_credentials(
                creds.ca.read_bytes(), creds.admin.key.read_bytes(),
                creds.admin.cert.read_bytes())))
        read = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
        read.entities.add().table_entry.SetInParent()
        assert [e for r in stub.Read(read, timeout=5) for e in r.entities] == []  # may read
        write = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID)
        write.election_id.low = 1 << 40
        with pytest.raises(grpc.RpcError) as denied:
            stub.Write(write, timeout=5)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "may only read" in (denied.value.details() or "")
        config = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=DEVICE_ID)
        config.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        with pytest.raises(grpc.RpcError) as denied:
            stub.SetForwardingPipelineConfig(config, timeout=5)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # the controller is still primary and still writes
        assert controller.alive
        controller.set_pipeline(p4info(), bmv2_json_bytes(), cookie=2)
        assert controller.get_pipeline()[1] == 2  # type: ignore[index]
    finally:
        reader.close()
        controller.close()
        server.stop(None)


def test_writers_without_tls_is_refused() -> None:
    device = Device(DEVICE_ID, lambda j: FakeSwitch(j, cpu_port=CPU_PORT), cpu_port=CPU_PORT)
    with pytest.raises(ValueError, match="TLS is needed"):
        serve(device, "127.0.0.1:0", writers=("controller-client",))


def test_unreadable_certificate_files_are_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        server_credentials(TlsOptions(str(tmp_path / "none.pem"), str(tmp_path / "none.key")))


def test_the_controller_names_an_unreadable_ca(tmp_path: Path) -> None:
    client = _client(1, TlsConf(str(tmp_path / "missing.pem")))
    with pytest.raises(P4RuntimeError, match="missing.pem"):
        client.connect()
