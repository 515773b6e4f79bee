"""runner: a Hydra-configured accuracy-regression runner for large language models.

The package is split so that importing it is cheap: heavy libraries (torch, transformers,
mlflow, datasets) are imported only inside the functions that need them.
"""

__version__ = "0.1.0"
