"""A server's model as one chat's own model, in the real window against a real server on 127.0.0.1: chosen from
the chat header's menu (asked for only when the menu opens), named in the header, the empty chat and the composer,
its answer line saying where it ran, and a change of model refused in words while an answer is being written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.answer_stats import AnswerStats, FinishReason
from app.core.conversation import Role
from app.library.servers.records import ServerKind
from app.ui.messages.message_chrome import stats_line
from tests.helpers.hostile_server import Script, hostile_server
from tests.helpers.remote_peers import closed_port, llama_cpp_server
from tests.ui.conftest import idle, run, until


def test_the_answer_line_says_which_server_wrote_it_and_the_history_keeps_it() -> None:
    remote = AnswerStats(ttft_ms=120.4, tokens=64, tokens_per_s=84.2, device="studio-pc (192.168.1.20:8080)",
                         server="studio-pc")
    assert stats_line(remote) == "on studio-pc · 84 tok/s · TTFT 120 ms · 64 tokens"
    stopped = AnswerStats(tokens=3, tokens_per_s=9.0, server="studio-pc", finish_reason=FinishReason.CANCELLED)
    assert stats_line(stopped).startswith("on studio-pc · 9 tok/s") and stats_line(stopped).endswith("stopped")
    assert AnswerStats.from_json(remote.to_json()) == remote
    local = AnswerStats(tokens=5, tokens_per_s=35.25, device="CPU")
    assert "server" not in json.loads(local.to_json())  # stored as before servers existed
    assert stats_line(local) == "TTFT 0 ms · 35.2 tok/s · 5 tokens · CPU"


def texts(window) -> list[str]:
    return [action.text() for action in window.header.model_menu.actions()]


def remote_action(window, model_id: str):
    return next(action for action in window.header.model_actions() if action.data() == model_id)


def open_menu_and_wait(window, loop, entry: str) -> None:
    # What the menu popping up does (a popup offscreen makes Qt warn that it cannot grab the keyboard).
    window.header.model_menu.aboutToShow.emit()
    run(loop, until(lambda: entry in texts(window), what=f"{entry!r} in the menu"))


def test_a_chat_answers_on_a_server_chosen_in_its_header_and_says_so(make_window, loop) -> None:
    script = Script(models=["qwen2.5:7b", "llama3.1:8b"], ollama=True, words=["Hello", " from", " afar"])
    off = f"http://127.0.0.1:{closed_port()}"
    with hostile_server(script) as url:
        window = make_window()
        run(loop, window.doors.servers.add("studio-pc", url, ServerKind.OLLAMA))
        run(loop, window.doors.servers.add("old laptop", off, ServerKind.OPENAI))
        local_title = window.header.button_text()
        assert script.requests == []  # adding contacts nothing, nor does the window's start

        open_menu_and_wait(window, loop, "qwen2.5:7b on studio-pc")
        assert "llama3.1:8b on studio-pc" in texts(window)
        run(loop, until(lambda: any(t.startswith("old laptop: did not answer") for t in texts(window)),
                        what="the silent server said"))
        run(loop, until(lambda: f"{local_title} (default)" in texts(window), what="the local models listed too"))
        shown = texts(window)
        assert shown[0] == f"{local_title} (default)" and shown[1] == ""
        assert shown.index("qwen2.5:7b on studio-pc") == 2  # after the local ones

        remote_action(window, "studio-pc/qwen2.5:7b").trigger()
        run(loop, until(lambda: window.doors.chat.conversation_model_id() == "studio-pc/qwen2.5:7b",
                        what="the choice"))
        run(loop, until(lambda: window.header.button_text() == "qwen2.5:7b on studio-pc", what="the header"))
        assert remote_action(window, "studio-pc/qwen2.5:7b").isChecked()
        # Before the first message: where it will go, in the empty chat and the composer.
        assert f"go to studio-pc ({url})" in window.chat.messages.empty_words
        assert window.composer.edit.placeholderText() == f"Answers come from studio-pc ({url})"

        assert window.doors.chat.send("Hi")
        run(loop, until(idle(window), what="the answer"))
        answer = window.doors.chat.messages[-1]
        assert answer.role == Role.ASSISTANT and answer.text == "Hello from afar"
        assert any(body.get("model") == "qwen2.5:7b" for body in script.bodies)
        assert answer.stats is not None and answer.stats.server == "studio-pc"
        assert stats_line(answer.stats).startswith("on studio-pc · ")
        assert " tok/s · TTFT " in stats_line(answer.stats) and "CPU" not in stats_line(answer.stats)
        host = url.removeprefix("http://")
        assert window.status.device.text() == f"studio-pc ({host})"
        assert "What you send goes to studio-pc" in window.status.device.toolTip()
        assert window.header.button_text() == "qwen2.5:7b on studio-pc"  # while and after it answers

        # The app's own model is still the local one: a new chat follows it, on this computer.
        window.new_conversation()
        run(loop, until(lambda: window.header.button_text() == local_title, what="a new chat on the default"))
        assert "nothing you type leaves it" in window.chat.messages.empty_words


def test_changing_the_model_while_an_answer_is_written_is_refused_in_words(make_window, loop) -> None:
    script = Script(models=["m", "other"], ollama=True, endless=True, delay_s=0.05)
    with hostile_server(script) as url:
        window = make_window()
        run(loop, window.doors.servers.add("studio-pc", url, ServerKind.OLLAMA))
        open_menu_and_wait(window, loop, "m on studio-pc")
        remote_action(window, "studio-pc/m").trigger()
        run(loop, until(lambda: window.doors.chat.conversation_model_id() == "studio-pc/m", what="the choice"))
        assert window.doors.chat.send("Tell me a long story")
        run(loop, until(lambda: window.doors.chat.open_chat_busy and window.doors.model.loaded is not None
                        and window.doors.model.loaded.device.startswith("studio-pc"), what="the answer started"))

        open_menu_and_wait(window, loop, "other on studio-pc")
        remote_action(window, "studio-pc/other").trigger()
        assert window.banner.text().startswith("This chat's model was not changed: an answer is being written.")
        assert window.doors.chat.conversation_model_id() == "studio-pc/m"
        assert remote_action(window, "studio-pc/m").isChecked()

        window.show_model_manager()
        panel = window.model_manager.installed.servers_panel
        run(loop, until(lambda: [m.id for m in panel.models_of("studio-pc")] == ["studio-pc/m", "studio-pc/other"],
                        what="the manager's list"))
        panel.select_model("studio-pc/other")
        panel.use_button.click()
        run(loop, until(lambda: "was not loaded" in panel.words.text(), what="Use this model refused"))
        assert panel.words.text().startswith("other on studio-pc was not loaded: an answer is being written.")
        assert window.doors.model.model is not None and window.doors.model.model.id == "studio-pc/m"

        window.stop_open_chat()
        run(loop, until(idle(window), what="the answer stopped"))

        # Its server removed: the header says so and the entry cannot be chosen; nothing goes there any more.
        run(loop, window.doors.servers.remove("studio-pc"))
        window.header.model_menu.aboutToShow.emit()
        run(loop, until(lambda: window.header.button_text() == "m on studio-pc (server removed)", what="said gone"))
        assert not remote_action(window, "studio-pc/m").isEnabled()
        assert "nothing you type leaves it" in window.chat.messages.empty_words


@pytest.mark.slow
def test_a_chat_answers_on_llama_cpp_servers_own_server_chosen_in_its_header(make_window, loop, tiny_model: Path,
                                                                            tmp_path: Path) -> None:
    with llama_cpp_server(tiny_model, tmp_path / "server.log") as url:
        window = make_window()
        run(loop, window.doors.servers.add("llama-box", url, ServerKind.OPENAI))
        open_menu_and_wait(window, loop, "tiny on llama-box")
        remote_action(window, "llama-box/tiny").trigger()
        run(loop, until(lambda: window.header.button_text() == "tiny on llama-box", what="the header"))
        assert window.doors.chat.send("Hello")
        run(loop, until(idle(window), what="the answer", timeout=120))
        answer = window.doors.chat.messages[-1]
        assert answer.role == Role.ASSISTANT and answer.text and answer.stats is not None
        assert answer.stats.server == "llama-box" and stats_line(answer.stats).startswith("on llama-box · ")
        assert window.status.device.text() == f"llama-box ({url.removeprefix('http://')})"
