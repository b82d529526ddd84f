"""Kestrel Link's pairing code, which binds the sharing PC's certificate so that no one between the two PCs can pair.

The scheme. The sharing PC has a self-signed certificate; its fingerprint F is the SHA-256 of the
certificate (DER). A pairing code is 12 characters of Crockford's base32 (no I, L, O or U, so it is
read aloud and typed without doubt), shown as XXXX-XXXX-XXXX:

- the first 8 are a random secret S (40 bits), made fresh for each code;
- the last 4 are the first 20 bits of HMAC-SHA256(S, F): the code's check of the certificate.

The other PC, given the address and the code, connects with TLS and reads the certificate the other
end shows *before it sends anything*, and computes the check from S and that certificate. A man in
the middle has to show a certificate of his own (he has not the sharing PC's private key), and without
S (only the sharing PC's screen shows it, and it is typed by hand on the other PC) his certificate
passes with odds of 1 in 2**20; a failed check ends the connection with words and sends nothing, so he
learns nothing to try again with. Once the check passes, the whole code goes over that TLS connection
to the sharing PC, which answers with a key for this device; the other PC keeps the key (keyring) and
the fingerprint as a pin, checked on every later connection. Guessing a code at the sharing PC itself:
2**60 codes, 5 wrong tries a minute, 10 minutes, and a code is used once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32
SECRET_CHARS = 8
CHECK_CHARS = 4
CODE_CHARS = SECRET_CHARS + CHECK_CHARS
# What people type for what they mean: O for zero, I and L for one (Crockford's reading).
_READ_AS = str.maketrans({"O": "0", "I": "1", "L": "1"})


@dataclass(frozen=True)
class PairingCode:
    """A code as typed, read: its secret and its check of the certificate."""

    secret: str
    check: str

    @property
    def text(self) -> str:
        """As shown and typed: XXXX-XXXX-XXXX."""
        whole = self.secret + self.check
        return "-".join(whole[i:i + 4] for i in range(0, CODE_CHARS, 4))

    def binds(self, fingerprint: str) -> bool:
        """Whether the code was made for the certificate of this fingerprint."""
        return hmac.compare_digest(self.check, check_of(self.secret, fingerprint))


def check_of(secret: str, fingerprint: str) -> str:
    """The code's last 4 characters: 20 bits of HMAC-SHA256(secret, fingerprint)."""
    digest = hmac.new(secret.encode("ascii"), bytes.fromhex(fingerprint), hashlib.sha256).digest()
    bits = int.from_bytes(digest[:3], "big") >> 4  # 20 bits
    return "".join(ALPHABET[(bits >> shift) & 31] for shift in (15, 10, 5, 0))


def new_code(fingerprint: str) -> PairingCode:
    """A fresh code for the certificate of this fingerprint."""
    secret = "".join(secrets.choice(ALPHABET) for _ in range(SECRET_CHARS))
    return PairingCode(secret, check_of(secret, fingerprint))


def read_code(typed: str) -> PairingCode:
    """The code as the person typed it (any case, with or without dashes and spaces); ValueError in words."""
    text = "".join(typed.split()).replace("-", "").upper().translate(_READ_AS)
    if len(text) != CODE_CHARS or any(c not in ALPHABET for c in text):
        raise ValueError(f'"{typed.strip()}" is not a pairing code: a code has 12 letters and digits, shown as '
                         "XXXX-XXXX-XXXX on the sharing PC (View → API server…, or kestrel link code there).")
    return PairingCode(text[:SECRET_CHARS], text[SECRET_CHARS:])


def fingerprint_of(certificate_der: bytes) -> str:
    """A certificate's SHA-256 fingerprint, as lowercase hex."""
    return hashlib.sha256(certificate_der).hexdigest()


def shown_fingerprint(fingerprint: str) -> str:
    """A fingerprint as people compare it: uppercase, in groups of four ("3F2A 9C01 …")."""
    upper = fingerprint.upper()
    return " ".join(upper[i:i + 4] for i in range(0, len(upper), 4))
