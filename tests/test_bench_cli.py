"""`unilab-bench`: the dispatcher and each benchmark's usage line."""

import pytest

from unilab.cli.bench import BENCHMARKS, main


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_benchmarks_help_and_errors_name_the_subcommand(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: unilab-bench {name} ")
    with pytest.raises(SystemExit) as done:
        main([name, "--no-such-option"])
    assert done.value.code == 2
    assert f"unilab-bench {name}: error: unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_an_unknown_benchmark_lists_the_known_ones(capsys):
    assert main(["no-such-bench"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'no-such-bench'" in err and all(name in err for name in BENCHMARKS)
