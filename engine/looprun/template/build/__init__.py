"""Building a typed Template from a composed document, one module per template section
(``builder`` puts them together).
"""
