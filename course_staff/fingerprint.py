"""What a change of code is, for the caches and the measured figures: a source's code as the interpreter
sees it, so that an edited comment or docstring changes no fingerprint (course_staff.beyond.results'
cache, benchmarks/figures.py's stale figures)."""

import ast


def code_digest(source):
    """The code of a Python source as its syntax tree without docstrings, comments, blank lines or
    positions (a string: compare two of them, or hash it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)
