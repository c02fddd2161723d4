"""Every third-party module the package imports is installed by `pip install batchbench`.

The check that would have caught apache-otava missing from pyproject's dependencies
(it was in the lock, so this venv had it and every test passed), at the cost of
reading the source. The direct check, installing into an empty venv from the lock
(`pip install --no-deps -r requirements/cpu.lock`, then `-e .`) and importing every
subcommand, takes minutes and gigabytes (the lock holds torch and vLLM) and needs the
package index; importing the subcommands in this venv proves nothing, since it holds
the whole lock. So instead:

- every `import` in harness/ and launchers/ is read with `ast`, lazy ones inside
  functions included; an import guarded by `except ImportError` is optional by design;
- each third-party module is mapped to the distribution that provides it here
  (`importlib.metadata.packages_distributions`);
- that distribution must be one pyproject's `dependencies` name or pull in: their
  requirements, followed transitively through `importlib.metadata.requires` with
  markers evaluated for this interpreter.

vLLM, torch and transformers are imported only where a server's model is made or a
server runs; they must come with the `cpu` extra instead.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import sys
import tomllib
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"harness", "launchers", "workloads"}
# Imported only to make a model directory or inside a running vLLM server.
SERVER_EXTRA_MODULES = {"vllm", "torch", "transformers"}


def imported_modules(source: str) -> set[str]:
    """Top-level names of the modules `source` imports, except those guarded by `except ImportError`."""
    tree = ast.parse(source)
    optional = {
        id(node)
        for guard in ast.walk(tree)
        if isinstance(guard, ast.Try) and any(_catches_import_error(handler) for handler in guard.handlers)
        for statement in guard.body
        for node in ast.walk(statement)
    }
    names = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    kinds = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(kind, ast.Name) and kind.id in ("ImportError", "ModuleNotFoundError") for kind in kinds)


def third_party_imports() -> dict[str, list[str]]:
    """Each third-party module imported in harness/ and launchers/ -> the files importing it."""
    found: dict[str, list[str]] = {}
    for folder in ("harness", "launchers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in imported_modules(path.read_text()) - FIRST_PARTY - set(sys.stdlib_module_names):
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def installed_closure(requirements: Iterable[str]) -> set[str]:
    """The distributions `requirements` install, transitively (canonical names; markers for this interpreter)."""
    seen: set[tuple[str, str]] = set()
    todo = [(requirement, "") for requirement in requirements]
    while todo:
        text, extra = todo.pop()
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        # The distribution itself, and each extra asked of it (uvicorn[standard]).
        for wanted in {(name, ""), *((name, asked) for asked in requirement.extras)} - seen:
            seen.add(wanted)
            # Declared but not installed (otava's service clients): provides nothing imported here.
            with contextlib.suppress(metadata.PackageNotFoundError):
                todo += [(child, wanted[1]) for child in metadata.requires(name) or []]
    return {name for name, _ in seen}


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def providers(module: str) -> set[str]:
    """The installed distributions that provide top-level module `module`."""
    return {canonicalize_name(dist) for dist in _distributions().get(module, [])}


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return metadata.packages_distributions()


def test_every_imported_module_comes_with_the_dependencies():
    installed = installed_closure(pyproject()["dependencies"])
    missing = {
        module: (sorted(providers(module)) or "no installed distribution", files[:3])
        for module, files in third_party_imports().items()
        if module not in SERVER_EXTRA_MODULES and not providers(module) & installed
    }
    assert missing == {}, "imported, but not installed by pyproject's dependencies: " + repr(missing)


def test_server_modules_come_with_the_cpu_extra():
    installed = installed_closure(pyproject()["optional-dependencies"]["cpu"])
    assert set(third_party_imports()) >= SERVER_EXTRA_MODULES
    assert all(providers(module) & installed for module in SERVER_EXTRA_MODULES)
