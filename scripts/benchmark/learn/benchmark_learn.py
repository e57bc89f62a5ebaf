"""Fixed-budget training of a task (`--task`), then unilab-eval on its final checkpoint; see `--help`."""

import sys

from unilab.cli.bench import main

if __name__ == "__main__":  # as `unilab-bench learn`
    sys.exit(main(["learn", *sys.argv[1:]]))
