"""The hardware window's overview: the text for Copy report, and the devices as rows."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

from app.engine.protocol import Loaded
from app.hardware.report import PowerInfo
from app.service.library.hardware_overview import computer_rows, device_rows, hardware_overview, power_text, runtime_rows
from app.service.models.threads import ThreadChoice
from tests.hardware.machines import recorded_report
from tests.helpers.scripted_engine import ScriptedEngine
from tests.service.conftest import run, session_of

LOADED = Loaded(request_id=1, model_path="/models/tiny.gguf", load_ms=10.0, device="CPU", context_length=1024,
                threads=6, architecture="llama", chat_format="chatml",
                placement_reason="CPU: llama.cpp here has no GPU backend.",
                fallback_reasons=("NVIDIA GeForce RTX 4070: this llama.cpp was built without GPU support",))


class _Client:
    """The two things the overview asks of an EngineClient."""

    def __init__(self, machine: str, loaded: Loaded | None) -> None:
        self.machine = machine
        self.loaded = loaded

    async def hardware_report(self):
        return recorded_report(self.machine)


def _session(machine: str, loaded: Loaded | None, *, problem: str | None = None,
             last: ThreadChoice | None = None) -> SimpleNamespace:
    return SimpleNamespace(client=_Client(machine, loaded), pace=SimpleNamespace(problem=problem),
                           threads=SimpleNamespace(last=last), model=None)


def _overview(session: SimpleNamespace):
    return asyncio.run(hardware_overview(session))  # type: ignore[arg-type]


def test_with_no_model_the_text_is_the_machine_alone() -> None:
    overview = _overview(_session("linux_vm", None))
    assert overview.loaded is None and overview.model_name == "" and overview.placement_reason == ""
    assert "In use" not in overview.text and overview.text.startswith("Kestrel doctor")


def test_the_fall_back_priority_and_threads_are_in_the_text_as_before() -> None:
    choice = ThreadChoice(5, "other programs keep 1 core busy")
    overview = _overview(_session("windows_desktop_rtx4070", LOADED, problem="Windows refused it.", last=choice))
    assert overview.text.endswith("\n\nIn use: CPU\nWhy: CPU: llama.cpp here has no GPU backend.\n"
                                  "Could not use NVIDIA GeForce RTX 4070: this llama.cpp was built without GPU "
                                  "support\nPriority: Windows refused it.\n"
                                  "CPU threads for the last answer: 5 (other programs keep 1 core busy)")
    assert overview.fallback_reasons == LOADED.fallback_reasons
    assert overview.priority_problem == "Windows refused it."
    assert overview.model_name == "tiny.gguf"


def test_before_the_first_answer_the_threads_loaded_with_are_said() -> None:
    overview = _overview(_session("macos_m2_pro", LOADED))
    assert overview.text.endswith("\nCPU threads: 6")
    assert overview.threads == "CPU threads: 6" and overview.priority_problem is None


def test_each_gpu_and_npu_is_a_row_with_what_can_run_on_it() -> None:
    rows = {row.name: row for row in device_rows(recorded_report("windows_desktop_rtx4070"))}
    nvidia = rows["NVIDIA GeForce RTX 4070"]
    assert nvidia.description == "NVIDIA, discrete GPU"
    assert nvidia.kind == "gpu" and nvidia.runs_with == ("llama.cpp (CUDA)", "ONNX Runtime (DirectML)")
    assert nvidia.memory == "12.0 GB own, 16.0 GB shared" and nvidia.driver.startswith("566.36")
    assert rows["AMD Radeon(TM) Graphics"].runs_with == ("ONNX Runtime (DirectML)",)

    npu = {row.name: row for row in device_rows(recorded_report("windows_laptop_npu"))}["Intel(R) AI Boost"]
    assert npu.kind == "npu" and npu.runs_with == ("ONNX Runtime (OpenVINO)",)
    # Apple's GPU is "Apple M2 Pro GPU" to the system and "Apple M2 Pro" to llama.cpp.
    mac = device_rows(recorded_report("macos_m2_pro"))
    assert mac[0].runs_with == ("llama.cpp (Metal)",) and mac[0].memory == "32.0 GB shared"


def test_the_form_rows_say_what_a_source_could_not_read() -> None:
    report = recorded_report("windows_laptop_npu")
    computer = dict(computer_rows(report))
    assert computer["Cores"] == "16 cores, 22 threads (AMD64)" and computer["Memory"] == "31.6 GB, 18.0 GB free"
    runtimes = dict(runtime_rows(report))
    assert runtimes["GPU offload"] == "no, this build runs models on the CPU only"
    assert runtimes["Windows ML"] == "Windows ML registered OpenVINOExecutionProvider."
    broken = dataclasses.replace(report, os=None, cpu=None, ram=None, llama=None, onnxruntime=None)
    assert computer_rows(broken) == [("System", "could not be read")]
    assert dict(runtime_rows(broken)) == {"llama.cpp": "not found", "ONNX Runtime": "not found"}
    assert "Windows ML" not in dict(runtime_rows(recorded_report("macos_m2_pro")))
    saver = PowerInfo(has_battery=True, on_battery=True, battery_percent=40, battery_saver=True)
    assert power_text(saver) == "On battery, 40%; battery saver is on, so the most efficient device is preferred"
    assert power_text(None) == "unknown"


def test_a_real_service_gives_its_overview_for_copy_report(started_service) -> None:
    async def scenario():
        async with started_service(engine=ScriptedEngine(machine="windows_desktop_rtx4070")) as started:
            overview = await hardware_overview(session_of(started.service))
            return overview, overview.text, started.doors.model.model.title

    overview, text, title = run(scenario)
    assert "In use: CPU" in text and "Could not use NVIDIA GeForce RTX 4070" in text
    assert overview.loaded is not None and overview.loaded.device == "CPU"
    assert overview.fallback_reasons and overview.fallback_reasons[0].startswith("NVIDIA GeForce RTX 4070")
    assert overview.model_name == title  # the library's name for it, not the file's


def test_onnx_runtimes_remote_provider_is_not_listed_among_this_machines_devices() -> None:
    # Recorded from the stock Linux onnxruntime wheel: it lists AzureExecutionProvider (remote
    # inference) beside CPU. A person who chose an offline app is shown the device providers only.
    report = recorded_report("linux_vm")
    assert report.onnxruntime is not None and "AzureExecutionProvider" in report.onnxruntime.providers
    assert dict(runtime_rows(report))["Execution providers"] == "CPU"
    from app.hardware.summary import format_report

    text = format_report(report)
    assert "Azure" not in text and "providers CPUExecutionProvider" in text
