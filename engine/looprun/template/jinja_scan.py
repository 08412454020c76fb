"""What Jinja's code generator would say about a parsed expression, without generating code.

Loading a template must find every mistake in its expressions, but turning each one into
Python (Jinja's code generation and ``compile``) is most of what loading costs, and a
validation never runs the code. For the common shapes (output, ``if``, a plain ``for``,
a top-level ``set``, any expression) this walk answers the two questions code generation
answers at load time: can it fail (an unknown filter or test), and which names are read
from the context (``jinja2.meta.find_undeclared_variables``). Any other shape returns
None, and the caller takes Jinja's own path, so the answers are always Jinja's.
"""

from __future__ import annotations

from jinja2 import Environment, nodes

# expression nodes whose code cannot fail to generate and which bind no name
_EXPRESSIONS = (
    nodes.Const,
    nodes.TemplateData,
    nodes.Tuple,
    nodes.List,
    nodes.Dict,
    nodes.Pair,
    nodes.Keyword,
    nodes.CondExpr,
    nodes.Call,
    nodes.Getitem,
    nodes.Getattr,
    nodes.Slice,
    nodes.Concat,
    nodes.Compare,
    nodes.Operand,
    nodes.BinExpr,
    nodes.UnaryExpr,
)
# names Jinja binds itself: ``self`` in a template, ``loop`` in a for body
_SPECIAL = frozenset({"self", "loop"})


class _Unsure(Exception):
    """The AST has a shape this walk does not answer for."""


class _Walk:
    def __init__(self, env: Environment):
        self.filters = env.filters
        self.tests = env.tests
        self.names: set[str] = set()
        # names a top-level ``{% set %}`` binds: a for body, analysed after the whole
        # template, sees them wherever they are set
        self.root_stores: frozenset[str] = frozenset()

    def node(self, node: nodes.Node, bound: frozenset[str]) -> None:
        if isinstance(node, nodes.Name):
            if node.ctx != "load":
                raise _Unsure
            if node.name not in bound:
                self.names.add(node.name)
        elif isinstance(node, nodes.Filter):
            if node.node is None or node.name not in self.filters:
                raise _Unsure
            self.children(node, bound)
        elif isinstance(node, nodes.Test):
            if node.name not in self.tests:
                raise _Unsure
            self.children(node, bound)
        elif isinstance(node, (nodes.Output, nodes.If, *_EXPRESSIONS)):
            if isinstance(node, nodes.Tuple) and node.ctx != "load":
                raise _Unsure
            self.children(node, bound)
        elif isinstance(node, nodes.For):
            self.loop(node, bound)
        else:
            raise _Unsure

    def children(self, node: nodes.Node, bound: frozenset[str]) -> None:
        for child in node.iter_child_nodes():
            self.node(child, bound)

    def loop(self, node: nodes.For, bound: frozenset[str]) -> None:
        """A plain ``for`` (no filter, ``else`` or recursion): its targets and ``loop``
        are bound in its body only."""
        if node.test is not None or node.else_ or node.recursive:
            raise _Unsure
        targets = node.target.items if isinstance(node.target, nodes.Tuple) else [node.target]
        names = set()
        for target in targets:
            if not isinstance(target, nodes.Name) or target.name in _SPECIAL:
                raise _Unsure
            names.add(target.name)
        self.node(node.iter, bound)
        inner = bound | names | self.root_stores | {"loop"}
        for child in node.body:
            self.node(child, inner)


def undeclared_names(node: nodes.Node, env: Environment) -> frozenset[str] | None:
    """The names ``node`` reads from the context, as ``find_undeclared_variables`` gives
    them (``self`` and ``env``'s globals excluded), when its code is sure to generate in
    ``env``; None when this walk cannot tell, and Jinja itself must be asked."""
    walk = _Walk(env)
    body = node.body if isinstance(node, nodes.Template) else [node]
    try:
        walk.root_stores = frozenset(_root_store(n) for n in body if isinstance(n, nodes.Assign))
        bound = frozenset({"self"})
        for child in body:
            if isinstance(child, nodes.Assign):  # the value is read before the name is set
                walk.node(child.node, bound)
                bound |= {_root_store(child)}
            else:
                walk.node(child, bound)
    except _Unsure:
        return None
    return frozenset(walk.names.difference(env.globals))


def _root_store(node: nodes.Assign) -> str:
    """The name a top-level ``{% set name = ... %}`` binds (a plain name only)."""
    target = node.target
    if not isinstance(target, nodes.Name) or target.ctx != "store" or target.name in _SPECIAL:
        raise _Unsure
    return target.name
