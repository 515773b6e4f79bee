"""Nothing computed twice: file fingerprints, the generation cache, the engine cache, file locks."""
