"""``accel-migrate verify``: run the original and the migrated script, compare losses.

``runner`` runs inside the training processes (torch only, nothing of the CLI);
``compare`` turns two recordings into a verdict, as data for the CLI to render.
"""
