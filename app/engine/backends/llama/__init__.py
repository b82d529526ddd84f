"""GGUF models through llama.cpp (llama-cpp-python): the backend, its prompt tokens, images, saved states and grammars."""
