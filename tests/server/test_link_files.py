"""Kestrel Link's parts on their own: the code's binding, the waiting code's life, the paired devices, the certificate."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from app.library.servers.link_code import check_of, fingerprint_of, new_code, read_code
from app.server.link.certificate import ensure_certificate
from app.server.link.devices import PairedDevices
from app.server.link.pairing_codes import CODE_LIFETIME_S, WRONG_TRIES, PairingCodes, Redeemed

FINGERPRINT = fingerprint_of(b"the sharing PC's certificate")
OTHER = fingerprint_of(b"someone else's certificate")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_code_binds_the_certificate_it_was_made_for() -> None:
    code = new_code(FINGERPRINT)
    assert code.binds(FINGERPRINT) and not code.binds(OTHER)
    typed = read_code(code.text.lower().replace("-", " "))
    assert typed == code and len(code.text) == 14 and code.text.count("-") == 2
    assert check_of(code.secret, FINGERPRINT) == code.check


def test_a_code_is_read_as_people_type_it() -> None:
    assert read_code("o1il-2345-6789").text == "0111-2345-6789"
    with pytest.raises(ValueError, match='"ABC" is not a pairing code: a code has 12 letters and digits'):
        read_code("ABC")
    with pytest.raises(ValueError):
        read_code("ABCD-EFGH-JKLU")  # U is not in the alphabet


def test_a_code_is_taken_once_in_time(tmp_path: Path) -> None:
    clock = Clock()
    codes = PairingCodes(tmp_path, clock)
    made = codes.make(FINGERPRINT)
    assert codes.waiting() == made and made.seconds_left(clock.now) == CODE_LIFETIME_S
    assert codes.redeem(made.text, OTHER) is Redeemed.NONE_WAITING  # made for another certificate
    assert codes.redeem(made.text.lower(), FINGERPRINT) is Redeemed.TAKEN
    assert codes.redeem(made.text, FINGERPRINT) is Redeemed.NONE_WAITING
    late = codes.make(FINGERPRINT)
    clock.now += CODE_LIFETIME_S
    assert codes.waiting() is None and codes.redeem(late.text, FINGERPRINT) is Redeemed.EXPIRED


def test_wrong_codes_are_limited_then_let_through_a_minute_later(tmp_path: Path) -> None:
    clock = Clock()
    codes = PairingCodes(tmp_path, clock)
    made = codes.make(FINGERPRINT)
    assert [codes.redeem("0000-0000-0000", FINGERPRINT) for _ in range(WRONG_TRIES)] == [Redeemed.WRONG] * WRONG_TRIES
    assert codes.redeem(made.text, FINGERPRINT) is Redeemed.TOO_MANY
    clock.now += 61
    assert codes.redeem(made.text, FINGERPRINT) is Redeemed.TAKEN


def test_a_new_code_replaces_the_one_before(tmp_path: Path) -> None:
    codes = PairingCodes(tmp_path)
    first, second = codes.make(FINGERPRINT), codes.make(FINGERPRINT)
    assert codes.redeem(first.text, FINGERPRINT) is Redeemed.WRONG
    assert codes.redeem(second.text, FINGERPRINT) is Redeemed.TAKEN


def test_devices_keep_only_the_keys_hash_and_a_revoked_key_is_refused(tmp_path: Path) -> None:
    devices = PairedDevices(tmp_path)
    laptop, key = devices.add("laptop")
    twin, twin_key = devices.add("laptop")
    assert (laptop.name, twin.name) == ("laptop", "laptop (2)")
    assert key not in devices.path.read_text() and devices.admits(key) and devices.admits(twin_key)
    assert not devices.admits("kestrel-link-guess") and not devices.admits("")
    elsewhere = PairedDevices(tmp_path)  # `kestrel link revoke` in another process
    assert elsewhere.revoke("LAPTOP") == laptop
    assert not devices.admits(key) and devices.admits(twin_key)
    assert [d.name for d in devices.list()] == ["laptop (2)"]
    assert elsewhere.revoke("nobody") is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_the_certificate_is_made_once_and_only_this_user_reads_it(tmp_path: Path) -> None:
    made = ensure_certificate(tmp_path / "link")
    again = ensure_certificate(tmp_path / "link")
    assert again == made and len(made.fingerprint) == 64
    for path in (made.certificate, made.private_key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    devices = PairedDevices(tmp_path / "link")
    devices.add("laptop")
    assert stat.S_IMODE(devices.path.stat().st_mode) == 0o600
