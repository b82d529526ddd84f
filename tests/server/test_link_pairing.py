"""Kestrel Link end to end: a real `kestrel serve --share` with TLS on 127.0.0.1, paired through the real CLI,
chatted with through the engine's remote backend; wrong, expired and used codes, a man in the middle, a
revoked device and a changed certificate, each refused with words."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.library.servers.book import ServerBook
from app.library.servers.faults import ServerFault, ServerTrouble
from app.library.servers.keys import KEYS_FILE
from app.library.servers.link_code import new_code
from app.server.link.pairing_codes import PairingCodes
from app.server.link.files import LinkFiles
from tests.helpers.link_peers import SharingPeer, sharing_peer
from tests.helpers.remote_answers import load, stream, with_engine
from tests.server.serve_process import ROOT, serve_env
from app.service.models.client import EngineClient

pytestmark = pytest.mark.slow


def kestrel(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The real CLI in a Kestrel home."""
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=serve_env(home), input=stdin,
                          capture_output=True, text=True, timeout=120)


def pair(home: Path, name: str, peer: SharingPeer, code: str) -> subprocess.CompletedProcess[str]:
    return kestrel(home, "servers", "add", name, peer.shared, "--kind", "kestrel", "--code", code)


@pytest.fixture(scope="module")
def peer(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingPeer]:
    with sharing_peer(tmp_path_factory.mktemp("sharing") / "home", tiny_model) as running:
        yield running


def fresh_code(peer: SharingPeer) -> str:
    """A new code made as `kestrel link code` makes it, on the sharing PC."""
    made = kestrel(peer.home, "link", "code")
    assert made.returncode == 0, made.stderr
    return made.stdout.split("Pairing code: ")[1].split(" ")[0]


def test_a_pc_pairs_through_the_cli_and_chats_with_the_shared_model(peer: SharingPeer, kestrel_home: Path) -> None:
    paired = pair(kestrel_home, "studio-pc", peer, peer.code)
    assert paired.returncode == 0, paired.stderr
    assert paired.stdout.startswith(f"Paired with studio-pc at {peer.shared}; its certificate is pinned")
    assert "It answers with 1 model(s): tiny-model." in paired.stdout
    [server] = json.loads((kestrel_home / "config" / "servers.json").read_text())["servers"]
    assert server["kind"] == "kestrel" and server["pin"] == peer.fingerprint  # the fingerprint printed there
    book = ServerBook.at(data_paths())
    key = book.keys.get("studio-pc")
    assert key is not None and key.startswith("kestrel-link-") and key not in json.dumps(server)
    kept = (peer.link_folder / "devices.json").read_text()
    assert key not in kept  # the sharing PC keeps only its hash
    devices = kestrel(peer.home, "link", "devices", "--json")
    assert [json.loads(line)["name"] for line in devices.stdout.splitlines()] != []

    async def chat(client: EngineClient) -> object:
        refused = await load(client, "studio-pc", "tiny-model")
        assert refused is None, refused
        return await stream(client)

    answer = with_engine(chat)
    assert answer.error is None and answer.done is not None and answer.text  # type: ignore[attr-defined]
    assert answer.done.stats.device.startswith("studio-pc (127.0.0.1:")  # type: ignore[attr-defined]


def test_a_code_is_used_once(peer: SharingPeer, kestrel_home: Path) -> None:
    code = fresh_code(peer)
    assert pair(kestrel_home, "first", peer, code).returncode == 0
    again = pair(kestrel_home, "second", peer, code)
    assert again.returncode == 7
    assert "second refused to pair: The sharing PC has no pairing code waiting: a code is used once" in again.stderr
    assert ServerBook.at(data_paths()).get("second") is None


def test_an_expired_code_is_refused_in_words(peer: SharingPeer, kestrel_home: Path) -> None:
    eleven_minutes_ago = time.time() - 11 * 60
    code = PairingCodes(peer.link_folder, clock=lambda: eleven_minutes_ago).make(peer.fingerprint)
    late = pair(kestrel_home, "late", peer, code.text)
    assert late.returncode == 7
    assert "late refused to pair: That pairing code has expired (a code lasts 10 minutes)." in late.stderr
    assert ServerBook.at(data_paths()).get("late") is None and "late" not in (kestrel_home / "config").iterdir().__repr__()


def test_a_mistyped_code_is_refused_before_it_is_sent(peer: SharingPeer, kestrel_home: Path) -> None:
    code = fresh_code(peer)
    typo = ("1" if code[0] != "1" else "2") + code[1:]
    refused = pair(kestrel_home, "typo", peer, typo)
    assert refused.returncode == 7
    assert f"The pairing code does not match the certificate at {peer.shared}, so the code was not sent." in refused.stderr
    assert PairingCodes(peer.link_folder).waiting() is not None  # still waiting: the sharing PC saw no try
    assert pair(kestrel_home, "right", peer, code).returncode == 0


def test_a_revoked_device_is_refused_from_its_next_request(peer: SharingPeer, kestrel_home: Path) -> None:
    assert pair(kestrel_home, "studio-pc", peer, fresh_code(peer)).returncode == 0
    book = ServerBook.at(data_paths())
    assert [m.name for m in book.models("studio-pc")] == ["tiny-model"]
    device = LinkFiles(peer.link_folder).devices.list()[-1].name
    revoked = kestrel(peer.home, "link", "revoke", device)
    assert revoked.returncode == 0 and revoked.stdout.startswith(f"Removed {device}: its key is refused")
    with pytest.raises(ServerFault) as refused:
        book.models("studio-pc")
    assert refused.value.facts.trouble is ServerTrouble.KEY and refused.value.facts.status == 401
    assert str(refused.value).startswith(f"studio-pc ({peer.shared}) no longer lets this PC in (HTTP 401): it was "
                                         "removed from that PC's paired devices, or Kestrel there was reset. Pair again")


def test_a_certificate_other_than_the_codes_fails_pairing_and_the_code_is_never_sent(
        peer: SharingPeer, tmp_path: Path, kestrel_home: Path, tiny_model: Path) -> None:
    """A man in the middle: the code made at the peer, typed against another Kestrel's TLS server."""
    code = fresh_code(peer)
    # Each peer is given a model: one without would put the 1.1 GB starter together in its home first.
    with sharing_peer(tmp_path / "between", tiny_model) as between:
        refused = pair(kestrel_home, "studio-pc", between, code)
        assert refused.returncode == 7 and "the code was not sent" in refused.stderr
        assert LinkFiles(between.link_folder).devices.list() == ()
        assert PairingCodes(between.link_folder).waiting() is not None  # its own code, never redeemed
    assert PairingCodes(peer.link_folder).waiting() is not None


def test_wrong_codes_are_refused_in_words_then_limited(tmp_path: Path, kestrel_home: Path, tiny_model: Path) -> None:
    """Codes whose check matches the certificate (only someone who reads it can make them) but whose secret is wrong."""
    with sharing_peer(tmp_path / "limited", tiny_model) as limited:
        said = [pair(kestrel_home, f"guess{n}", limited, new_code(limited.fingerprint).text).stderr for n in range(6)]
        assert all("refused to pair: That pairing code is wrong." in words for words in said[:5]), said
        assert "refused to pair: Too many wrong pairing codes were tried in the last minute" in said[5]
        right = pair(kestrel_home, "right", limited, limited.code)  # even the right one waits now
        assert right.returncode == 7 and "Too many wrong pairing codes" in right.stderr
    assert ServerBook.at(data_paths()).list() == ()


def test_a_changed_certificate_is_refused_with_words(tmp_path: Path, kestrel_home: Path, tiny_model: Path) -> None:
    home = tmp_path / "reinstalled"
    with sharing_peer(home, tiny_model) as before:
        assert pair(kestrel_home, "studio-pc", before, before.code).returncode == 0
    shutil.rmtree(before.link_folder)  # Kestrel reinstalled there: a new certificate on the same address
    with sharing_peer(home, share_port=before.share_port) as after:
        assert after.fingerprint != before.fingerprint
        with pytest.raises(ServerFault) as refused:
            ServerBook.at(data_paths()).models("studio-pc")
        listed = kestrel(kestrel_home, "servers", "models", "studio-pc")
    assert refused.value.facts.trouble is ServerTrouble.CERT_CHANGED
    assert str(refused.value).startswith(f"studio-pc's certificate changed since you paired ({after.shared}), so "
                                         "Kestrel did not connect. If you reinstalled Kestrel there, pair again:")
    assert listed.returncode == 7 and "studio-pc's certificate changed since you paired" in listed.stderr
    assert (kestrel_home / "config" / KEYS_FILE).exists()


def test_the_sharing_server_takes_no_big_pairing_body_and_no_key_but_a_paired_devices(peer: SharingPeer) -> None:
    import http.client

    from app.library.servers.wire import pinned_context

    def ask(method: str, path: str, body: bytes | None = None, key: str = "") -> tuple[int, bytes]:
        connection = http.client.HTTPSConnection("127.0.0.1", peer.share_port, timeout=30, context=pinned_context())
        try:
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    status, said = ask("POST", "/link/pair", b'{"code": "' + b"A" * 5000 + b'"}')
    assert status == 413 and b"at most 4,096 bytes" in said
    api_key = next(line for line in (peer.home / "config" / "settings.json").read_text().splitlines() if '"key"' in line)
    status, said = ask("GET", "/v1/models", key=api_key.split('"')[3])  # the API server's own key
    assert status == 401 and b"This device is not paired with this Kestrel" in said


def test_servers_pair_takes_the_address_and_code_and_names_the_server_after_its_host(
        peer: SharingPeer, kestrel_home: Path) -> None:
    """`kestrel servers pair ADDRESS CODE` as the issue names it: `servers add` with --kind kestrel --code, the
    address's https:// put in front where it was left out."""
    paired = kestrel(kestrel_home, "servers", "pair", peer.shared.removeprefix("https://"), fresh_code(peer))
    assert paired.returncode == 0, paired.stderr
    assert paired.stdout.startswith(f"Paired with 127.0.0.1 at {peer.shared}; its certificate is pinned")
    assert "It answers with 1 model(s): tiny-model." in paired.stdout
    named = kestrel(kestrel_home, "servers", "pair", peer.shared, fresh_code(peer), "--name", "studio-pc",
                    "--no-check")
    assert named.returncode == 0 and named.stdout.startswith(f"Paired with studio-pc at {peer.shared};")
    servers = json.loads((kestrel_home / "config" / "servers.json").read_text())["servers"]
    assert [(s["name"], s["kind"], s["url"], s["pin"]) for s in servers] == [
        ("127.0.0.1", "kestrel", peer.shared, peer.fingerprint), ("studio-pc", "kestrel", peer.shared, peer.fingerprint)]
    taken = kestrel(kestrel_home, "servers", "pair", peer.shared, "123-456")
    assert taken.returncode == 2 and 'A server called "127.0.0.1" is added already' in taken.stderr
