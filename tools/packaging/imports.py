"""Which top-level modules a package's Python files import, and which of those imports are
optional (guarded by ``except ImportError``, or only under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
import dataclasses

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclasses.dataclass(frozen=True)
class Import:
    module: str      # top-level name: "numpy" for "import numpy.linalg"
    file: str
    line: int
    guarded: bool


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _type_checking_only(node: ast.If) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and getattr(n, "id", getattr(n, "attr", None)) == "TYPE_CHECKING"
               for n in ast.walk(node.test))


def imports(source: str, file: str) -> list[Import]:
    """Every absolute import in ``source``."""
    found: list[Import] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(a.name.split(".")[0], file, node.lineno, guarded) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module.split(".")[0], file, node.lineno, guarded))
        if isinstance(node, ast.Try):
            body_guarded = guarded or any(_catches_import_error(h) for h in node.handlers)
            for child in node.body:
                visit(child, body_guarded)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
        elif isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, guarded)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, guarded)

    visit(ast.parse(source, file), False)
    return found
