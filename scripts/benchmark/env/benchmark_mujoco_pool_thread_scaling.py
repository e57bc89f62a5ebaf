"""Physics steps/s of unilab's BatchEnvPool by thread count; see `--help`."""

from unilab.bench.pool_thread_scaling import main

if __name__ == "__main__":
    main()
