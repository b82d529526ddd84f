"""The sentences a failure's facts make, with what to do in each front end's own words.

The facts cross the process boundary; the words do not. Most of a sentence is the same
everywhere, but what the user can do differs: the window names its settings, the CLI its
flags. So describe() takes the front end's Advice, and WINDOW is the window's (also used
for Loaded.fallback_reasons, which the engine still sends as text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from app.core.units import human_size
from app.engine.capabilities import Capability
from app.engine.failures import (
    BadImage, BadModelFile, BadShape, BadTemplate, DeviceRefused, During, EngineBug, EngineStopped, Failure,
    GgufRefused, Hang, ImageTrouble, NoBackend, NoDeviceWorked, NoGpuBuild, NoModel, NoToolUse, NotEnoughMemory,
    NoVision, OnnxRefused, OnnxTrouble, OtherVersion, PromptTooLong, ProviderMissing, ServerFailed, UnknownRequest,
    Unsupported,
)
from app.library.servers.faults import fault_words


@dataclass(frozen=True)
class Advice:
    """What to do, where a front end says it its own way; each is put in a sentence as is."""

    other_device: str  # after "cannot run models on the GPU; "
    lower_context: str  # between "Close other programs, " and ", or choose a smaller model"
    prompt_too_long: str  # a whole sentence after "The prompt is ... the context holds N."


WINDOW = Advice(
    other_device="choose another device in the settings, or CPU",
    lower_context="lower the context length",
    prompt_too_long="Shorten the message or raise the context length in the settings.",
)


def describe(failure: Failure, advice: Advice) -> str:
    """The failure in plain words that end with what to do."""
    match failure:
        case BadModelFile(reason=reason) | DeviceRefused(reason=reason):
            return reason
        case NoBackend():
            return (f"No backend in Kestrel loads {failure.location}. Check the address, or choose a model file "
                    "(a .gguf file or an ONNX Runtime GenAI folder).")
        case ServerFailed():
            return fault_words(failure.facts)
        case NotEnoughMemory():
            return (f"{failure.name} needs about {human_size(failure.needed)} of memory with a context of "
                    f"{failure.context_length:,} tokens, and {human_size(failure.available)} is free. Close other "
                    f"programs, {advice.lower_context}, or choose a smaller model.")
        case GgufRefused():
            return (f"{failure.name} is a GGUF file (architecture '{failure.architecture}') but llama.cpp "
                    f"could not load it: {failure.reason}. The file may be damaged, or made for a newer version "
                    "of llama.cpp: download it again, or update Kestrel.")
        case OnnxRefused():
            return (f'"{failure.name}" is an ONNX model folder (model type "{failure.model_type}") but '
                    f"ONNX Runtime GenAI could not load it on {failure.where}: {failure.reason}. "
                    + _onnx_advice(failure, advice))
        case NoGpuBuild():
            return ("this copy of llama.cpp was built without GPU support, so it cannot use the GPU; "
                    "install Kestrel's GPU build to use it.")
        case ProviderMissing(reason=""):
            return f"Kestrel cannot drive {failure.provider} yet."
        case ProviderMissing():
            return (f"{failure.provider} could not be set up ({failure.reason}); update the device's driver, "
                    "or choose another device.")
        case BadTemplate():
            return (f"The chat template set in this model's settings cannot be used: {failure.why}. Fix it in "
                    "the model's settings, or clear it to use the template in the model file.")
        case NoDeviceWorked():
            return "The model could not be loaded on any device. " + " ".join(
                f"{attempt.device}: {describe(attempt.failure, advice)}" for attempt in failure.attempts)
        case PromptTooLong():
            return (f"The prompt is {failure.prompt_tokens:,} tokens but the context holds "
                    f"{failure.context_length:,}. {advice.prompt_too_long}")
        case NoToolUse():
            return (f"{failure.name} cannot call tools: its chat template takes none. Choose a model made for "
                    "tool use (Qwen 2.5 or 3, Llama 3.1 or later, Mistral), or leave the tools out.")
        case Unsupported():
            return _unsupported(failure)
        case BadShape():
            return f"The request's {failure.part} cannot be used: {failure.reason}. Fix it and ask again."
        case NoVision():
            why = (f" {failure.problem.rstrip('.')}." if failure.problem
                   else ": no vision projector (an mmproj file) is paired with it.")
            return (f"{failure.name} cannot read images{'.' if failure.problem else ''}{why} Send the message "
                    "without the images, or choose a model that reads images.")
        case BadImage():
            return _bad_image(failure)
        case NoModel():
            return "No model is loaded. Choose a model first."
        case UnknownRequest():
            return f"Unknown request {failure.name}."
        case OtherVersion():
            return "The engine is from another version of Kestrel. Reinstall Kestrel."
        case EngineBug():
            return failure.what
        case EngineStopped():
            return _stopped(failure)
        case _:
            assert_never(failure)


def _unsupported(failure: Unsupported) -> str:
    others = f", or choose a model that runs on {' or '.join(failure.others)}" if failure.others else ""
    # A setting, not a part one leaves out of a request: what to set it to.
    remedy = "Set min-p to 0 (off)" if failure.capability == Capability.MIN_P else "Leave them out"
    return f"{failure.name} runs on {failure.backend}, which takes no {failure.capability}. {remedy}{others}."


def _onnx_advice(failure: OnnxRefused, advice: Advice) -> str:
    match failure.trouble:
        case OnnxTrouble.MISSING_WEIGHTS:
            return ("Part of the model's weights is missing or incomplete (the .data file beside "
                    f"{failure.decoder_file}). Download the model again.")
        case OnnxTrouble.DEVICE:
            return f"This computer or this Kestrel cannot run models on {failure.where}; {advice.other_device}."
        case OnnxTrouble.MODEL:
            return ("The model may be damaged, or made for a newer ONNX Runtime GenAI: download "
                    "it again, or update Kestrel.")
        case _:
            assert_never(failure.trouble)


def _bad_image(failure: BadImage) -> str:
    which = f"Image {failure.image + 1} of message {failure.message + 1}"
    match failure.trouble:
        case ImageTrouble.NOT_AN_IMAGE:
            return f"{which} could not be read as a picture. Attach it again as a PNG or JPEG image."
        case ImageTrouble.TOO_BIG:
            return (f"{which} is {human_size(failure.count)}; the most an image may be is "
                    f"{human_size(failure.limit)}. Attach a smaller image.")
        case ImageTrouble.TOO_MANY:
            return (f"The conversation holds {failure.count} images and a model is given at most "
                    f"{failure.limit} at once. Start a new chat, or send fewer images.")
        case ImageTrouble.LEFT_OUT:
            return ("An image did not reach the model: its chat template leaves images out of the prompt. "
                    "Choose another chat template in the model's settings, or send the message without images.")
        case _:
            assert_never(failure.trouble)


def _stopped(failure: EngineStopped) -> str:
    kept = "Your chats are kept" if failure.during == During.IDLE else "What was already written is kept"
    if failure.hang == Hang.IGNORED_STOP:
        return f"The engine did not respond to Stop, so Kestrel ended it and is starting it again. {kept}."
    if failure.hang == Hang.SILENT:
        return (f"The engine stopped responding (nothing for {failure.silent_s:.0f} s), so Kestrel ended it. "
                f"{kept}; the next message starts a new engine.")
    code = f" (exit code {failure.exit_code})" if failure.exit_code is not None else ""
    if failure.during == During.LOAD:
        return (f"The engine stopped while loading the model{code}. The file may be damaged "
                "or too big for this machine; try another model.")
    return f"The engine stopped unexpectedly{code}. {kept}; the next message starts a new engine."
