"""The job API over TLS (controller/auth.py, certificates from controller/pki.py): a
client without the CA, or with another CA, is refused; under mutual TLS a client
without a certificate is refused, and the administrator's certificate administers."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from p4hub.controller import api, auth, pki
from p4hub.controller.client import ClientAuth, JobClient
from tests.support.api_auth import credentials
from tests.unit.test_controller_api import stack  # noqa: F401 (fixture)
from tests.unit.test_controller_driver import pipeline  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def pkis(tmp_path_factory):
    run = pki.run_credentials(tmp_path_factory.mktemp("run"), switches=[], hosts=["127.0.0.1"])
    other = pki.run_credentials(tmp_path_factory.mktemp("other"), switches=[],
                                hosts=["127.0.0.1"])
    return run, other


def serve_tls(stack, run, mutual: bool):  # noqa: F811
    ctl, clock = stack[2], stack[4]
    service = api.JobService(ctl, clock, credentials=credentials())
    tls = auth.server_credentials(run.controller.cert, run.controller.key,
                                  run.ca if mutual else None)
    server, port = api.serve(service, "127.0.0.1:0", tls=tls,
                             admin_names=frozenset(auth.ADMIN_NAMES))
    return server, f"127.0.0.1:{port}"


def outcome(auth_: ClientAuth, target: str, method: str = "ListJobs", **request) -> Any:
    client = JobClient(target, timeout=3.0, auth=auth_)
    try:
        return client.call(method, **request)
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        client.close()


def test_a_client_without_the_ca_is_refused(stack, pkis):  # noqa: F811
    run, other = pkis
    server, address = serve_tls(stack, run, mutual=False)
    try:
        joined = outcome(ClientAuth(ca=run.ca), address, "JoinJob", name="t", world_size=1,
                         rank=0, address="10.0.0.1:4001")
        assert isinstance(joined, dict) and joined["job_token"]
        assert outcome(ClientAuth(), address) == grpc.StatusCode.UNAVAILABLE  # plaintext
        assert outcome(ClientAuth(ca=other.ca), address) == grpc.StatusCode.UNAVAILABLE
        # TLS is no credential: the API still wants the administrator's
        assert outcome(ClientAuth(ca=run.ca), address) == grpc.StatusCode.UNAUTHENTICATED
        # without mutual TLS a client certificate is not even asked for: no administrator
        admin_cert = ClientAuth(ca=run.ca, cert=run.admin.cert, key=run.admin.key)
        assert outcome(admin_cert, address) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.stop(grace=None)


def test_mutual_tls_wants_a_client_certificate_and_the_admins_administers(stack, pkis):  # noqa: F811
    run, other = pkis
    server, address = serve_tls(stack, run, mutual=True)
    try:
        assert outcome(ClientAuth(ca=run.ca), address) == grpc.StatusCode.UNAVAILABLE
        stranger = ClientAuth(ca=run.ca, cert=other.admin.cert, key=other.admin.key)
        assert outcome(stranger, address) == grpc.StatusCode.UNAVAILABLE  # another CA's
        admin = ClientAuth(ca=run.ca, cert=run.admin.cert, key=run.admin.key)
        assert outcome(admin, address) == {"jobs": [], "ended": []}
        worker = ClientAuth(ca=run.ca, cert=run.controller_client.cert,
                            key=run.controller_client.key)
        assert outcome(worker, address) == grpc.StatusCode.UNAUTHENTICATED  # not "admin"
        joined = outcome(worker, address, "JoinJob", name="m", world_size=1, rank=0,
                         address="10.0.0.1:4001")
        assert isinstance(joined, dict)
        assert outcome(admin, address, "ShowJob", job_id=joined["job_id"])["name"] == "m"
    finally:
        server.stop(grace=None)
