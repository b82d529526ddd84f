"""A selection in a rendered answer copied as plain text and as Markdown (message_copy)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextCursor, QTextDocument

from app.ui.messages.markdown import COPY_SCHEME, code_from_href, markdown_to_html, plain_to_html
from app.ui.messages.message_copy import selection_markdown, selection_text

ANSWER = ("# Head\n\nSome **bold** and *it* `code` ~~gone~~ [docs](https://example.com).\n\n"
          "1. one\n2. two\n   - nested\n\n> quoted\n\n---\n\n"
          "```python\ndef f():\n\n\treturn 1  \n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nEnd.\n")


@pytest.fixture
def document(qapp) -> QTextDocument:
    document = QTextDocument()
    document.setHtml(markdown_to_html(ANSWER))
    return document


def _select(document: QTextDocument, start_text: str, end_text: str) -> QTextCursor:
    """A selection from the start of start_text to the end of end_text, as the user would make it."""
    # The document's own positions: paragraph and table-cell marks count as one character.
    plain = document.toRawText().replace("\u2029", "\n").replace("\ufdd0", "\n").replace("\ufdd1", "\n")
    start = plain.index(start_text)
    end = plain.index(end_text, start) + len(end_text)
    cursor = QTextCursor(document)
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    return cursor


def test_the_whole_answer_copied_as_markdown_reads_as_the_markdown_it_came_from(document) -> None:
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    assert selection_markdown(cursor) == (
        "# Head\n\nSome **bold** and *it* `code` ~~gone~~ [docs](https://example.com).\n\n"
        "1. one\n2. two\n   - nested\n\n> quoted\n\n---\n\n"
        "```python\ndef f():\n\n\treturn 1  \n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nEnd.")


def test_the_whole_answer_as_plain_text_has_no_marks_and_no_copy_button(document) -> None:
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    text = selection_text(cursor)
    assert text.startswith("Head\n\nSome bold and it code gone docs.\n\n1. one\n2. two\n   - nested\n\nquoted\n\n")
    assert "def f():\n\n\treturn 1  \n\na\tb\n1\t2\n3\t4\n\nEnd." in text
    # The code block's header (its language and its Copy link) is chrome, not text.
    assert "Copy" not in text and "python" not in text and "\uf114" not in text


def test_part_of_a_paragraph(document) -> None:
    cursor = _select(document, "bold", "it")
    assert selection_text(cursor) == "bold and it"
    assert selection_markdown(cursor) == "**bold** and *it*"


def test_part_of_a_word_in_bold_keeps_its_marks(document) -> None:
    cursor = _select(document, "old", "old")
    assert selection_markdown(cursor) == "**old**"


def test_from_a_paragraph_into_a_code_block_gives_the_whole_fence(document) -> None:
    # Qt selects a whole table once a selection reaches into it from outside: so does the copy.
    cursor = _select(document, "quoted", "def f():")
    assert selection_markdown(cursor) == "> quoted\n\n---\n\n```python\ndef f():\n\n\treturn 1  \n```"
    assert selection_text(cursor) == "quoted\n\ndef f():\n\n\treturn 1  "


def test_inside_a_code_block_the_text_is_exact(document) -> None:
    cursor = _select(document, "def", "return 1  ")
    assert selection_text(cursor) == "def f():\n\n\treturn 1  "
    assert selection_markdown(cursor) == "```python\ndef f():\n\n\treturn 1  \n```"


def test_rows_of_a_table(document) -> None:
    cursor = _select(document, "a\nb", "2")
    assert selection_markdown(cursor) == "| a | b |\n|---|---|\n| 1 | 2 |"
    assert selection_text(cursor) == "a\tb\n1\t2"


def test_a_fence_inside_code_gets_a_longer_fence(qapp) -> None:
    document = QTextDocument()
    document.setHtml(markdown_to_html("````markdown\n```\nx\n```\n````\n"))
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    assert selection_markdown(cursor) == "````markdown\n```\nx\n```\n````"


def test_the_users_words_come_back_as_typed(qapp) -> None:
    words = "two  spaces *not emphasis*\nand a second line\n\nafter a blank one"
    document = QTextDocument()
    document.setHtml(plain_to_html(words))
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    assert selection_text(cursor) == words


@pytest.mark.parametrize("code", ["x = 1", "\n\tindented\n\n", "a  \n\u00a0b <&> é", ""])
def test_a_code_blocks_copy_link_carries_exactly_its_code(code: str) -> None:
    html = markdown_to_html(f"Before\n\n```sh\n{code}\n```\n")
    start = html.index(f'href="{COPY_SCHEME}:') + len('href="')
    href = html[start:html.index('"', start)]
    assert code_from_href(href) == code


def test_a_code_block_shows_its_language_and_other_links_are_not_copies() -> None:
    html = markdown_to_html("```rust\nfn main() {}\n```\n")
    assert ">rust</span>" in html and "Copy" in html
    assert code_from_href("https://example.com") is None
    assert code_from_href(f"{COPY_SCHEME}:not base64!") is None
