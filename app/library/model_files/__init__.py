"""What a model's files say, read without loading it: GGUF headers and their tensor types, ONNX folders, a model's purpose."""
