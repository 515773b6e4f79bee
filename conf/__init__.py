"""The Hydra config tree (a package so a console script can find it)."""
