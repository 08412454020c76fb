"""Sub-loops on other machines: the job that crosses the wire, the git transport that
carries repository content, checkpoints and journals, and distributed executors.

Nothing here is imported by the loop core: an outer loop only sees the ``Executor``
protocol of ``looprun.run.executor``.
"""
