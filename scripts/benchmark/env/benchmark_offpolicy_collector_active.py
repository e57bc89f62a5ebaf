"""Collector-only steps/s with a stub policy vs raw env steps/s; see `--help`."""

import sys

from unilab.cli.bench import main

if __name__ == "__main__":  # as `unilab-bench collector`
    sys.exit(main(["collector", *sys.argv[1:]]))
