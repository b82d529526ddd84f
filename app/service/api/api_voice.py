"""The API server's speech: the transcriptions and speeches owners that POST /v1/audio/transcriptions and
/v1/audio/speech share, held by the service rather than by the routes, so that a Remove in Models → Speech can ask
their children to let go of a model or voice, and shutdown ends them (a server stopped and started again keeps them).
Each is made on its first use: the speech code (and NumPy) is not loaded for a front end that never speaks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.voice.synthesis.speeches import Speeches
    from app.voice.transcriptions import Transcriptions


class ApiVoice:
    """One Transcriptions and one Speeches for every server the service runs (the API's, the sharing link's)."""

    def __init__(self, speech_folder: Path) -> None:
        self._speech_folder = speech_folder
        self._transcriptions: Transcriptions | None = None
        self._speeches: Speeches | None = None

    @property
    def transcriptions(self) -> Transcriptions:
        if self._transcriptions is None:
            from app.voice.transcriptions import Transcriptions
            self._transcriptions = Transcriptions(self._speech_folder)
        return self._transcriptions

    @property
    def speeches(self) -> Speeches:
        if self._speeches is None:
            from app.voice.synthesis.speeches import Speeches
            self._speeches = Speeches(self._speech_folder)
        return self._speeches

    async def release(self, speech_id: str) -> bool:
        """Their children let go of a speech model or voice (False: a request is heard or spoken now)."""
        return ((self._transcriptions is None or await self._transcriptions.release(speech_id))
                and (self._speeches is None or await self._speeches.release(speech_id)))

    async def close(self) -> None:
        if self._transcriptions is not None:
            await self._transcriptions.close()
        if self._speeches is not None:
            await self._speeches.close()
