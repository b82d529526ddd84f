"""Images on the user's messages in the history: stored as BLOBs in their own table, read back with
the messages, refused when wrong, deleted with their message or chat, migrated from format 6, repaired
and copied; and in the chat export (version 4) and the Markdown export."""

from __future__ import annotations

import base64
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from app.core.store import history_repair
from app.core.attachments import MAX_IMAGE_BYTES, MAX_IMAGES, AttachedImage
from app.core.chat_export import ChatFileError, read_chat, to_json, to_markdown
from app.core.conversation import Role
from app.core.store.history import HistoryStore
from app.core.store.history_schema import MIGRATIONS
from tests.helpers.images import image_bytes

CHART = AttachedImage("chart.png", "image/png", 640, 480, image_bytes(640, 480), "")
PHOTO = AttachedImage("photo.jpg", "image/jpeg", 1536, 1152, image_bytes(96, 72, "JPEG"), "Scaled down from 4,032 x 3,024.")


def _chat_with_images(store: HistoryStore) -> tuple[int, int]:
    chat = store.create_conversation("Pictures")
    question = store.add_message(chat.id, Role.USER, "What is in these?", images=[CHART, PHOTO])
    store.add_message(chat.id, Role.ASSISTANT, "A chart and a photo.")
    return chat.id, question.id


def _image_rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM message_images").fetchone()[0])
    finally:
        conn.close()


def test_images_are_kept_in_order_as_blobs_and_read_back_with_the_messages(store: HistoryStore,
                                                                            db_path: Path) -> None:
    chat_id, question_id = _chat_with_images(store)
    question, answer = store.messages(chat_id)
    assert question.images == (CHART, PHOTO) and answer.images == ()
    assert store.get_message(question_id).images == (CHART, PHOTO)
    conn = sqlite3.connect(db_path)
    try:
        stored = conn.execute("SELECT position, typeof(data), data FROM message_images ORDER BY position").fetchall()
        text = conn.execute("SELECT attachments FROM messages WHERE id = ?", (question_id,)).fetchone()[0]
    finally:
        conn.close()
    assert [(p, kind, data) for p, kind, data in stored] == [(0, "blob", CHART.data), (1, "blob", PHOTO.data)]
    assert text == "[]"  # not JSON next to the files


def test_search_does_not_look_in_images(store: HistoryStore) -> None:
    chat_id, _ = _chat_with_images(store)
    assert store.search_conversations("chart.png") == []
    assert [c.id for c in store.search_conversations("these")] == [chat_id]


@pytest.mark.parametrize("images, said", [
    ([CHART] * (MAX_IMAGES + 1), "at most 8"),
    ([replace(CHART, mime="image/gif")], "only image/png and image/jpeg"),
    ([replace(CHART, data=b"hello")], "is not a PNG image"),
    ([replace(CHART, data=PHOTO.data)], "is not a PNG image"),
    ([replace(CHART, width=0)], "width must be"),
    ([replace(CHART, name="two\nlines")], "one line"),
    ([replace(CHART, data=b"\x89PNG\r\n\x1a\n" + bytes(MAX_IMAGE_BYTES))], "at most 10,485,760"),
])
def test_a_wrong_image_is_refused_and_nothing_is_written(store: HistoryStore, images: list[AttachedImage],
                                                         said: str) -> None:
    chat = store.create_conversation("x")
    with pytest.raises(ValueError, match=said):
        store.add_message(chat.id, Role.USER, "Look", images=images)
    assert store.messages(chat.id) == []


def test_only_the_user_attaches_images(store: HistoryStore) -> None:
    chat = store.create_conversation("x")
    with pytest.raises(ValueError, match="only the user"):
        store.add_message(chat.id, Role.ASSISTANT, "Look", images=[CHART])


def test_deleting_from_a_question_or_the_chat_deletes_its_images(store: HistoryStore, db_path: Path) -> None:
    chat_id, question_id = _chat_with_images(store)
    other_id, _ = _chat_with_images(store)
    assert _image_rows(db_path) == 4
    store.delete_messages_from(chat_id, question_id)
    assert _image_rows(db_path) == 2
    store.delete_conversation(other_id)
    assert _image_rows(db_path) == 0


def test_a_row_another_program_wrote_wrong_is_left_out(store: HistoryStore, db_path: Path) -> None:
    chat_id, question_id = _chat_with_images(store)
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE message_images SET data = ? WHERE position = 0", (b"not an image",))
    conn.commit()
    conn.close()
    assert store.get_message(question_id).images == (PHOTO,)


def test_a_format_6_history_gains_images(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    for migration in MIGRATIONS[:6]:
        migration(conn)
    conn.execute("PRAGMA user_version = 6")
    conn.execute("INSERT INTO conversations (title, created, updated, settings) VALUES ('Old', 1.0, 1.0, '{}')")
    conn.execute("INSERT INTO messages (conversation_id, role, text, created, state, folded)"
                 " VALUES (1, 'user', 'Hello', 1.0, 'complete', 'hello')")
    conn.close()
    with HistoryStore(db_path) as store:
        [old] = store.messages(1)
        assert (old.text, old.images) == ("Hello", ())
        added = store.add_message(1, Role.USER, "And this?", images=[CHART])
        assert store.get_message(added.id).images == (CHART,)


def test_recovering_a_history_keeps_its_images(db_path: Path) -> None:
    with HistoryStore(db_path) as store:
        chat_id, _ = _chat_with_images(store)
        before = store.messages(chat_id)
    done = history_repair.replace_damaged(db_path, recover=True)
    assert (done.conversations, done.messages) == (1, 2)
    with HistoryStore(db_path) as store:
        assert store.messages(chat_id) == before


def test_a_copied_chat_keeps_its_images(db_path: Path) -> None:
    with HistoryStore(Path(":memory:")) as memory, HistoryStore(db_path) as store:
        chat_id, _ = _chat_with_images(memory)
        carried = history_repair.copy_conversations(memory, store)[chat_id]
        assert [m.images for m in store.messages(carried)] == [(CHART, PHOTO), ()]


# --- the exports -------------------------------------------------------------------------


def test_the_json_export_is_version_4_with_base64_images_and_imports_back(store: HistoryStore, tmp_path: Path) -> None:
    chat_id, _ = _chat_with_images(store)
    written = to_json(store.get_conversation(chat_id), store.messages(chat_id))
    data = json.loads(written)
    assert data["version"] == 4
    [first, second] = data["messages"][0]["images"]
    assert (first["name"], first["mime"], first["width"], first["height"], first["note"]) == (
        "chart.png", "image/png", 640, 480, "")
    assert base64.b64decode(first["data"]) == CHART.data and second["note"] == PHOTO.note
    assert "images" not in data["messages"][1]
    path = tmp_path / "chat.json"
    path.write_text(written, encoding="utf-8")
    imported = read_chat(path)
    assert [m.images for m in imported.messages] == [(CHART, PHOTO), ()]


def test_a_chat_without_images_keeps_its_lower_version(store: HistoryStore) -> None:
    chat = store.create_conversation("Plain")
    store.add_message(chat.id, Role.USER, "Hi")
    assert json.loads(to_json(chat, store.messages(chat.id)))["version"] == 1


def _export(tmp_path: Path, images: object, *, version: int = 4, role: str = "user") -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"format": "kestrel-chat", "version": version,
                                "messages": [{"role": role, "text": "Look", "images": images}]}), encoding="utf-8")
    return path


def _item(**changes: object) -> dict[str, object]:
    item: dict[str, object] = {"name": "a.png", "mime": "image/png", "width": 4, "height": 4, "note": "",
                               "data": base64.b64encode(CHART.data).decode()}
    item.update(changes)
    return item


@pytest.mark.parametrize("images, said", [
    ([_item()] * (MAX_IMAGES + 1), "at most 8 can be imported"),
    ([_item(mime="image/svg+xml")], "only image/png and image/jpeg"),
    ([_item(mime="image/jpeg")], "is not a JPEG image"),
    ([_item(data=base64.b64encode(b"<svg onload=alert(1)>").decode())], "is not a PNG image"),
    ([_item(data="A" * (MAX_IMAGE_BYTES * 2))], "larger than the 10 MB"),
    ([_item(data=12)], "base64 text"),
    ([_item(width="4")], "width must be a whole number"),
    ("not a list", "images must be a list"),
])
def test_hostile_images_in_an_import_are_refused_naming_the_message(tmp_path: Path, images: object,
                                                                    said: str) -> None:
    with pytest.raises(ChatFileError, match="message 1") as refused:
        read_chat(_export(tmp_path, images))
    assert said in str(refused.value)


def test_images_on_an_answer_are_refused_and_an_older_version_ignores_the_key(tmp_path: Path) -> None:
    with pytest.raises(ChatFileError, match="only the user's messages have them"):
        read_chat(_export(tmp_path, [_item()], role="assistant"))
    [message] = read_chat(_export(tmp_path, "whatever", version=3)).messages
    assert message.images == ()


def test_markdown_names_each_image_with_its_size(store: HistoryStore) -> None:
    chat_id, _ = _chat_with_images(store)
    text = to_markdown(store.get_conversation(chat_id), store.messages(chat_id))
    assert "[Image: chart.png, 640 x 480]\n[Image: photo.jpg, 1536 x 1152]\n" in text
    assert base64.b64encode(CHART.data).decode()[:40] not in text
