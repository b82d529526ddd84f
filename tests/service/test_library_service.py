"""The model manager's service over a real service, engine, library and HTTP server."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from app.core.paths import data_paths
from app.core.settings import SettingsFile
from app.hardware.fit import Verdict
from app.library.catalog import CatalogEntry, find_entry, load_catalog
from app.library.model_defaults import ModelDefaults
from app.service import events as ev
from app.service.events import DownloadChanged
from app.service.events import ModelState
from tests.helpers.http_servers import TestServer, hugging_face_repo, sha256_of
from tests.service.conftest import engine_of, library_of, run


def _row(listed: ev.LibraryListed, model_id: str) -> ev.ModelRow:
    return next(r for r in listed.rows if r.model.id == model_id)


def test_rows_carry_details_fit_default_and_loaded(started_service, tiny_model: Path) -> None:
    async def scenario():
        async with started_service() as started:
            await started.service.library.refresh()
            return started.events

    events = run(scenario)
    listed = events.of(ev.LibraryListed)[-1]
    row = _row(listed, "tiny-model")
    assert row.is_default and row.is_loaded and row.problem is None
    assert row.details["format"] == "gguf" and row.details["layers"] == 2
    assert row.fit is not None and row.fit.verdict == Verdict.RUNS_WELL and row.fit.device_kind == "cpu"
    assert row.fit.context_length == 1024, "the context it would load with: the app's, within the model's"
    assert listed.disk_total == tiny_model.stat().st_size
    catalog = events.of(ev.CatalogListed)[-1].rows
    assert {r.entry.id for r in catalog} == {e.id for e in load_catalog()}
    sized = [r for r in catalog if r.entry.size is not None]
    assert sized and all(r.fit is not None for r in sized), "a catalog model with a known size gets a verdict"


def test_a_models_own_settings_reach_the_load_and_new_chats_but_not_a_chats_own(started_service) -> None:
    async def scenario():
        async with started_service() as started:
            service, doors, events = started.service, started.doors, started.events
            doors.chat.send("Hello")
            await doors.chat.wait_idle()
            old_chat = doors.chat.conversation.id
            doors.chat.new_conversation()
            saved = await service.library.set_defaults("tiny-model", ModelDefaults(
                context_length=768, system_prompt="Be terse.", temperature=0.2))
            reloaded = engine_of(service).load_request.context_length
            new_chat = doors.chat.conversation_settings()
            await doors.chat.open_conversation(old_chat)
            own = doors.chat.conversation_settings()
            return events, saved, reloaded, new_chat, own

    events, saved, reloaded, (prompt, settings), (old_prompt, old_settings) = run(scenario)
    assert saved and reloaded == 768, "a load setting reloads the model that is loaded"
    assert (prompt, settings.temperature, settings.context_length) == ("Be terse.", 0.2, 768)
    assert (old_prompt, old_settings.temperature, old_settings.context_length) == ("", 0.0, 1024), \
        "a chat keeps its own settings"
    states = [e.state for e in events.of(ev.ModelStateChanged)]
    assert states[-2:] == [ModelState.LOADING, ModelState.READY]


def test_a_bad_setting_is_refused_in_words_and_nothing_is_saved(started_service) -> None:
    async def scenario():
        async with started_service(start="open") as started:
            service = started.service
            saved = await service.library.set_defaults("tiny-model", ModelDefaults(temperature=9.0))
            return started.events, saved, library_of(service).get("tiny-model")

    events, saved, model = run(scenario)
    assert not saved and model.defaults == ModelDefaults()
    assert "temperature must be a number from 0 to 5" in events.of(ev.Problem)[-1].text


def test_a_referenced_model_is_forgotten_not_deleted_and_a_missing_one_says_so(
        started_service, tiny_model: Path, tmp_path: Path) -> None:
    outside = tmp_path / "Meine Modelle" / "tiny copy.gguf"
    outside.parent.mkdir()
    shutil.copy(tiny_model, outside)

    async def scenario():
        async with started_service(install_model=False, start="open") as started:
            service, events = started.service, started.events
            model = await service.library.add(str(outside), reference=True)
            outside.rename(outside.with_suffix(".away"))  # the drive is unplugged
            await service.library.refresh()
            missing = _row(events.of(ev.LibraryListed)[-1], model.id)
            loaded = await service.library.load(model.id)
            outside.with_suffix(".away").rename(outside)
            await service.library.refresh()
            back = _row(events.of(ev.LibraryListed)[-1], model.id)
            removed = await service.library.remove(model.id)
            return events, model, missing, loaded, back, removed

    events, model, missing, loaded, back, removed = run(scenario)
    assert model.referenced and model.path == outside
    assert missing.model.missing and missing.fit is None and "Reconnect the drive" in (missing.problem or "")
    assert not loaded and "its file is not there" in events.of(ev.Problem)[0].text
    assert not back.model.missing and back.fit is not None
    assert removed and outside.exists(), "forgetting never deletes the user's file"
    assert all(r.model.id != model.id for r in events.of(ev.LibraryListed)[-1].rows)


def test_set_default_is_saved_for_the_next_start(started_service, tiny_model: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    shutil.copy(tiny_model, other)

    async def scenario():
        async with started_service(start="open") as started:
            model = await started.service.library.add(str(other), reference=True)
            return model, await started.service.library.set_default(model.id)

    model, chosen = run(scenario)
    assert chosen and SettingsFile(data_paths().settings_file).load().default_model == model.id


def test_a_downloaded_catalog_model_becomes_the_default_and_loads_when_there_was_none(
        started_service, server: TestServer, storage: TestServer, tiny_model: Path,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A catalog entry whose hash and size the catalog leaves to the server: every shipped GGUF
    # states both (the tiny model could not pass for one), so a copy of a shipped entry without them.
    entry = _unpinned_catalog(tmp_path, monkeypatch, "qwen2.5-coder-0.5b-instruct-q4_k_m")
    [file] = entry.files
    endpoint = hugging_face_repo(server, storage, entry.repo, {file.path: tiny_model.read_bytes()},
                                 revision=entry.revision)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)

    async def scenario():
        async with started_service(install_model=False, start="open") as started:
            service, doors, events = started.service, started.doors, started.events
            service.library.download(find_entry(load_catalog(), entry.id))
            await events.until(lambda: doors.model.model_state == ModelState.READY, 60, "the downloaded model to load")
            await events.until(lambda: any(r.installed_id for r in service.library.catalog_rows), 10,
                               "the refresh")
            return events, started

    events, started = run(scenario)
    states = [e.item.state for e in events.of(DownloadChanged)]
    assert states[0] == "queued" and states[-1] == "done"
    done = events.of(DownloadChanged)[-1].item
    assert started.doors.model.model.id == done.model_id
    assert SettingsFile(data_paths().settings_file).load().default_model == done.model_id
    row = next(r for r in started.service.library.catalog_rows if r.entry.id == entry.id)
    assert row.installed_id == done.model_id, "the catalog knows the model it became"
    assert dataclasses.replace(row, installed_id=None).installed_id is None


def test_look_up_lists_a_pasted_repository_and_download_unit_installs_the_pick(
        started_service, server: TestServer, storage: TestServer, tiny_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = hugging_face_repo(server, storage, "o/Tiny-GGUF", {"tiny-Q4_K_M.gguf": tiny_model.read_bytes(),
                                                                  "tiny-Q8_0.gguf": b"GGUF" + bytes(60)})
    monkeypatch.setenv("HF_ENDPOINT", endpoint)

    async def scenario():
        async with started_service(install_model=False, start="open") as started:
            service, doors, events = started.service, started.doors, started.events
            units = await service.library.look_up("o/Tiny-GGUF")
            missing = await service.library.look_up("o/Not-There")
            nonsense = await service.library.look_up("not a repository")
            service.library.download_unit(units[0])
            await events.until(lambda: doors.model.model_state == ModelState.READY, 60, "the downloaded model to load")
            return events, started, units, missing, nonsense

    events, started, units, missing, nonsense = run(scenario)
    assert [(u.title, u.format, u.size) for u in units] == [
        ("tiny-Q4_K_M", "gguf", tiny_model.stat().st_size), ("tiny-Q8_0", "gguf", 64)]
    assert missing == () and nonsense == ()
    problems = [e.text for e in events.of(ev.Problem)]
    assert len(problems) == 2
    assert "has no public model repository named o/Not-There" in problems[0]
    assert problems[1].startswith('"not a repository" is neither a Hugging Face repository')
    done = events.of(DownloadChanged)[-1].item
    assert done.state == "done" and started.doors.model.model.id == done.model_id
    assert started.doors.model.model.source == f"downloaded from {units[0].source}"
    assert started.doors.model.model.path.read_bytes() == tiny_model.read_bytes()
    assert not storage.requests(path=f"/blobs/{sha256_of(b'tiny-Q8_0.gguf')}"), "only the picked file is fetched"


def _unpinned_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_id: str) -> CatalogEntry:
    """The catalog, for this test, is one shipped entry without its files' SHA-256 and size."""
    import json

    from app.library import catalog

    raw = next(m for m in json.loads(catalog.CATALOG_FILE.read_text(encoding="utf-8"))["models"]
               if m["id"] == entry_id)
    raw["files"] = [{"path": f["path"]} for f in raw["files"]]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"version": catalog.CATALOG_VERSION, "models": [raw]}), encoding="utf-8")
    monkeypatch.setattr(catalog, "CATALOG_FILE", path)
    [entry] = load_catalog()
    assert entry.size is None and entry.format == "gguf"
    return entry


def test_the_starter_assembled_from_its_packages_is_the_catalog_entry_not_a_download_to_offer(tmp_path: Path) -> None:
    from app.library.catalog import load_catalog
    from app.library.installed import InstalledModel
    from app.library.starter import STARTER_ID, STARTER_SHA256
    from app.service.library.library_service import installed_as

    entry = next(e for e in load_catalog() if e.files[0].sha256 == STARTER_SHA256)
    starter = InstalledModel(STARTER_ID, "Starter", tmp_path / "starter.gguf", entry.files[0].size, STARTER_SHA256.upper(),
                             "starter package", 0.0, "gguf")
    other = dataclasses.replace(starter, id="other", sha256="0" * 64)
    assert installed_as(entry, [other, starter]) == STARTER_ID
    assert installed_as(entry, [other]) is None
    downloaded = dataclasses.replace(other, id="dl", source=f"https://huggingface.co/{entry.repo}/resolve/x/{entry.files[0].path}")
    assert installed_as(entry, [downloaded]) == "dl"
