"""``python -m runner.compare``: see :mod:`runner.commands.compare`."""

import sys

from runner.commands.compare import main

if __name__ == "__main__":
    sys.exit(main())
