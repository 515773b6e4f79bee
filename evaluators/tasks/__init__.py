"""One module per task: its config dataclass, its samples, requests and scoring."""
