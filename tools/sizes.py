"""Size gate: no Python module over 600 lines, no function over 80, unless it says why.

A module may exceed the limit when its docstring has a line starting with ``Long:`` that
gives the reason; a function, when a comment starting with ``# Long:`` sits right below
its signature (or its docstring). Lines are physical lines, docstrings and comments
included.

    python tools/sizes.py [paths...]      # default: python/
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LIMIT = 600
FUNCTION_LIMIT = 80


def _module_reason(tree: ast.Module) -> bool:
    doc = ast.get_docstring(tree) or ""
    return any(line.strip().startswith("Long:") for line in doc.splitlines())


def _function_reason(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    body = node.body
    start = body[0].end_lineno if ast.get_docstring(node) and body[0].end_lineno else None
    first = (start or body[0].lineno - 1) + 1  # the line after the docstring or signature
    for line in lines[first - 1 : first + 2]:
        if line.strip().startswith("# Long:"):
            return True
    return False


def problems(path: Path) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    found = []
    if len(lines) > MODULE_LIMIT and not _module_reason(tree):
        found.append(f"{path}: {len(lines)} lines (limit {MODULE_LIMIT}; say why with 'Long:')")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LIMIT and not _function_reason(node, lines):
                found.append(
                    f"{path}:{node.lineno}: {node.name}() is {length} lines (limit "
                    f"{FUNCTION_LIMIT}; say why with a '# Long:' comment at its top)"
                )
    return found


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path("python")]
    files = sorted(p for root in roots for p in (root.rglob("*.py") if root.is_dir() else [root]))
    found = [problem for path in files for problem in problems(path)]
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
