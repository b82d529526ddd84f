"""Text to speech, offline: Piper voices on ONNX Runtime in a child process, phonemes without eSpeak."""
