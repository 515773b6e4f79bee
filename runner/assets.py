"""``python -m runner.assets``: see :mod:`runner.commands.assets`."""

import sys

from runner.commands.assets import main

if __name__ == "__main__":
    sys.exit(main())
