"""ONNX model folders through ONNX Runtime GenAI."""
