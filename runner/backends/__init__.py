"""Backends answer requests in bulk: strings in, results out, in order."""
