"""env.step phases of the G1 task (ms and cores) vs raw pool steps/s; see `--help`."""

import sys

from unilab.bench.env_step_phase_cpu import main

if __name__ == "__main__":
    sys.exit(main())
