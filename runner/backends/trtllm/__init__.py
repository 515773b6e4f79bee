"""The TensorRT-LLM backends: the engine builder (1.0-1.2.x) and the PyTorch backend."""
