"""LinkFiles: Kestrel Link's files on the sharing PC in one folder: the certificate (made on first use), the code, the devices.

Light on purpose (no uvicorn): `kestrel link` and the window's API server window read them without the server.
"""

from __future__ import annotations

import socket
from pathlib import Path

from app.core.paths import DataPaths
from app.core.server_settings import LOOPBACK
from app.server.link.certificate import LinkCertificate, certificate_at, ensure_certificate, link_folder
from app.server.link.devices import PairedDevices
from app.server.link.pairing_codes import PairingCodes, WaitingCode

# An address of the documentation range (RFC 5737): connecting a UDP socket to it sends nothing, and
# tells which of this PC's addresses its route to other machines leaves from.
_ROUTE_PROBE = ("192.0.2.1", 9)


def lan_address() -> str:
    """This PC's address on its network; 127.0.0.1 when it is on none (then only this PC can pair)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(_ROUTE_PROBE)
            return str(probe.getsockname()[0])
        except OSError:
            return LOOPBACK


def shared_address(host: str, port: int) -> str:
    """The address other PCs pair with: https://HOST:PORT (this PC's network address where host is "")."""
    return f"https://{host or lan_address()}:{port}"


class LinkFiles:
    """Kestrel Link's files in one folder. Blocking (files, a lock): the window calls it off its thread."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.devices = PairedDevices(folder)
        self.codes = PairingCodes(folder)

    @classmethod
    def at(cls, paths: DataPaths) -> LinkFiles:
        return cls(link_folder(paths))

    def certificate(self) -> LinkCertificate:
        """This PC's certificate, made now if there is none yet; OSError when the folder refuses it."""
        return ensure_certificate(self.folder)

    def known_certificate(self) -> LinkCertificate | None:
        """The certificate if one was made; never makes one."""
        return certificate_at(self.folder)

    def new_code(self) -> WaitingCode:
        """A new pairing code (10 minutes, once) bound to this PC's certificate."""
        return self.codes.make(self.certificate().fingerprint)
