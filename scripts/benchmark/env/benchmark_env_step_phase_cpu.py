"""env.step phases of the G1 task (ms and cores) vs raw pool steps/s; see `--help`."""

import sys

from unilab.cli.bench import main

if __name__ == "__main__":  # as `unilab-bench env-phases`
    sys.exit(main(["env-phases", *sys.argv[1:]]))
