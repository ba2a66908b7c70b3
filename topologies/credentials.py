"""The throwaway TLS credentials of one rack run, and where each process is told of them.

``Rack`` makes a fresh CA and every certificate the run needs under ``<log dir>/tls``
(p4hub.controller.pki.run_credentials: keys 0600, certificates valid a few days), then:

* each P4 switch serves P4Runtime over TLS and requires a client certificate
  (``switch_tls``: simple_switch_grpc's five flags; p4lite-switch also takes
  ``--grpc-server-writer controller-client``, so the operator's certificate reads only);
* each PBox serves its control channel over TLS on its management address and takes
  only the controller's and the operator's certificates (``pbox_args``);
* the controller's topology names the CA and its client certificate (``topology_tls``).

The operator's certificate (``admin.pem``/``admin.key``) reaches every one of them: the
README shows p4runtime-shell and the PBox's control channel with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from p4hub.controller import pki

CONTROLLER_CLIENT = "controller-client"  # pki.run_credentials' names for the two clients
ADMIN = "admin"
DIRECTORY = "tls"


@dataclass(frozen=True)
class SwitchTls:
    """The switch's P4Runtime TLS: its certificate and key, the CA clients must present a
    certificate from, and the certificate names that may write (p4lite-switch only)."""

    cert: Path
    key: Path
    ca: Path
    writers: tuple[str, ...] = ()

    def args(self, real_switch: bool) -> list[str]:
        """The target options (after ``--``) for simple_switch_grpc (``real_switch``) or
        p4lite-switch."""
        args = ["--grpc-server-ssl", "--grpc-server-cacert", str(self.ca),
                "--grpc-server-cert", str(self.cert), "--grpc-server-key", str(self.key),
                "--grpc-server-with-client-auth"]
        if not real_switch:
            for name in self.writers:
                args += ["--grpc-server-writer", name]
        return args


def make(log_dir: Path, switches: Sequence[str], hosts: Sequence[str]) -> pki.RunCredentials:
    """A fresh CA and the run's certificates under ``log_dir/tls`` (0700)."""
    return pki.run_credentials(log_dir / DIRECTORY, switches=switches, hosts=hosts)


def switch_tls(creds: pki.RunCredentials, switch: str) -> SwitchTls:
    cred = creds.switches[switch]
    return SwitchTls(cert=cred.cert, key=cred.key, ca=creds.ca, writers=(CONTROLLER_CLIENT,))


def pbox_args(creds: pki.RunCredentials) -> list[str]:
    """p4hub-pbox's control-channel TLS options (after ``--control HOST:PORT``)."""
    return ["--control-cert", str(creds.pbox.cert), "--control-key", str(creds.pbox.key),
            "--control-ca", str(creds.ca), "--control-client", CONTROLLER_CLIENT,
            "--control-client", ADMIN]


def topology_tls(creds: pki.RunCredentials) -> dict[str, str]:
    """The controller topology's ``tls`` section: the CA and the controller's client
    certificate (absolute paths)."""
    return {"ca": str(creds.ca), "cert": str(creds.controller_client.cert),
            "key": str(creds.controller_client.key)}


def request_code(address: tuple[str, int], creds: pki.RunCredentials | None) -> str:
    """Python source that sends ``sys.argv[1]`` (a JSON line) to a PBox's control channel
    and prints the answer line, over TLS with the operator's certificate when ``creds``."""
    host, port = address
    connect = f"c=socket.create_connection(({host!r},{port}),timeout=5);"
    if creds is not None:
        connect += (f"x=ssl.create_default_context(cafile={str(creds.ca)!r});"
                    f"x.load_cert_chain({str(creds.admin.cert)!r},{str(creds.admin.key)!r});"
                    f"c=x.wrap_socket(c,server_hostname={host!r});")
    return ("import json,socket,ssl,sys;" + connect +
            "c.sendall(sys.argv[1].encode()+b'\\n');"
            "print(c.makefile().readline().strip())")
