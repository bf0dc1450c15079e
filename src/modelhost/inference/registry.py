"""The backend registry: which engines exist, which can run here, and which loads a given model.

One process-wide registry (the module functions) plus the `Registry` class for tests and embedders. Third-party
backends register through the entry-point group `modelhost.backends`: each entry point names a Backend class (or
a zero-argument factory); entry points are read once, lazily, on first use, so importing modelhost stays cheap.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from modelhost.errors import (
    BackendNotRegisteredError,
    BackendUnavailableError,
    InvalidOptionError,
    ModelHostError,
    ModelLoadError,
    ModelNotFoundError,
    NoBackendsError,
    NotTrainableError,
)
from modelhost.inference import catalogue, openmp
from modelhost.inference.capabilities import (
    AvailabilityExplainer,
    DeviceInfoProvider,
    MemoryEstimator,
    TrainableModel,
    as_capability,
)
from modelhost.inference.model import Backend, FormatProbe, TextModel
from modelhost.inference.options import LoadOptions
from modelhost.inference.types import DeviceInfo

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "modelhost.backends"

#: Which engine `default()` and an unpinned load try first. llama.cpp first: on CPUs it is the fastest engine for
#: the GGUF files people actually have. vllm before transformers: its probe accepts a folder only on a machine with
#: a GPU, where it serves folders far faster; elsewhere folders (and vision) go to transformers.
PREFERENCE: tuple[str, ...] = ("llama_cpp", "vllm", "transformers")


def _safe_available(backend: Backend) -> bool:
    # `available()` must never raise, but a third-party one might; a raising probe means "not here".
    try:
        return bool(backend.available())
    except Exception:
        log.warning("backend %r: available() raised; treating it as unavailable", backend.name, exc_info=True)
        return False


def _safe_accepts(backend: Backend, path: str) -> bool:
    """`backend.accepts(path)` for an available FormatProbe; False for any other backend, and when the probe fails."""
    return isinstance(backend, FormatProbe) and _probe(backend, path) and _safe_available(backend)


def _probe(backend: FormatProbe, path: str) -> bool:
    """`backend.accepts(path)`, False when the probe fails (a backend whose engine is missing may fail it)."""
    try:
        return backend.accepts(path)
    except Exception:
        log.warning("backend %r failed to probe %s; taking it as a no", getattr(backend, "name", "?"), path,
                    exc_info=True)  # fmt: skip
        return False


class Registry:
    """A set of backends by name. Thread-safe; the same name registered again replaces the old one."""

    def __init__(self, *, preference: tuple[str, ...] = PREFERENCE, entry_points: bool = False) -> None:
        self._backends: dict[str, Backend] = {}
        self._preference = preference
        self._lock = threading.Lock()
        self._entry_points_loaded = not entry_points

    def register(self, backend: Backend) -> None:
        """Add a backend (replacing one of the same name)."""
        with self._lock:
            self._backends[backend.name] = backend

    def unregister(self, name: str) -> None:
        """Remove a backend by name, if present."""
        with self._lock:
            self._backends.pop(name, None)

    def get(self, name: str) -> Backend:
        """The backend registered as `name`; BackendNotRegisteredError lists the registered ones."""
        self._load_entry_points()
        with self._lock:
            backend = self._backends.get(name)
            known = sorted(self._backends)
        if backend is None:
            raise BackendNotRegisteredError(
                f"backend {name!r} is not registered; registered: {', '.join(known) or 'none'}"
            )
        return backend

    def names(self) -> list[str]:
        """Registered backend names, sorted."""
        self._load_entry_points()
        with self._lock:
            return sorted(self._backends)

    def ordered(self) -> list[Backend]:
        """All backends: the preference order first, then the others alphabetically."""
        self._load_entry_points()
        with self._lock:
            backends = dict(self._backends)
        first = [backends.pop(n) for n in self._preference if n in backends]
        return first + [backends[n] for n in sorted(backends)]

    def default(self) -> Backend:
        """The first available backend in preference order."""
        backends = self.ordered()
        if not backends:
            raise NoBackendsError("no backends registered")
        for backend in backends:
            if _safe_available(backend):
                return backend
        raise NoBackendsError(f"no backends available (registered: {', '.join(b.name for b in backends)})")

    def load_model(self, path: str, backend: str | None = None, **opts: Any) -> TextModel:
        """Resolve `path` through the catalogue and load it with the pinned backend or the first suitable one."""
        resolved = self._resolve(path)
        load_opts = {k: v for k, v in opts.items() if v is not None}
        return self._load_with(self._choose(path, resolved, backend, opts), resolved, load_opts)

    def memory_estimate(self, path: str, backend: str | None = None, **opts: Any) -> int | None:
        """Bytes the model at `path` will hold once `load_model(path, backend, **opts)` loads it, from the backend
        that would load it (the MemoryEstimator capability); None when that backend cannot say."""
        resolved = self._resolve(path)
        estimator = as_capability(self._choose(path, resolved, backend, opts), MemoryEstimator)
        if estimator is None:
            return None
        return estimator.memory_estimate(resolved, **{k: v for k, v in opts.items() if v is not None})

    def _resolve(self, path: str) -> str:
        """The catalogue's path for `path`; or `path` itself when it exists in a format the catalogue does not know
        but an available backend accepts (its FormatProbe), so a new backend's own format needs nothing here."""
        try:
            return catalogue.resolve(path)
        except ModelNotFoundError:
            candidate = os.path.expanduser(path)
            if os.path.exists(candidate) and any(_safe_accepts(b, candidate) for b in self.ordered()):
                return candidate
            raise

    def _choose(self, path: str, resolved: str, backend: str | None, opts: Mapping[str, Any]) -> Backend:
        """The backend `load_model` uses: the pinned one, else the first available one that accepts the file."""
        load = LoadOptions.parse(opts, backend=backend)
        # A poll the caller named is put in force before any `available()` below imports an engine: that import loads
        # OpenMP, which reads its wait once. The default wait is measured where an engine that loads OpenMP is
        # imported (openmp.import_engine, every backend's one way in), not here: the measurement keeps every core
        # busy for a tenth of a second (0.2 CPU s on 2 cores, a fifth of a one-page `convert`), which a model whose
        # engine has no OpenMP (the `ocr` model's onnxruntime) would pay for nothing.
        if load.poll is not None:
            openmp.configure(load.poll)
        if load.backend is not None:
            chosen = self.get(load.backend)
            if not _safe_available(chosen):
                raise BackendUnavailableError(f"backend {chosen.name!r} is not available on this machine")
            return chosen
        ordered = self.ordered()
        # Whether a backend takes the file is asked before whether it runs here: `available()` may import its engine
        # (llama_cpp's: half a second), which an `ocr` or a folder's load must not pay for (issue 38).
        for candidate in ordered:
            if (not isinstance(candidate, FormatProbe) or _probe(candidate, resolved)) and _safe_available(candidate):
                return candidate
        candidates = [b for b in ordered if _safe_available(b)]
        if not candidates:
            raise NoBackendsError(
                f"cannot load {path!r}: no backends available (registered: {', '.join(self.names()) or 'none'})"
            )
        raise ModelLoadError(
            f"no available backend loads {resolved!r} (available: {', '.join(b.name for b in candidates)})"
        )

    def load_trainable(self, path: str, backend: str | None = None, **opts: Any) -> TextModel:
        """Load a model that implements TrainableModel; close it again and raise NotTrainableError otherwise."""
        model = self.load_model(path, backend, **opts)
        if as_capability(model, TrainableModel) is None:
            model.close()
            raise NotTrainableError(f"model {path!r} loaded with {type(model).__name__} does not support training")
        return model

    @staticmethod
    def _load_with(backend: Backend, path: str, opts: dict[str, Any]) -> TextModel:
        try:
            return backend.load_model(path, **opts)
        except InvalidOptionError as exc:
            # The caller's own mistake: keep the type (so `except InvalidOptionError` still catches it), name the
            # backend that refused it.
            if backend.name in exc.detail:
                raise
            raise InvalidOptionError(exc.option, f"{exc.detail} (backend {backend.name!r})") from exc
        except ModelHostError as exc:
            if isinstance(exc, ModelLoadError) and backend.name in str(exc):
                raise
            raise ModelLoadError(f"backend {backend.name!r} failed to load {path!r}: {exc}", code=exc.code) from exc
        except Exception as exc:
            raise ModelLoadError(f"backend {backend.name!r} failed to load {path!r}: {exc}") from exc

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                factory: Callable[[], Backend] = ep.load()
                backend = factory()
            except Exception:
                # A broken third-party plugin must not take the built-in backends down with it.
                log.warning("backend entry point %r failed to load; skipping it", ep.name, exc_info=True)
                continue
            with self._lock:
                self._backends.setdefault(backend.name, backend)


_default_registry = Registry(entry_points=True)


def default_registry() -> Registry:
    """The process-wide registry that the module functions use."""
    return _default_registry


def register(backend: Backend) -> None:
    """Register a backend in the process-wide registry."""
    _default_registry.register(backend)


def get(name: str) -> Backend:
    """A backend of the process-wide registry by name."""
    return _default_registry.get(name)


def names() -> list[str]:
    """Names in the process-wide registry, sorted."""
    return _default_registry.names()


def default() -> Backend:
    """The first available backend of the process-wide registry in preference order."""
    return _default_registry.default()


def load_model(path: str, backend: str | None = None, **opts: Any) -> TextModel:
    """Load a model (a GGUF file, a Hugging Face folder, `default`, a cached hub name) with a suitable backend."""
    return _default_registry.load_model(path, backend, **opts)


def memory_estimate(path: str, backend: str | None = None, **opts: Any) -> int | None:
    """Bytes the model will hold once loaded with these options, from the backend that would load it (None: it
    cannot say). Reads headers only; loads nothing."""
    return _default_registry.memory_estimate(path, backend, **opts)


def load_trainable(path: str, backend: str | None = None, **opts: Any) -> TextModel:
    """Load a model that can train (LoRA); closes it again and raises NotTrainableError when it cannot."""
    return _default_registry.load_trainable(path, backend, **opts)


def unavailable_reason(name: str, registry: Registry | None = None) -> str:
    """Why the registered backend `name` cannot run here, in one line (its own words when it can say, else a
    generic one); never raises for a name."""
    try:
        backend = (registry or _default_registry).get(name)
    except BackendNotRegisteredError:
        return f"no backend named {name!r} is registered"
    explainer = as_capability(backend, AvailabilityExplainer)
    return explainer.unavailable_reason() if explainer is not None else "its engine cannot run here"


def backend_device_info(name: str, registry: Registry | None = None) -> DeviceInfo | None:
    """Device facts of a registered backend that can describe its device, else None (never raises for a name)."""
    try:
        backend = (registry or _default_registry).get(name)
    except BackendNotRegisteredError:
        return None
    provider = as_capability(backend, DeviceInfoProvider)
    return provider.device_info() if provider is not None else None
