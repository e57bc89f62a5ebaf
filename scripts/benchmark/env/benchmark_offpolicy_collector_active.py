"""Collector-only steps/s with a stub policy vs raw env steps/s; see `--help`."""

from unilab.bench.offpolicy_collector_active import main

if __name__ == "__main__":
    main()
