"""env.step phases of a task (`--task`; ms and cores) vs raw pool steps/s; see `--help`."""

import sys

from unilab.cli.bench import main

if __name__ == "__main__":  # as `unilab-bench env-phases`
    sys.exit(main(["env-phases", *sys.argv[1:]]))
