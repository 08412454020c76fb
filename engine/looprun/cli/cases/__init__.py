"""`looprun test`: unit tests for a template's decisions - given these facts, this rule fires.

A case file lists cases; each gives the facts of one iteration (observer facts, progress,
policy, task, iteration, inputs, ...) and what must follow: which refine rule fires (its
position in the tree, numbered as ``looprun explain`` numbers it), the action, the
rendered message, whether the exit conditions hold. The decision is computed by the
engine's own code (``loop.refine``), so a passing case is what a run would do.
"""
