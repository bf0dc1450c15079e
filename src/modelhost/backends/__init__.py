"""Engines that implement the inference contract. Each imports only `modelhost.inference` and its own library.

Backends are found through the entry-point group `modelhost.backends` (see pyproject.toml), so importing this
package loads no engine.
"""
