"""``python -m runner``: see :mod:`runner.commands.main`."""

from runner.commands.main import entry

if __name__ == "__main__":
    entry()
