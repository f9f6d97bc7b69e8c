"""The absolute imports of a source file, read from its AST (imports inside functions and
`try` blocks count): what the dependency and packaging tests check."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def absolute_imports(path: Path) -> Iterator[tuple[str, int]]:
    """(dotted module name, line) of each `import x` and `from x import y` in PATH;
    relative imports (`from . import y`) are left out."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, node.lineno
