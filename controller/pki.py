"""A throwaway certificate authority for one p4hub run (the `cryptography` package, no hand-written crypto).

`make run` creates a fresh CA under its run directory and issues every certificate the run's
control surfaces need (run_credentials): the controller's job API, each switch's P4Runtime
server, the PBoxes' control channel, and the client certificates the controller and the
operator present. Keys are ECDSA P-256; certificates live a few days, so a leaked run
directory stops mattering soon after the run. Real labs bring their own CA: everything that
takes a certificate takes plain PEM paths, so they need nothing from this module.

Private keys are created 0600 (os.open with the mode, never a chmod after the bytes are on
disk, so no window where another user could read them) and written to a temporary name first,
so a reader never sees half a key.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: How long an issued certificate (and the run CA) is valid: a run lasts minutes to hours.
VALIDITY = datetime.timedelta(days=3)
#: Back-dating of not-before, so a peer whose clock is slightly behind still accepts it.
CLOCK_SKEW = datetime.timedelta(minutes=10)
#: Names every server certificate carries, so loopback connections verify.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1")
CA_CERT = "ca.pem"
CA_KEY = "ca.key"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class PKIError(ValueError):
    """A bad name or host, or a CA directory without its files."""


@dataclass(frozen=True)
class Credential:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path

    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    def key_pem(self) -> bytes:
        return self.key.read_bytes()


@dataclass(frozen=True)
class RunCredentials:
    """Every certificate one run uses, all issued by the run's CA (`ca`)."""

    directory: Path
    ca: Path
    controller: Credential  # the job API's server certificate
    controller_client: Credential  # what the controller presents to switches and PBoxes
    pbox: Credential  # the PBoxes' control-channel server certificate
    admin: Credential  # the operator's client certificate (CLI, p4runtime-shell)
    switches: dict[str, Credential] = field(default_factory=dict)  # P4Runtime servers


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PKIError(f"certificate name {name!r}: letters, digits, '.', '_', '-' (at most 64), "
                       f"not starting with a dot or dash")
    return name


def _san(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for host in hosts:
        if not isinstance(host, str) or not host:
            raise PKIError(f"host {host!r}: a DNS name or an IP address")
        if host in seen:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not re.fullmatch(r"[A-Za-z0-9*]([A-Za-z0-9.-]{0,252})", host):
                raise PKIError(f"host {host!r}: neither an IP address nor a DNS name") from None
            names.append(x509.DNSName(host))
    return names


def _write_private(path: Path, data: bytes) -> None:
    """Write a secret: created 0600 under a temporary name, then renamed into place."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_secret(path: Path, data: bytes) -> None:
    """Write any secret (a key, a token) the way this module writes keys: 0600 from the start."""
    _write_private(Path(path), data)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(directory: Path, name: str = "p4hub run CA") -> Credential:
    """Create a CA in `directory` (made 0700 if new): ca.pem and ca.key (0600)."""
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cred = Credential(directory / CA_CERT, directory / CA_KEY)
    _write_private(cred.key, _key_pem(key))
    _write_public(cred.cert, cert.public_bytes(serialization.Encoding.PEM))
    return cred


def _load_ca(ca_dir: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate((ca_dir / CA_CERT).read_bytes())
        key = serialization.load_pem_private_key((ca_dir / CA_KEY).read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise PKIError(f"CA in {ca_dir}: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PKIError(f"CA in {ca_dir}: not an EC key")
    return cert, key


def issue(ca_dir: Path, name: str, *, hosts: Sequence[str] = (), client: bool = False,
          server: bool = True, out_dir: Path | None = None) -> tuple[Path, Path]:
    """Issue `name`.pem and `name`.key (0600) signed by the CA in `ca_dir`; returns their paths.

    `hosts` (DNS names or IP addresses) become subject alternative names; a server certificate
    always carries localhost and 127.0.0.1 too. `server`/`client` set the extended key usage
    (TLS server auth, TLS client auth): a certificate can be both.
    """
    _check_name(name)
    if not (client or server):
        raise PKIError(f"certificate {name!r}: neither a server nor a client certificate")
    ca_dir = Path(ca_dir)
    out = Path(out_dir) if out_dir is not None else ca_dir
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert, ca_key = _load_ca(ca_dir)
    san = _san([*LOOPBACK_HOSTS, *hosts] if server else list(hosts))
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + VALIDITY, ca_cert.not_valid_after.replace(tzinfo=datetime.UTC)))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = out / f"{name}.pem", out / f"{name}.key"
    _write_private(key_path, _key_pem(key))
    _write_public(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def run_credentials(directory: Path, *, switches: Sequence[str],
                    hosts: Sequence[str]) -> RunCredentials:
    """A fresh CA and every certificate one run needs, under `directory` (0700).

    `switches` are the switch names (one P4Runtime server certificate each); `hosts` are the
    addresses the servers are reached at (management IPs), put in every server certificate.
    """
    directory = Path(directory)
    ca = make_ca(directory)

    def cred(name: str, *, client: bool, server: bool) -> Credential:
        return Credential(*issue(directory, name, hosts=hosts, client=client, server=server))

    return RunCredentials(
        directory=directory,
        ca=ca.cert,
        controller=cred("controller", client=False, server=True),
        controller_client=cred("controller-client", client=True, server=False),
        pbox=cred("pbox", client=False, server=True),
        admin=cred("admin", client=True, server=False),
        switches={s: cred(f"switch-{_check_name(s)}", client=False, server=True)
                  for s in switches},
    )
