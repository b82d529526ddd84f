"""Servers' keys: in the credential store through keyring when one answers, else in a 0600 file, said in words."""

from __future__ import annotations

import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.library.servers.keys import KEYRING_SERVICE, KeyPlace, ServerKeys

keyring = pytest.importorskip("keyring", reason="keyring is not installed (the keys go to the file: tested below)")
from keyring.backend import KeyringBackend  # noqa: E402
from keyring.backends import fail  # noqa: E402
from keyring.errors import PasswordDeleteError, PasswordSetError  # noqa: E402


class MemoryKeyring(KeyringBackend):
    """A credential store that answers, in memory: keyring's own API, so ServerKeys uses it as it would Windows'."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop((service, username), None) is None:
            raise PasswordDeleteError("no such entry")


class RefusingKeyring(MemoryKeyring):
    """A store that is there but refuses to keep anything (a locked keychain)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise PasswordSetError("the keychain is locked")


@pytest.fixture
def chosen_keyring() -> Iterator[None]:
    """keyring.set_keyring changes the whole process: the one before comes back after the test."""
    before = keyring.get_keyring()
    yield
    keyring.set_keyring(before)


def test_a_key_goes_to_the_credential_store_when_one_answers_and_never_to_the_file(tmp_path: Path,
                                                                                  chosen_keyring: None) -> None:
    store = MemoryKeyring()
    keyring.set_keyring(store)
    keys = ServerKeys(tmp_path / "server-keys.json")
    kept = keys.set("studio-pc", "sk-secret")
    assert kept.place is KeyPlace.KEYRING and kept.words == "The key is kept in the system's credential store."
    assert store.entries == {(KEYRING_SERVICE, "studio-pc"): "sk-secret"}
    assert keys.get("studio-pc") == "sk-secret" and not (tmp_path / "server-keys.json").exists()
    keys.delete("studio-pc")
    assert store.entries == {} and keys.get("studio-pc") is None


def test_with_no_credential_store_the_key_goes_to_a_file_only_this_user_reads_and_the_words_say_why(
        tmp_path: Path, chosen_keyring: None) -> None:
    keyring.set_keyring(fail.Keyring())  # what this Linux box has: no Secret Service running
    path = tmp_path / "server-keys.json"
    keys = ServerKeys(path)
    kept = keys.set("studio-pc", "sk-secret")
    assert kept.place is KeyPlace.FILE
    assert kept.words == (f"The key is kept in {path}, a file only you can read, because no system credential "
                          "store answered (on Linux: no Secret Service, such as GNOME Keyring or KWallet, is running).")
    if sys.platform != "win32":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ServerKeys(path).get("studio-pc") == "sk-secret"
    keys.set("other", "sk-2")
    keys.delete("studio-pc")
    assert ServerKeys(path).get("studio-pc") is None and ServerKeys(path).get("other") == "sk-2"


def test_a_store_that_refuses_sends_the_key_to_the_file_with_its_reason(tmp_path: Path, chosen_keyring: None) -> None:
    keyring.set_keyring(RefusingKeyring())
    kept = ServerKeys(tmp_path / "server-keys.json").set("s", "k")
    assert kept.place is KeyPlace.FILE and "the credential store refused it (PasswordSetError: the keychain is locked)" \
        in kept.words


def test_a_key_moved_into_the_store_leaves_the_file(tmp_path: Path, chosen_keyring: None) -> None:
    path = tmp_path / "server-keys.json"
    keyring.set_keyring(fail.Keyring())
    ServerKeys(path).set("s", "old")
    keyring.set_keyring(MemoryKeyring())
    ServerKeys(path).set("s", "new")
    assert ServerKeys(path).get("s") == "new" and "old" not in path.read_text(encoding="utf-8")


def test_without_the_keyring_package_the_file_is_used_and_the_words_say_so(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # `import keyring` raises ImportError
    kept = ServerKeys(tmp_path / "server-keys.json").set("s", "k")
    assert kept.place is KeyPlace.FILE and kept.words.endswith("because the keyring package is not installed.")


def test_an_empty_key_forgets_the_one_kept(tmp_path: Path, chosen_keyring: None) -> None:
    keyring.set_keyring(fail.Keyring())
    keys = ServerKeys(tmp_path / "server-keys.json")
    keys.set("s", "k")
    keys.set("s", "")
    assert keys.get("s") is None
