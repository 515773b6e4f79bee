"""Config schemas (dataclasses) and their registration in Hydra's ConfigStore."""
