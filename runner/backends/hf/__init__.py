"""The transformers backend (CPU or CUDA) and its schema-constrained decoding."""
