"""Red team, document folders and files (issue 35, items 7, 8 and 16): links out of a collection's
folder, file names that are not valid UTF-8, and .docx files whose zip directory lies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.documents.chunks import chunk_document
from app.documents.collections import FileState
from app.documents.index import DocumentIndex
from app.documents.reader_worker import ReaderPool, read_in_worker
from app.documents.reading import read_document
from app.documents.values import DocumentText, FolderFiles, ReadLimits, Unreadable, UnreadableCause, printable
from app.service.documents.attached_files import AttachmentsUnreadable, read_attachments
from tests.cli.test_chat_cli import ROOT, assert_no_traceback, kestrel
from tests.redteam.hostile_docs import (SECRET_AWS, SECRET_KEY, SECRET_NOTE, big_docx, docx_parts,
                                        home_with_secrets, lying_docx, patch_directory)

posix_only = pytest.mark.skipif(os.name != "posix", reason="symbolic links and RLIMIT_AS as POSIX has them")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[DocumentIndex]:
    with DocumentIndex(tmp_path / "documents.sqlite3", read_in_worker, chunk_document) as opened:
        yield opened


def indexed(index: DocumentIndex, repo: Path) -> dict[str, tuple[FileState, str]]:
    """Index `repo` as the collection "repo": each file's path in it, its state and reason."""
    index.add_collection(repo, "repo")
    index.index("repo")
    return {record.path.relative_to(repo).as_posix(): (record.state, record.reason) for record in index.files("repo")}


# --- item 7: a link inside a collection's folder never reaches outside it ------------------------

# Each case: (the link's name in the repository, what it points at relative to home or as the
# repository sees it, the secret word that must not be found).
LINKS_OUT: dict[str, tuple[str, Callable[[Path, Path], str], str]] = {
    "absolute link to a key, named .md": ("notes.md", lambda home, repo: str(home / ".ssh" / "id_rsa"), "zebrasecret"),
    "../.. link to ~/.aws": ("docs.txt", lambda home, repo: "../../.aws/credentials", "walrussecret"),
    "link to a folder outside": ("private", lambda home, repo: str(home / "private"), "narwhalsecret"),
    "relative link to a folder outside": ("aws", lambda home, repo: "../../.aws", "walrussecret"),
}


@posix_only
@pytest.mark.parametrize("case", sorted(LINKS_OUT))
def test_a_link_out_of_the_folder_is_skipped_and_named(index: DocumentIndex, tmp_path: Path, case: str) -> None:
    home, repo = home_with_secrets(tmp_path)
    name, target, secret = LINKS_OUT[case]
    os.symlink(target(home, repo), repo / name)
    files = indexed(index, repo)
    assert files["README.md"][0] is FileState.INDEXED
    state, reason = files[name]
    resolved = os.path.realpath(repo / name)
    assert state is FileState.UNREADABLE and "outside the collection's folder" in reason and resolved in reason, reason
    assert index.search(secret) == [] and index.search("kestrels") != []
    assert {hit.text for hit in index.search("secret")}.isdisjoint({SECRET_KEY, SECRET_AWS, SECRET_NOTE})


@posix_only
def test_links_that_loop_end_the_walk_and_links_inside_are_read(index: DocumentIndex, tmp_path: Path) -> None:
    _, repo = home_with_secrets(tmp_path)
    (repo / "guide").mkdir()
    (repo / "guide" / "falcons.md").write_text("Falcons stoop at great speed.", encoding="utf-8")
    os.symlink("guide/falcons.md", repo / "alias.md")  # inside, stays inside: read
    os.symlink("guide", repo / "shortcut")  # a folder inside: its files are read where they are
    os.symlink(".", repo / "guide" / "self")
    os.symlink("../..", repo / "guide" / "up")  # up and out: a loop of the folder if followed, outside if resolved
    os.symlink("b.md", repo / "a.md")
    os.symlink("a.md", repo / "b.md")
    started = time.monotonic()
    files = indexed(index, repo)
    assert time.monotonic() - started < 60  # ends, instead of walking for ever
    assert files["alias.md"][0] is FileState.INDEXED and files["guide/falcons.md"][0] is FileState.INDEXED
    assert not {"a.md", "b.md", "shortcut", "guide/self"} & set(files)
    assert files["guide/up"][0] is FileState.UNREADABLE and "outside the collection's folder" in files["guide/up"][1]
    assert len(index.search("stoop")) == 2


def _swap_at_check(monkeypatch: pytest.MonkeyPatch, checked: Path, swap: Callable[[], None]) -> None:
    """Swap a file or folder for a link right after the reader resolved `checked` and before it
    opens it: the race a folder written to by another program (a sync client, a git pull) can win."""
    real_realpath, swapped = os.path.realpath, []

    def realpath_then_swap(path: str | os.PathLike[str], *, strict: bool = False) -> str:
        resolved = real_realpath(path, strict=strict)
        if Path(path) == checked and not swapped:
            swapped.append(swap())
        return resolved

    monkeypatch.setattr(os.path, "realpath", realpath_then_swap)


@posix_only
def test_a_file_swapped_for_a_link_between_check_and_open_is_not_read(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home, repo = home_with_secrets(tmp_path)
    (repo / "doc.md").write_text("harmless", encoding="utf-8")

    def swap() -> None:
        os.symlink(home / ".ssh" / "id_rsa", repo / "doc.tmp")
        os.replace(repo / "doc.tmp", repo / "doc.md")

    _swap_at_check(monkeypatch, repo / "doc.md", swap)
    result = read_document(repo / "doc.md", within=repo)
    assert isinstance(result, Unreadable) and result.cause is UnreadableCause.OUTSIDE_FOLDER, result
    assert (repo / "doc.md").is_symlink()  # the swap did happen


@posix_only
def test_a_folder_swapped_for_a_link_between_check_and_open_is_not_read(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home, repo = home_with_secrets(tmp_path)
    (repo / "sub").mkdir()
    (repo / "sub" / "notes.txt").write_text("harmless", encoding="utf-8")

    def swap() -> None:
        os.rename(repo / "sub", repo / "old")
        os.symlink(home / "private", repo / "sub")  # holds notes.txt too: the secret one

    _swap_at_check(monkeypatch, repo / "sub" / "notes.txt", swap)
    result = read_document(repo / "sub" / "notes.txt", within=repo)
    assert isinstance(result, Unreadable) and result.cause is UnreadableCause.OUTSIDE_FOLDER, result


@posix_only
def test_the_reader_refuses_a_link_out_given_it_directly(tmp_path: Path) -> None:
    home, repo = home_with_secrets(tmp_path)
    os.symlink(home / ".ssh" / "id_rsa", repo / "key.md")
    [result] = read_in_worker(FolderFiles(repo, [repo / "key.md"]))
    assert isinstance(result, Unreadable) and result.cause is UnreadableCause.OUTSIDE_FOLDER
    assert str(home / ".ssh" / "id_rsa") in result.reason and result.path == repo / "key.md"


@posix_only
def test_docs_add_says_which_link_it_skipped(tmp_path: Path) -> None:
    home, repo = home_with_secrets(tmp_path)
    os.symlink(home / ".ssh" / "id_rsa", repo / "notes.md")
    added = kestrel("docs", "add", str(repo), timeout=120)
    assert added.returncode == 0, added.stderr
    assert_no_traceback(added)
    assert "2 files" in added.stdout and "1 could not be read" in added.stdout, added.stdout
    listed = kestrel("docs", "list", "repo", "--files").stdout
    assert f"notes.md  unreadable: a link to {home / '.ssh' / 'id_rsa'}, outside the collection's folder" in listed
    found = kestrel("docs", "search", "zebrasecret")
    assert found.returncode == 0 and found.stdout == "" and "Nothing found" in found.stderr


# --- item 8: a file name that is not valid UTF-8 ----------------------------------------------

BAD_NAME = b"bad\xff\xfe.txt"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the file system takes any bytes as a name")
def test_a_file_name_with_invalid_utf8_is_indexed_with_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.txt").write_text("Puffins nest on cliffs.", encoding="utf-8")
    (folder / "sub" / "more.md").write_text("# More\n\nGannets dive.", encoding="utf-8")
    with open(os.path.join(os.fsencode(folder), BAD_NAME), "wb") as bad:
        bad.write(b"Otters hold hands while they sleep.")
    os.mkdir(os.path.join(os.fsencode(folder), b"dir\xe9"))
    with open(os.path.join(os.fsencode(folder), b"dir\xe9", b"inner.md"), "wb") as inner:
        inner.write(b"Voles run in tunnels.")
    for action in (("add", str(folder)), ("reindex",), ("reindex", "notes")):
        result = kestrel("docs", *action, timeout=120)
        assert result.returncode == 0, result.stderr
        assert_no_traceback(result)
        assert result.stdout.startswith("notes: 4 files"), result.stdout
    listed = kestrel("docs", "list", "notes", "--files")
    assert listed.returncode == 0 and "bad\ufffd\ufffd.txt  1 chunk" in listed.stdout, listed.stdout
    assert "dir\ufffd/inner.md  1 chunk" in listed.stdout
    found = kestrel("docs", "search", "otters")
    assert found.returncode == 0 and "1. bad\ufffd\ufffd.txt" in found.stdout, found.stdout + found.stderr
    [hit] = [json.loads(line) for line in kestrel("docs", "search", "voles", "--json").stdout.splitlines()]
    assert hit["path"].endswith("dir\ufffd/inner.md") and "tunnels" in hit["text"]
    os.utime(os.path.join(os.fsencode(folder), BAD_NAME), (1, 1))
    again = kestrel("docs", "reindex", "notes")
    assert again.returncode == 0 and "(0 new, 1 changed, 0 gone)" in again.stdout, again.stdout


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the file system takes any bytes as a name")
def test_a_collection_folder_named_with_invalid_utf8_is_refused_in_words(tmp_path: Path) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"notes\xff")
    os.mkdir(folder)
    added = kestrel("docs", "add", os.fsdecode(folder), "--name", "notes")
    assert added.returncode == 2 and "not valid text" in added.stderr and "Rename" in added.stderr, added.stderr
    assert_no_traceback(added)


# --- item 16: a .docx whose zip directory lies, and one too large to read ----------------------

PROBE = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), resource.RLIM_INFINITY))
    def peak_kb():
        # VmHWM, this process image's own peak: ru_maxrss would count the pages of the forked test
        # process it was exec'd from, which passed 300 MB late in a whole test run.
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    from app.documents.reading import read_document
    result = read_document(Path(sys.argv[1]))
    print(json.dumps({"read": hasattr(result, "sections"), "cause": getattr(result, "cause", None),
                      "reason": getattr(result, "reason", ""),
                      "text": " ".join(s.text for s in getattr(result, "sections", ())),
                      "peak_mb": peak_kb() // 1024}))
""")


def probe(path: Path, address_space: int = 1 << 30) -> dict:
    """Read `path` in a fresh process capped at `address_space` (generous: the reader needs ~100 MB),
    and what it said with its peak memory (the process image's peak RSS, VmHWM, MB)."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(path), str(address_space)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture(scope="module")
def lying_1gib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The issue's file: document.xml declares 1,000 bytes and inflates to 1 GiB (about 1 MB on disk)."""
    return lying_docx(tmp_path_factory.mktemp("lying") / "lying.docx", "word/document.xml", 1 << 30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status and RLIMIT_AS as Linux has them")
def test_a_docx_whose_directory_lies_is_stopped_at_the_declared_size(lying_1gib: Path) -> None:
    assert lying_1gib.stat().st_size < 2 << 20
    said = probe(lying_1gib)
    assert not said["read"] and said["cause"] == UnreadableCause.DAMAGED, said
    assert "word/document.xml" in said["reason"] and "1,000 bytes" in said["reason"], said
    assert said["peak_mb"] < 300, said  # inflated whole, it took more than 1,000 MB


def test_a_lying_docx_in_the_reader_pool_is_refused_quickly(lying_1gib: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.md"
    good.write_text("# Fine\nStill read.", encoding="utf-8")
    with ReaderPool(ReadLimits(seconds_per_file=30)) as pool:
        started = time.monotonic()
        lying, fine = pool.read_all([lying_1gib, good])
        assert time.monotonic() - started < 30 and pool.restarts == 0
    assert isinstance(lying, Unreadable) and "says word/document.xml holds 1,000 bytes" in lying.reason, lying
    assert isinstance(fine, DocumentText)


def test_a_stored_part_longer_than_declared_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "stored.docx"
    parts = docx_parts()
    parts["word/document.xml"] += b" " * (5 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    patch_directory(path, "word/document.xml", 1000, zlib.crc32(parts["word/document.xml"][:1000]))
    result = read_document(path)
    assert isinstance(result, Unreadable) and result.cause is UnreadableCause.DAMAGED, result
    assert "says word/document.xml holds 1,000 bytes, but it unpacks to more" in result.reason


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status as Linux has it")
def test_a_lying_image_in_a_docx_is_not_inflated_and_the_text_is_read(tmp_path: Path) -> None:
    path = tmp_path / "photo.docx"
    parts = docx_parts()
    # The body's relationships name the image, so python-docx loads it with the document.
    parts["word/_rels/document.xml.rels"] = parts["word/_rels/document.xml.rels"].replace(b"</Relationships>", (
        b'<Relationship Id="rId99" Target="media/image1.png" Type="http://schemas.openxmlformats.org/'
        b'officeDocument/2006/relationships/image"/></Relationships>'))
    parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
        b"<Default ", b'<Default Extension="png" ContentType="image/png"/><Default ', 1)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
        with archive.open("word/media/image1.png", "w") as image:
            for _ in range(256):
                image.write(bytes(1 << 20))
    patch_directory(path, "word/media/image1.png", 1000, 0)
    said = probe(path)
    assert said["read"] and "kestrels hover" in said["text"] and said["peak_mb"] < 300, said


def test_a_valid_docx_too_large_to_read_says_so_not_damaged(tmp_path: Path) -> None:
    path = big_docx(tmp_path / "big.docx", 3 << 20)
    with zipfile.ZipFile(path) as archive:  # python-docx's template adds about 0.8 MB of styles
        xml = sum(info.file_size for info in archive.infolist() if info.filename.endswith((".xml", ".rels")))
    result = read_document(path, limits=ReadLimits(max_xml_bytes=1 << 20))
    assert isinstance(result, Unreadable) and result.cause is UnreadableCause.TOO_LARGE, result
    assert result.reason.startswith(f"too large for Kestrel to read: {xml / 2**20:.0f} MB of text/XML, "
                                    "the limit is 1 MB"), result
    assert "damaged" not in result.reason


@pytest.mark.skipif(os.name != "posix", reason="the reader's memory cap is RLIMIT_AS (Linux, macOS)")
def test_a_docx_past_the_memory_cap_is_too_large_not_damaged(tmp_path: Path) -> None:
    path = big_docx(tmp_path / "big.docx", 60 << 20)
    with ReaderPool(ReadLimits(memory_bytes=400 << 20, seconds_per_file=60)) as pool:
        result = pool.read(path)
    assert isinstance(result, Unreadable), result
    assert result.reason.startswith("too large for Kestrel to read: ") and " MB of text/XML needed more" in result.reason
    assert "400 MB of memory" in result.reason and "damaged" not in result.reason, result


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the file system takes any bytes as a name")
def test_an_attached_file_named_with_invalid_utf8_is_kept_in_the_history(tmp_path: Path) -> None:
    path = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), BAD_NAME)))
    path.write_text("Otters hold hands.", encoding="utf-8")
    [attached] = read_attachments([path], read_in_worker)
    assert attached.name == "bad\ufffd\ufffd.txt" and "Otters" in attached.text
    with HistoryStore(tmp_path / "history.sqlite3") as store:
        chat = store.create_conversation("Otters")
        store.add_message(chat.id, Role.USER, "What do otters do?", attachments=[attached])
        [message] = store.messages(chat.id)
    assert message.attachments[0].name == "bad\ufffd\ufffd.txt"
    with pytest.raises(AttachmentsUnreadable) as refused:
        read_attachments([path.with_suffix(".txt.gone")], read_in_worker)
    assert "\ufffd" in str(refused.value) and printable(str(refused.value)) == str(refused.value)
