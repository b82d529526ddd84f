"""Whether Windows' privacy settings refused the microphone, read from PortAudio's error and the consent store.

Windows 10 and 11 let the person turn microphone access off for desktop apps (Settings → Privacy &
security → Microphone). PortAudio does not say so: its error is a host error whose code depends on the
host API. The codes below are the ones people recorded when that setting was off:
- MME (sounddevice's default on Windows): "Error opening InputStream: Unanticipated host error
  [PaErrorCode -9999]: 'Undefined external error.' [MME error 1]", python-sounddevice issue #233, fixed
  there by the privacy setting (PortAudio issue #360 reports the same from the same setting).
- WASAPI: IAudioClient::Initialize fails with E_ACCESSDENIED, 0x80070005 (-2147024891 as PortAudio
  prints it), FlexASIO issues #61 and #133 and fmedia issue #71, each fixed by the privacy setting.
MME's code 1 (MMSYSERR_ERROR) has other causes, so on Windows the consent store decides when it can be
read: HKCU\\...\\CapabilityAccessManager\\ConsentStore\\microphone (and its NonPackaged key, desktop
apps) holds Value = "Deny" when access is off.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_HOST_ERROR = re.compile(r"\[(?P<api>[^\]]+) error (?P<code>-?\d+)\]\s*$")
_E_ACCESSDENIED = -2147024891  # 0x80070005 as a signed 32-bit value
_MMSYSERR_ERROR = 1
_CONSENT_KEY = r"Software\Microsoft\Windows\CurrentVersion\CapabilityAccessManager\ConsentStore\microphone"


def refused_by_privacy(error_text: str, platform: str, consent_denied: bool | None = None) -> bool:
    """Whether a stream-opening error on this platform is Windows' privacy setting refusing the microphone.
    consent_denied: what the consent store says (None: read it here, on Windows; unknown elsewhere)."""
    if not platform.startswith("win"):
        return False
    host = host_error(error_text)
    if host is None:
        return False
    api, code = host
    if "WASAPI" in api and code == _E_ACCESSDENIED:
        return True
    if api == "MME" and code == _MMSYSERR_ERROR:
        denied = windows_consent_denied() if consent_denied is None else consent_denied
        return denied is not False  # unknown: the recorded cause is the likeliest, and its fix is harmless
    return False


def host_error(error_text: str) -> tuple[str, int] | None:
    """The host API and its error code at the end of PortAudio's words ("... [MME error 1]"), if any."""
    found = _HOST_ERROR.search(error_text)
    return (found.group("api"), int(found.group("code"))) if found else None


def windows_consent_denied() -> bool | None:
    """True when the consent store says microphone access is off (for all apps or for desktop apps); None
    when it cannot be read (not Windows, or no such key)."""
    try:
        winreg: Any = importlib.import_module("winreg")
    except ImportError:
        return None
    found = False
    for key in (_CONSENT_KEY, _CONSENT_KEY + r"\NonPackaged"):
        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, key) as opened:
                value, _ = winreg.QueryValueEx(opened, "Value")
        except OSError:
            continue
        found = True
        if str(value).lower() == "deny":
            return True
    return False if found else None
