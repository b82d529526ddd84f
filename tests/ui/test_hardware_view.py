"""The hardware window over recorded machines: the form, the device rows, the reason, Copy report."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QLabel

from app.engine.protocol import Loaded
from app.service.library.hardware_overview import HardwareOverview, report_text
from app.ui.models.hardware_view import HardwareWindow
from app.ui.common.theme import apply_theme
from tests.hardware.machines import recorded_report

FELL_BACK = Loaded(request_id=1, model_path="/models/gemma.gguf", load_ms=10.0, device="CPU", context_length=1024,
                   threads=6, architecture="gemma3", chat_format="gemma",
                   placement_reason="CPU: 0.4 GB needed, 23.0 GB of RAM free.",
                   fallback_reasons=("NVIDIA GeForce RTX 4070: this llama.cpp was built without GPU support",))
ON_GPU = Loaded(request_id=1, model_path="/models/gemma.gguf", load_ms=10.0, device="GPU: Apple M2 Pro GPU",
                context_length=1024, threads=8, architecture="gemma3", chat_format="gemma",
                placement_reason="GPU: Apple M2 Pro GPU through Metal has room for all of it.")


def overview(machine: str, loaded: Loaded | None, problem: str | None = None) -> HardwareOverview:
    report = recorded_report(machine)
    threads = f"CPU threads: {loaded.threads}" if loaded else ""
    return HardwareOverview(report=report, loaded=loaded, model_name="Gemma 3 270M" if loaded else "",
                            placement_reason=loaded.placement_reason if loaded else "",
                            fallback_reasons=loaded.fallback_reasons if loaded else (), priority_problem=problem,
                            threads=threads, text=report_text(report, loaded, problem, threads))


def window(qtbot, data: HardwareOverview) -> HardwareWindow:
    shown = HardwareWindow(data)
    qtbot.addWidget(shown)
    shown.show()
    return shown


def rows(shown: HardwareWindow) -> list[list[str]]:
    table = shown.devices
    return [[table.topLevelItem(i).text(c) for c in range(table.columnCount())]
            for i in range(table.topLevelItemCount())]


def texts(shown: HardwareWindow) -> str:
    return "\n".join(label.text() for label in shown.findChildren(QLabel))


def test_each_gpu_of_a_recorded_desktop_is_a_row_with_what_runs_on_it(qtbot) -> None:
    shown = window(qtbot, overview("windows_desktop_rtx4070", FELL_BACK))
    assert [row[0] for row in rows(shown)] == ["NVIDIA GeForce RTX 4070\nNVIDIA, discrete GPU",
                                               "AMD Radeon(TM) Graphics\nAMD, integrated GPU"]
    nvidia = rows(shown)[0]
    assert nvidia[1] == "12.0 GB own\n16.0 GB shared" and nvidia[2].startswith("566.36")
    assert nvidia[3] == "llama.cpp (CUDA)\nONNX Runtime (DirectML)"
    # The form: the processor, its instruction sets, memory, runtimes, power.
    words = texts(shown)
    for expected in ("AMD Ryzen 7 7800X3D 8-Core Processor", "8 cores, 16 threads", "AVX512F",
                     "31.9 GB, 23.0 GB free", "0.3.36, for GGUF models", "DirectML, CPU",
                     "Windows ML needs Windows 11 24H2", "No battery: on mains power"):
        assert expected in words, expected
    # Every row shows whole: the window scrolls, never the table inside it.
    table = shown.devices
    last = table.topLevelItem(table.topLevelItemCount() - 1)
    assert 0 < table.visualItemRect(last).bottom() <= table.viewport().height()


def test_the_fall_back_is_highlighted_with_each_reason(qtbot) -> None:
    shown = window(qtbot, overview("windows_desktop_rtx4070", FELL_BACK, problem="Windows refused it."))
    panel = shown.placement
    assert panel.title.text() == "Gemma 3 270M runs on the CPU"
    assert panel.reason.text() == "Why: CPU: 0.4 GB needed, 23.0 GB of RAM free."
    assert "NVIDIA GeForce RTX 4070: this llama.cpp was built without GPU support" in panel.fallbacks.text()
    assert panel.fallbacks.isVisible() and "Priority: Windows refused it." in panel.details.text()
    # Amber, not the accent: a fall-back must look different from a model where it should be.
    assert panel.tint() != QGuiApplication.palette().color(QPalette.ColorRole.Highlight)
    nvidia = shown.devices.topLevelItem(0)
    assert nvidia.toolTip(0).endswith("this llama.cpp was built without GPU support")
    assert not shown.devices.topLevelItem(1).toolTip(0)  # the AMD GPU was not tried
    image = panel.grab().toImage()
    assert image.pixelColor(image.width() // 2, 2).red() > image.pixelColor(image.width() // 2, 2).blue()


def test_a_model_on_its_gpu_marks_that_row_and_says_why(qtbot) -> None:
    shown = window(qtbot, overview("macos_m2_pro", ON_GPU))
    assert shown.placement.title.text() == "Gemma 3 270M runs on the GPU: Apple M2 Pro GPU"
    assert shown.placement.reason.text().endswith("through Metal has room for all of it.")
    assert not shown.placement.fallbacks.isVisible()
    assert shown.placement.tint() == QGuiApplication.palette().color(QPalette.ColorRole.Highlight)
    gpu = shown.devices.topLevelItem(0)
    assert gpu.font(0).bold() and gpu.text(3) == "llama.cpp (Metal)"
    assert not shown.devices.topLevelItem(1).font(0).bold()  # the Neural Engine: not in use
    assert shown.devices.topLevelItem(1).text(3) == "nothing installed here"


def test_with_no_model_the_panel_says_so_and_npus_are_listed(qtbot) -> None:
    shown = window(qtbot, overview("windows_laptop_npu", None))
    assert shown.placement.title.text() == "No model loaded"
    assert not shown.placement.fallbacks.isVisible() and not shown.placement.details.isVisible()
    npu = rows(shown)[1]
    assert npu[0] == "Intel(R) AI Boost\nIntel, NPU" and npu[3] == "ONNX Runtime (OpenVINO)"


def test_copy_report_puts_the_text_on_the_clipboard(qtbot) -> None:
    data = overview("windows_desktop_rtx4070", FELL_BACK)
    shown = window(qtbot, data)
    QApplication.clipboard().clear()
    qtbot.mouseClick(shown.copy_button, Qt.MouseButton.LeftButton)
    assert QApplication.clipboard().text() == data.text
    assert "In use: CPU" in data.text and "Could not use NVIDIA GeForce RTX 4070" in data.text
    assert shown.copy_button.text() == "Copied"
    qtbot.waitUntil(lambda: shown.copy_button.text() == "&Copy report", timeout=3000)


def test_the_window_is_not_modal_and_follows_the_theme(qtbot) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    shown = window(qtbot, overview("macos_m2_pro", ON_GPU))
    assert not shown.isModal()
    try:
        apply_theme(app, "dark")
        dark = shown.placement.tint()
        apply_theme(app, "light")
        assert shown.placement.tint() != dark  # the accent of each theme
    finally:
        apply_theme(app, "light")
