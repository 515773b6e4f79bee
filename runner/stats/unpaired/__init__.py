"""TensorRT-LLM's unpaired z-test against a registered reference: sigma sqrt(1/n + 1/n_ref), exactly upstream's
sqrt(2 sigma^2 / n) when the reference was measured on the run's n or its n is unknown."""
