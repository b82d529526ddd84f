"""A server's model's Settings… in the model manager: its context length and abilities set by hand where the server
says nothing, kept in servers.json, shown in its row, and used when the model is loaded; against a real server on
127.0.0.1 and the real engine."""

from __future__ import annotations

import json

import shiboken6

from app.core.paths import data_paths
from app.library.servers.records import ModelAbility, ServerKind
from app.ui.models.remote_model_dialog import RemoteModelDialog
from app.ui.models.server_models import ServerModelsPanel
from tests.helpers.hostile_server import Script, hostile_server
from tests.ui.conftest import run, until


def open_panel(window) -> ServerModelsPanel:
    window.show_model_manager()
    panel = window.model_manager.installed.servers_panel
    assert panel is not None
    return panel


def kept_overrides(name: str) -> dict[str, object]:
    data = json.loads((data_paths().config / "servers.json").read_text())
    [server] = [s for s in data["servers"] if s["name"] == name]
    return server.get("models", {})


def row_texts(panel: ServerModelsPanel, server: str) -> list[list[str]]:
    top = panel.server_item(server)
    assert top is not None
    return [[top.child(i).text(c) for c in range(3)] for i in range(top.childCount())]


def closed(dialog: RemoteModelDialog) -> bool:
    return not shiboken6.isValid(dialog) or not dialog.isVisible()


def test_a_models_context_and_abilities_set_by_hand_are_kept_shown_and_used_then_put_back(make_window, loop) -> None:
    script = Script(models=["m"], words=["Hello"])  # OpenAI-compatible: says neither context nor abilities
    with hostile_server(script) as url:
        window = make_window()
        run(loop, window.doors.servers.add("box", url, ServerKind.OPENAI))
        panel = open_panel(window)
        run(loop, until(lambda: [m.id for m in panel.models_of("box")] == ["box/m"], what="the models"))
        assert row_texts(panel, "box") == [["m", "not said", "not said"]]
        assert not panel.settings_button.isEnabled()
        panel.select_model("box/m")
        assert panel.settings_button.isEnabled()
        panel.settings_button.click()
        dialog = panel.settings_dialog
        assert dialog is not None and dialog.isVisible()
        assert dialog.context_said.text() == "Its server does not say its context length."
        assert dialog.abilities_said.text().startswith("Its server does not say what the model can do")
        # As used now: tools offered (the server says if it cannot), no images, a chat model.
        assert [box.isChecked() for box in dialog.abilities.values()] == [False, True, False]
        assert not dialog.context_by_hand.isChecked() and not dialog.context.isEnabled()

        dialog.context_by_hand.setChecked(True)
        assert dialog.context.isEnabled()
        dialog.context.setValue(512)
        dialog.abilities[ModelAbility.VISION].setChecked(True)
        dialog.save_button.click()
        run(loop, until(lambda: closed(dialog), what="the dialog saved"))
        assert kept_overrides("box") == {"m": {"context_length": 512, "abilities": ["tools", "vision"]}}
        assert row_texts(panel, "box") == [["m", "512 (set by hand)", "tools, vision (set by hand)"]]
        assert panel.words.text().startswith("Saved for m on box")
        known = window.doors.servers.known("box/m")
        assert known is not None and known.sees_images  # a chat's model, from memory: as set now

        panel.select_model("box/m")
        panel.use_button.click()
        run(loop, until(lambda: window.doors.model.loaded is not None
                        and window.doors.model.loaded.model_path.startswith("remote://box/"), what="the model"))
        loaded = window.doors.model.loaded
        assert loaded.vision and loaded.calls_tools and loaded.context_length == 512  # the window asks 1,024
        run(loop, until(lambda: panel.listing is not None and panel.listing.done()
                        and row_texts(panel, "box")[0][0] == "m (in use)", what="listed again"))
        assert row_texts(panel, "box")[0][1:] == ["512 (set by hand)", "tools, vision (set by hand)"]

        panel.select_model("box/m")
        again = panel.open_settings()
        assert again is not None and again.context_by_hand.isChecked() and again.context.value() == 512
        assert [box.isChecked() for box in again.abilities.values()] == [True, True, False]
        again.as_said_button.click()
        assert not again.context_by_hand.isChecked()
        assert [box.isChecked() for box in again.abilities.values()] == [False, True, False]
        again.save_button.click()
        run(loop, until(lambda: closed(again), what="put back"))
        assert kept_overrides("box") == {}
        assert row_texts(panel, "box")[0][1:] == ["not said", "not said"]


def test_saving_for_a_server_removed_meanwhile_says_so_and_keeps_the_form(make_window, loop) -> None:
    with hostile_server(Script(models=["m"])) as url:
        window = make_window()
        run(loop, window.doors.servers.add("box", url, ServerKind.OPENAI))
        panel = open_panel(window)
        run(loop, until(lambda: [m.id for m in panel.models_of("box")] == ["box/m"], what="the models"))
        panel.select_model("box/m")
        dialog = panel.open_settings()
        assert dialog is not None
        run(loop, window.doors.servers.remove("box"))  # from the CLI, say, while the dialog is open
        dialog.abilities[ModelAbility.VISION].setChecked(True)
        dialog.save_button.click()
        run(loop, until(lambda: dialog.note.text() != "Saving…", what="the refusal"))
        assert dialog.note.text() == 'Nothing was saved: No server called "box" is added.'
        assert dialog.isVisible() and dialog.save_button.isEnabled()
        assert dialog.abilities[ModelAbility.VISION].isChecked()
        assert run(loop, window.doors.servers.servers()) == ()
