"""Import cycles inside a package: the strongly connected components of its import graph.

    python tools/import_cycles.py artemis_py.broker

Prints the cycles (components of more than one module) twice: counting every import, and
without the imports made only for type checking (``if TYPE_CHECKING:``). The graph is
grimp's, the one import-linter checks (imports inside functions count as imports).
"""

from __future__ import annotations

import sys

import grimp


def components(graph: grimp.ImportGraph, prefix: str) -> list[list[str]]:
    """Tarjan's strongly connected components of the modules under ``prefix``."""
    modules = sorted(m for m in graph.modules if m == prefix or m.startswith(prefix + "."))
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(modules) + 100))
    for module in modules:
        if module not in index:
            visit(module)
    return sorted((c for c in found if len(c) > 1), key=len, reverse=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    prefix = argv[0]
    root = prefix.split(".")[0]
    for exclude, title in ((False, "every import"), (True, "without TYPE_CHECKING imports")):
        graph = grimp.build_graph(root, cache_dir=None, exclude_type_checking_imports=exclude)
        cycles = components(graph, prefix)
        sizes = ", ".join(str(len(c)) for c in cycles)
        print(f"{prefix}, {title}: " + (f"cycles of {sizes} modules" if cycles else "no cycle"))
        for cycle in cycles:
            print("   ", " ".join(m.removeprefix(prefix + ".") for m in cycle))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
