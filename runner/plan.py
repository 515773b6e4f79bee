"""``python -m runner.plan``: see :mod:`runner.commands.plan`."""

import sys

from runner.commands.plan import main

if __name__ == "__main__":
    sys.exit(main())
