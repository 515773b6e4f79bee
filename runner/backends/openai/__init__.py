"""The ``openai`` backend: a model served behind an OpenAI-compatible HTTP API (trtllm-serve, vLLM,
SGLang, NIM, ``transformers serve``), reached as it is or started per job (:mod:`.server`)."""
