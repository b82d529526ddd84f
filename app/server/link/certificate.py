"""The sharing PC's own TLS certificate: made on first use, kept in Kestrel's data folder readable by this user only.

Self-signed on purpose: the other PCs pin its fingerprint at pairing (app/library/servers/link_code.py), so
no certificate authority, name or expiry check is needed, and it lasts as long as Kestrel is installed.
The `cryptography` package makes it (Python's ssl module can use a certificate but not make one).
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from app.core.files import write_atomically
from app.core.paths import DataPaths
from app.library.servers.link_code import fingerprint_of

CERTIFICATE_FILE = "certificate.pem"
PRIVATE_KEY_FILE = "private-key.pem"
VALID_DAYS = 20 * 365  # pinned, not checked against a date: it lasts until Kestrel is reinstalled


def link_folder(paths: DataPaths) -> Path:
    """Where Kestrel Link keeps its certificate, pairing code and paired devices."""
    return paths.data / "link"


@dataclass(frozen=True)
class LinkCertificate:
    """The certificate and key files uvicorn serves, and the certificate's SHA-256 fingerprint (hex)."""

    certificate: Path
    private_key: Path
    fingerprint: str


def certificate_at(folder: Path) -> LinkCertificate | None:
    """The certificate kept in folder, or None when none was made yet (or it cannot be read)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    cert_path, key_path = folder / CERTIFICATE_FILE, folder / PRIVATE_KEY_FILE
    try:
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError):
        return None
    if not key_path.is_file():
        return None
    return LinkCertificate(cert_path, key_path, fingerprint_of(certificate.public_bytes(Encoding.DER)))


def ensure_certificate(folder: Path) -> LinkCertificate:
    """The certificate kept in folder, made now if there is none; OSError when the folder refuses it."""
    found = certificate_at(folder)
    return found if found is not None else _make(folder)


def _make(folder: Path) -> LinkCertificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Kestrel on {socket.gethostname()}"[:64])])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .sign(key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    cert_pem = certificate.public_bytes(Encoding.PEM)
    # The key first: a certificate without its key would be read as made, and never served.
    for path, data in ((folder / PRIVATE_KEY_FILE, key_pem), (folder / CERTIFICATE_FILE, cert_pem)):
        write_atomically(path, data)  # its temporary file is 0600 already (mkstemp)
        if sys.platform != "win32":
            os.chmod(path, 0o600)
    return LinkCertificate(folder / CERTIFICATE_FILE, folder / PRIVATE_KEY_FILE,
                           fingerprint_of(certificate.public_bytes(Encoding.DER)))
