"""``python -m runner.doctor``: see :mod:`runner.commands.doctor`."""

import sys

from runner.commands.doctor import main

if __name__ == "__main__":
    sys.exit(main())
