"""Speech: the speech-to-text models from their packages, transcription in a child process, voice activity."""
