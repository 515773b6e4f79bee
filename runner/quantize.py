"""``python -m runner.quantize``: see :mod:`runner.commands.quantize`."""

from runner.commands.quantize import entry

if __name__ == "__main__":
    entry()
