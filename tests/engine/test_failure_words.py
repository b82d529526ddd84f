"""The window's words for each failure: the sentences users saw before the facts crossed instead."""

from __future__ import annotations

import typing

import pytest

from app.core.settings import DevicePreference
from app.engine import failures as f
from app.engine.capabilities import Capability
from app.engine.failure_words import WINDOW, describe
from app.library.servers.faults import ServerFacts, ServerTrouble

# (facts, what the window says), as the engine worded them before issue 22.
SAID = [
    (f.NoGpuBuild(), "this copy of llama.cpp was built without GPU support, so it cannot use the GPU; "
                     "install Kestrel's GPU build to use it."),
    (f.ProviderMissing("TPUExecutionProvider"), "Kestrel cannot drive TPUExecutionProvider yet."),
    (f.ProviderMissing("QNNExecutionProvider", "driver too old"),
     "QNNExecutionProvider could not be set up (driver too old); update the device's driver, or choose "
     "another device."),
    (f.GgufRefused("odd.gguf", "xyzzy", "unknown model architecture: 'xyzzy'"),
     "odd.gguf is a GGUF file (architecture 'xyzzy') but llama.cpp could not load it: unknown model "
     "architecture: 'xyzzy'. The file may be damaged, or made for a newer version of llama.cpp: download it "
     "again, or update Kestrel."),
    (f.BadTemplate("it has an error on its line 1 (unexpected end)"),
     "The chat template set in this model's settings cannot be used: it has an error on its line 1 "
     "(unexpected end). Fix it in the model's settings, or clear it to use the template in the model file."),
    (f.NoDeviceWorked((f.FailedOn("RTX 4070", f.NoGpuBuild()),
                       f.FailedOn("Ryzen 7", f.GgufRefused("m.gguf", "llama", "bad tensor")))),
     "The model could not be loaded on any device. RTX 4070: this copy of llama.cpp was built without GPU "
     "support, so it cannot use the GPU; install Kestrel's GPU build to use it. Ryzen 7: m.gguf is a GGUF "
     "file (architecture 'llama') but llama.cpp could not load it: bad tensor. The file may be damaged, or "
     "made for a newer version of llama.cpp: download it again, or update Kestrel."),
    (f.DeviceRefused(DevicePreference.NPU, "No NPU here."), "No NPU here."),
    (f.BadModelFile("truncated", "m.gguf is cut short."), "m.gguf is cut short."),
    (f.NoModel(), "No model is loaded. Choose a model first."),
    (f.NoToolUse("tiny.gguf"),
     "tiny.gguf cannot call tools: its chat template takes none. Choose a model made for tool use (Qwen 2.5 or 3, "
     "Llama 3.1 or later, Mistral), or leave the tools out."),
    (f.Unsupported("phi-onnx", "ONNX Runtime GenAI", Capability.GRAMMARS, ("llama.cpp",)),
     "phi-onnx runs on ONNX Runtime GenAI, which takes no grammars. Leave them out, or choose a model that runs on "
     "llama.cpp."),
    (f.Unsupported("echo://Polly", "Echo", Capability.TOOLS),
     "echo://Polly runs on Echo, which takes no tools. Leave them out."),
    (f.NoBackend("ollama://studio-pc/qwen3"),
     "No backend in Kestrel loads ollama://studio-pc/qwen3. Check the address, or choose a model file (a .gguf "
     "file or an ONNX Runtime GenAI folder)."),
    (f.ServerFailed(ServerFacts("studio-pc", "http://192.168.1.20:11434", ServerTrouble.DOWN,
                                detail="nothing answered within 5 s")),
     "studio-pc (http://192.168.1.20:11434) did not answer: nothing answered within 5 s. Is it on, and is its "
     "server running? Check the address, then try again."),
    (f.BadShape(f.ShapePart.TOOL_CHOICE, 'there is no tool named "x" among the tools given (a, b)'),
     'The request\'s tool choice cannot be used: there is no tool named "x" among the tools given (a, b). Fix it '
     "and ask again."),
    (f.NoVision("tiny.gguf"),
     "tiny.gguf cannot read images: no vision projector (an mmproj file) is paired with it. Send the message "
     "without the images, or choose a model that reads images."),
    (f.NoVision("tiny.gguf", "The vision projector mmproj-x.gguf could not be loaded: the file is not there. "
                             "Pair the model with its projector again."),
     "tiny.gguf cannot read images. The vision projector mmproj-x.gguf could not be loaded: the file is not "
     "there. Pair the model with its projector again. Send the message without the images, or choose a model "
     "that reads images."),
    (f.BadImage(f.ImageTrouble.NOT_AN_IMAGE, 2, 1),
     "Image 2 of message 3 could not be read as a picture. Attach it again as a PNG or JPEG image."),
    (f.BadImage(f.ImageTrouble.TOO_BIG, 0, 0, 25_000_000, 20_000_000),
     "Image 1 of message 1 is 25.0 MB; the most an image may be is 20.0 MB. Attach a smaller image."),
    (f.BadImage(f.ImageTrouble.TOO_MANY, count=17, limit=16),
     "The conversation holds 17 images and a model is given at most 16 at once. Start a new chat, or send "
     "fewer images."),
    (f.BadImage(f.ImageTrouble.LEFT_OUT),
     "An image did not reach the model: its chat template leaves images out of the prompt. Choose another "
     "chat template in the model's settings, or send the message without images."),
    (f.UnknownRequest("Bogus"), "Unknown request Bogus."),
    (f.OtherVersion(7), "The engine is from another version of Kestrel. Reinstall Kestrel."),
    (f.EngineBug("ValueError: boom", "Traceback ..."), "ValueError: boom"),
    (f.EngineStopped(-9, f.During.GENERATE),
     "The engine stopped unexpectedly (exit code -9). What was already written is kept; the next message "
     "starts a new engine."),
    (f.EngineStopped(None, f.During.IDLE),
     "The engine stopped unexpectedly. Your chats are kept; the next message starts a new engine."),
    (f.EngineStopped(-11, f.During.LOAD),
     "The engine stopped while loading the model (exit code -11). The file may be damaged or too big for "
     "this machine; try another model."),
    (f.EngineStopped(-9, f.During.GENERATE, f.Hang.IGNORED_STOP),
     "The engine did not respond to Stop, so Kestrel ended it and is starting it again. What was already "
     "written is kept."),
    (f.EngineStopped(-9, f.During.GENERATE, f.Hang.SILENT, 31.4),
     "The engine stopped responding (nothing for 31 s), so Kestrel ended it. What was already written is "
     "kept; the next message starts a new engine."),
]


@pytest.mark.parametrize(("failure", "words"), SAID)
def test_the_window_says_what_it_said_before(failure: f.Failure, words: str) -> None:
    assert describe(failure, WINDOW) == words


def test_every_kind_of_failure_has_words() -> None:
    worded = {type(failure) for failure, _ in SAID}
    others = {f.NotEnoughMemory, f.OnnxRefused, f.PromptTooLong}  # worded in tests/cli/test_cli_wording.py
    assert worded | others == set(typing.get_args(f.Failure))
