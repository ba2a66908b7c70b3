"""p4hub.controller.pki: the run CA, issued certificates, key file modes, real TLS handshakes."""

from __future__ import annotations

import ipaddress
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from p4hub.controller import pki


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake through memory BIOs (no sockets, no threads); raises ssl.SSLError."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"s": False, "c": False}
    for _ in range(20):
        for name, obj in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server checks the client certificate after the client's handshake
            # returns; a round of application data surfaces a refusal on either side.
            cli.write(b"ping")
            s_in.write(c_out.read())
            assert srv.read(4) == b"ping"
            return
    raise AssertionError("handshake did not finish")


def _server_ctx(cred: pki.Credential, ca: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cred.cert, cred.key)
    if ca is not None:
        ctx.load_verify_locations(ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _client_ctx(ca: Path, cred: pki.Credential | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    if cred is not None:
        ctx.load_cert_chain(cred.cert, cred.key)
    return ctx


def test_make_ca_writes_a_ca_certificate_and_a_0600_key(tmp_path: Path) -> None:
    ca = pki.make_ca(tmp_path / "ca", "test CA")
    assert ca.cert == tmp_path / "ca" / "ca.pem" and ca.key == tmp_path / "ca" / "ca.key"
    assert _mode(ca.key) == 0o600
    assert _mode(tmp_path / "ca") == 0o700
    cert = _cert(ca.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert cert.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)


def test_keys_are_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        pki.make_ca(tmp_path)
        _, key = pki.issue(tmp_path, "srv", hosts=["10.0.0.1"])
    finally:
        os.umask(old)
    assert _mode(tmp_path / "ca.key") == 0o600 and _mode(key) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_issued_server_certificate_names_loopback_and_the_given_hosts(tmp_path: Path) -> None:
    pki.make_ca(tmp_path)
    cert_path, key_path = pki.issue(tmp_path, "s1", hosts=["10.0.1.5", "mgmt.example", "::1"],
                                    out_dir=tmp_path / "out")
    assert cert_path == tmp_path / "out" / "s1.pem" and key_path == tmp_path / "out" / "s1.key"
    cert = _cert(cert_path)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "mgmt.example"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.1.5"),
        ipaddress.ip_address("::1")}
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.issuer == _cert(tmp_path / "ca.pem").subject
    lifetime = cert.not_valid_after - cert.not_valid_before
    assert lifetime <= pki.VALIDITY + pki.CLOCK_SKEW


def test_client_certificate_has_client_usage_only(tmp_path: Path) -> None:
    pki.make_ca(tmp_path)
    cert = _cert(pki.issue(tmp_path, "admin", client=True, server=False)[0])
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]


@pytest.mark.parametrize("name", ["", "../evil", ".hidden", "a/b", "x" * 65, "-rf"])
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    pki.make_ca(tmp_path)
    with pytest.raises(pki.PKIError, match="certificate name"):
        pki.issue(tmp_path, name)


@pytest.mark.parametrize("host", ["", "bad host", "a;b"])
def test_bad_hosts_are_refused(tmp_path: Path, host: str) -> None:
    pki.make_ca(tmp_path)
    with pytest.raises(pki.PKIError, match="host"):
        pki.issue(tmp_path, "s", hosts=[host])


def test_issue_without_a_ca_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(pki.PKIError, match="CA in"):
        pki.issue(tmp_path, "s")


def test_neither_server_nor_client_is_refused(tmp_path: Path) -> None:
    pki.make_ca(tmp_path)
    with pytest.raises(pki.PKIError, match="neither"):
        pki.issue(tmp_path, "s", server=False, client=False)


def test_run_credentials_issue_every_certificate_of_a_run(tmp_path: Path) -> None:
    creds = pki.run_credentials(tmp_path / "tls", switches=["s1", "s2"], hosts=["10.9.0.1"])
    assert set(creds.switches) == {"s1", "s2"}
    every = [creds.controller, creds.controller_client, creds.pbox, creds.admin,
             *creds.switches.values()]
    assert len({c.cert for c in every}) == len(every)
    for cred in every:
        assert _mode(cred.key) == 0o600
        assert _cert(cred.cert).issuer == _cert(creds.ca).subject
    san = _cert(creds.switches["s2"].cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.9.0.1") in san.get_values_for_type(x509.IPAddress)


def test_real_handshakes_accept_the_run_and_refuse_a_stranger(tmp_path: Path) -> None:
    creds = pki.run_credentials(tmp_path / "run", switches=["s1"], hosts=["10.9.0.1"])
    other = pki.run_credentials(tmp_path / "other", switches=[], hosts=[])
    mutual = _server_ctx(creds.switches["s1"], creds.ca)
    # the run's client, verifying the switch by its management IP: accepted
    _handshake(mutual, _client_ctx(creds.ca, creds.controller_client), "10.9.0.1")
    # a client certificate from another CA: refused by the server
    with pytest.raises(ssl.SSLError):
        _handshake(mutual, _client_ctx(creds.ca, other.controller_client), "10.9.0.1")
    # no client certificate where one is required: refused
    with pytest.raises(ssl.SSLError):
        _handshake(mutual, _client_ctx(creds.ca), "10.9.0.1")
    # a client that trusts another CA refuses the server
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_server_ctx(creds.switches["s1"], None), _client_ctx(other.ca), "10.9.0.1")
    # an address the certificate does not name: refused by the client
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_server_ctx(creds.switches["s1"], None), _client_ctx(creds.ca), "10.9.0.2")
