"""Executors fan a run's attempts out: ``local`` (one process) and ``ray`` (one actor per node).

Both call the same worker and hand each finished AttemptResult to the driver, which alone writes
the results folder, so the two produce folders of identical form.
"""
