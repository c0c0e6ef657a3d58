"""Budgets the test modules share, each with one meaning.  A budget only one module uses stays there.

Changing one here changes what every module using it asks of the harness: a search's budget is
part of what a test asserts (a planted bug is found, and shrunk to its minimal case, within it).
"""

#: Per-case timeout of a search over planted bugs, some of which hang or desync: short, as a
#: shrinking hang costs a timeout per step.
PLANTED_TIMEOUT_S = 3.0
#: Shrinking time of a search over planted bugs: bugs that hang or desync shrink at ~1 s a step,
#: and the minimal cases the tests expect hold by then.
PLANTED_SHRINK_BUDGET_S = 25.0
#: Per-case timeout of a search whose target is not meant to hang (the CLI's default ``--timeout``).
CASE_TIMEOUT_S = 5.0
#: A generated repro script run in a subprocess (it starts its own ranks).
SCRIPT_TIMEOUT_S = 120
#: A whole ``python -m harness`` command run in a subprocess (a check that finds and shrinks a bug).
COMMAND_TIMEOUT_S = 240
