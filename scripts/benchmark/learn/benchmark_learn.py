"""Fixed-budget G1 tracking run, then unilab-eval on its final checkpoint; see `--help`."""

import sys

from unilab.bench.learn import main

if __name__ == "__main__":
    sys.exit(main())
