"""Size gate: no module over 600 lines, no function over 80, unless it says why.

Python and Rust alike. A Python module may exceed the limit when its docstring has a line
starting with ``Long:`` that gives the reason; a function, when a comment starting with
``# Long:`` sits right below its signature (or its docstring). A Rust file, when one of its
``//!`` lines starts with ``Long:``; a Rust function, when a ``// Long:`` comment is among
the first lines of its body. Lines are physical lines, docs and comments included (clippy's
``too_many_lines``, configured in clippy.toml, counts code lines only and gates Rust too).

    python tools/sizes.py [paths...]      # default: python/ and rust/
"""

from __future__ import annotations

import ast
import re
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
    return any(line.strip().startswith("# Long:") for line in lines[first - 1 : first + 2])


def _rust_code(text: str) -> str:
    """`text` with comments, strings and char literals blanked (newlines kept), so that
    braces and keywords in them do not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif raw := re.match(r'b?r(#*)"', text[i:]):
            end = text.find('"' + raw.group(1), i + raw.end())
            j = n if end < 0 else end + 1 + len(raw.group(1))
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif lit := re.match(r"b?'(\\.[^']*|[^'\\])'", text[i:]):
            out.append(" " * lit.end())
            i += lit.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _rust_functions(text: str) -> list[tuple[str, int, int]]:
    """`(name, first line, last line)` of every Rust function with a body, nested ones too."""
    code = _rust_code(text)
    found = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", code):
        depth, j = 0, m.end()
        while j < len(code) and not (depth == 0 and code[j] in "{;"):
            depth += (code[j] in "([" and 1) or -(code[j] in ")]")
            j += 1
        if j >= len(code) or code[j] == ";":
            continue  # a declaration without a body
        depth, k = 0, j
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        first = code.count("\n", 0, m.start()) + 1
        found.append((m.group(1), first, code.count("\n", 0, k) + 1))
    return found


def rust_problems(path: Path) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    found = []
    module_reason = any(line.strip().startswith("//! Long:") for line in lines)
    if len(lines) > MODULE_LIMIT and not module_reason:
        found.append(f"{path}: {len(lines)} lines (limit {MODULE_LIMIT}; say why with '//! Long:')")
    for name, first, last in _rust_functions(text):
        length = last - first + 1
        head = lines[first - 1 : first + 4]
        if length > FUNCTION_LIMIT and not any("// Long:" in line for line in head):
            found.append(
                f"{path}:{first}: {name}() is {length} lines (limit {FUNCTION_LIMIT}; say why "
                "with a '// Long:' comment at its top)"
            )
    return found


def problems(path: Path) -> list[str]:
    if path.suffix == ".rs":
        return rust_problems(path)
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
    roots = [Path(a) for a in argv] or [Path("python"), Path("rust")]
    files = sorted(
        p
        for root in roots
        for p in (
            [q for q in root.rglob("*") if q.suffix in (".py", ".rs") and "target" not in q.parts]
            if root.is_dir()
            else [root]
        )
    )
    found = [problem for path in files for problem in problems(path)]
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
