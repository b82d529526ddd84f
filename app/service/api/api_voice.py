"""The API server's speech: the transcriptions and speeches owners that POST /v1/audio/transcriptions and
/v1/audio/speech share, held by the service rather than by the routes, so that a Remove in Models → Speech can ask
their children to let go of a model or voice, and shutdown ends them (a server stopped and started again keeps them)."""

from __future__ import annotations

from pathlib import Path

from app.voice.synthesis.speeches import Speeches
from app.voice.transcriptions import Transcriptions


class ApiVoice:
    """One Transcriptions and one Speeches for every server the service runs (the API's, the sharing link's)."""

    def __init__(self, speech_folder: Path) -> None:
        self.transcriptions = Transcriptions(speech_folder)
        self.speeches = Speeches(speech_folder)

    async def release(self, speech_id: str) -> bool:
        """Their children let go of a speech model or voice (False: a request is heard or spoken now)."""
        return await self.transcriptions.release(speech_id) and await self.speeches.release(speech_id)

    async def close(self) -> None:
        await self.transcriptions.close()
        await self.speeches.close()
