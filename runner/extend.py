"""``python -m runner.extend``: see :mod:`runner.commands.extend`."""

import sys

from runner.commands.extend import main

if __name__ == "__main__":
    sys.exit(main())
