"""Reference scores in TensorRT-LLM's YAML schema, and the per-sample scores recorded with them."""
