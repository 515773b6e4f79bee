"""Quantization recipes and ModelOpt calibration, shared by the backends and python -m runner.quantize."""
