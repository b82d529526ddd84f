"""The device in use, its fall-back reason, the hardware panel and the device setting."""

from __future__ import annotations

import dataclasses
import functools

from app.service.library.hardware_overview import hardware_overview
from tests.hardware.machines import recorded_report
from tests.ui.conftest import choose_in_settings, idle, run, service_of, until


def test_status_bar_shows_the_fall_back_and_why(make_window, loop) -> None:
    window = make_window(hardware=functools.partial(recorded_report, "windows_desktop_rtx4070"))
    text = window.device_label.text()
    assert text.startswith("CPU (fell back: NVIDIA GeForce RTX 4070: ")
    assert "built without GPU support" in window.device_label.toolTip()
    assert window.doors.chat.send("Hello")
    run(loop, until(lambda: idle(window)() and window.adapter.messages.rowCount() == 2
                    and window.adapter.messages.messages()[-1].stats))
    assert window.adapter.messages.messages()[-1].stats.device == "CPU"


def test_hardware_window_shows_the_report_and_the_choice(make_window, loop) -> None:
    window = make_window(hardware=functools.partial(recorded_report, "windows_desktop_rtx4070"))
    window.show_hardware()
    run(loop, until(lambda: getattr(window, "hardware_window", None) is not None))
    shown = window.hardware_window
    assert shown.placement.title.text().endswith("runs on the CPU")
    assert shown.placement.fallbacks.text().startswith("Tried first, and could not use:\n•  NVIDIA GeForce RTX 4070")
    assert shown.devices.topLevelItem(0).text(0).startswith("NVIDIA GeForce RTX 4070")
    text = shown.overview.text
    assert "NVIDIA GeForce RTX 4070" in text and "RAM" in text
    assert "In use: CPU" in text and "Could not use NVIDIA GeForce RTX 4070" in text
    assert text == run(loop, hardware_overview(service_of(window).session)).text
    shown.close()


def test_choosing_a_device_the_machine_lacks_says_so_and_cpu_recovers(make_window, loop, monkeypatch) -> None:
    window = make_window(hardware=functools.partial(recorded_report, "linux_vm"))
    service, doors = service_of(window), window.doors

    choose_in_settings(window, monkeypatch, device="gpu")
    run(loop, until(lambda: doors.model.model_state.value == "failed"))
    assert window.banner.isVisible() and "GPU" in window.banner.text()
    assert '"device_preference": "gpu"' in service._settings_path.read_text()
    choose_in_settings(window, monkeypatch, device="cpu")
    run(loop, until(lambda: doors.model.model_state.value == "ready"))
    assert window.device_label.text() == "CPU"
    assert dataclasses.asdict(doors.settings.settings)["device_preference"] == "cpu"


def test_an_onnx_model_folder_imported_in_the_window_answers(make_window, loop) -> None:
    from pathlib import Path

    onnx = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-onnx"
    window = make_window()
    run(loop, service_of(window).library.add(str(onnx), reference=False, load=True))
    assert window.doors.model.model_state.value == "ready"
    assert window.device_label.text() == "CPU (ONNX Runtime)"
    assert window.doors.chat.send("Hello")
    run(loop, until(lambda: idle(window)() and window.adapter.messages.rowCount() == 2
                    and window.adapter.messages.messages()[-1].stats))
    answer = window.adapter.messages.messages()[-1]
    assert answer.state.value == "complete" and answer.stats.device == "CPU (ONNX Runtime)"
