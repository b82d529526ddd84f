# PyInstaller runtime hook (build.spec): runs first in every process of the frozen app, the transcription child too.
#
# faster-whisper imports two packages at the top of its modules that Kestrel never has it use, and the frozen
# app leaves both out:
# - PyAV (faster_whisper/audio.py), for decoding files: Kestrel reads WAV and raw PCM itself (app/voice/audio.py)
#   and hands the transcriber samples; PyAV's wheels bundle FFmpeg built with the GPL's x264 and x265, which an
#   Apache-2.0 app does not carry. app/voice/audio.py sees the stand-in has no `open` and says the app reads WAV.
# - huggingface_hub (faster_whisper/utils.py), for downloading models: Kestrel's speech models come from
#   packages, checked by SHA-256, and the app has no code that downloads from the hub at all.
# An empty module answers each import, only where the real one is not there.
import importlib.util
import sys
import types

for _name in ("av", "huggingface_hub"):
    if _name not in sys.modules and importlib.util.find_spec(_name) is None:
        sys.modules[_name] = types.ModuleType(_name)
