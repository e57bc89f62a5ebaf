"""Physics steps/s of unilab's BatchEnvPool by thread count; see `--help`."""

import sys

from unilab.cli.bench import main

if __name__ == "__main__":  # as `unilab-bench pool-threads`
    sys.exit(main(["pool-threads", *sys.argv[1:]]))
