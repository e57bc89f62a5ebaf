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


def test_recipes_and_task_lists_come_from_the_registry(capsys):
    from unilab.bench import learner
    from unilab.tasks import registry

    parser = learner.build_parser()
    for task in registry.TASKS:  # every task's GPU and CPU recipe is a --algo of the learner bench
        for algo in registry.recipes(task):
            assert parser.parse_args(["--algo", algo]).algo == algo
    with pytest.raises(SystemExit):
        main(["learn", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(f"{task} -> {registry.recipes(task)[1]}" in text for task in registry.TASKS)
    assert all(task in text for task in registry.tasks_of_kind("locomotion"))


@pytest.mark.parametrize("flag", [["--randomization", "off"], ["--undesired-contacts", "off"]])
def test_env_phases_refuses_tracking_flags_for_other_kinds_of_task(flag, capsys):
    from unilab.bench import env_step_phase_cpu
    from unilab.tasks import registry

    for task in env_step_phase_cpu.TASKS:
        if registry.kind(task) == "motion_tracking":
            continue
        with pytest.raises(SystemExit) as done:
            env_step_phase_cpu.main(["--task", task, *flag])
        assert done.value.code == 2
        assert f"{flag[0]}: motion tracking only" in capsys.readouterr().err
