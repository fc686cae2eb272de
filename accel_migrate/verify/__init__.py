"""``accel-migrate verify``: run the original and the migrated script, compare losses.

``runner`` runs inside the training processes (torch only, nothing of the CLI);
``compare`` turns two recordings into a verdict, as data for the CLI to render.
"""

#: The markers around a failure of the script, as the runner prints it.
FAILURE_START = "=== accel-migrate verify: the script failed"
FAILURE_END = "=== end of the script's failure ==="
