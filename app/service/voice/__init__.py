"""The service's voice wing: dictation's owner (the microphone, voice activity and the transcription child)."""
