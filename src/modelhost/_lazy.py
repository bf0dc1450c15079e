"""Package attributes imported at their first use (PEP 562), so that importing a package costs only what is used.

Every `modelhost` command imports `modelhost` and the packages of the commands it registers; with their public
names imported eagerly, `modelhost --version` paid for the whole inference contract, the hub client and the
training loop (issue 38: 0.8 s before a line was printed). A package lists where each public name lives, and
`exports` gives it the module `__getattr__` that imports the name from there the first time it is asked for.

A name that is also a submodule's (docengine's `analyse`, both a function and its module) cannot be lazy: importing
the submodule sets the package attribute to the module, and the name then gives the module. Bind such a name
eagerly, as docengine does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def exports(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """The `__getattr__` of `package`: each name in `where` (name -> module) imported from its module at its first
    use and kept on the package; any other name is an AttributeError, as for a module without it."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # asked once: later uses are plain attribute reads
        return value

    return __getattr__
