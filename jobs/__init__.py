"""The ``starchol`` command line: one module per subcommand.

Each module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to the function that runs it. Modules whose runtime dependencies are
missing still register, and report the missing piece when run.
"""
import importlib

#: subcommand modules, in the order ``starchol --help`` lists them
COMMANDS = ("map_cmd", "volume_cmd", "compare_cmd", "plan_cmd", "run_cmd", "bench_cmd", "report_cmd", "generate_cmd", "slurm_cmd", "info_cmd", "simulate_cmd", "calibrate_cmd")


def command_modules():
    """Import and return the subcommand modules."""
    return [importlib.import_module(f".{name}", __name__) for name in COMMANDS]
