"""Registry semantics with small stand-in backends: names, preference, pinning, failures, entry points."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from modelhost.errors import (
    BackendNotRegisteredError,
    BackendUnavailableError,
    InvalidOptionError,
    ModelLoadError,
    NoBackendsError,
    NotTrainableError,
)
from modelhost.inference import registry as registry_module
from modelhost.inference.model import Backend, TextModel
from modelhost.inference.registry import Registry, backend_device_info
from modelhost.inference.types import (
    BatchResult,
    ClassifyResult,
    DeviceInfo,
    GenerateMetrics,
    LoRAConfig,
    Message,
    ModelInfo,
    Token,
)


class StubModel:
    """The smallest TextModel: enough for the registry to hand it back."""

    model_type = "stub"

    def __init__(self, backend: str, path: str, opts: dict[str, Any]) -> None:
        self.backend, self.path, self.opts = backend, path, opts
        self.closed = 0

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        yield Token(1, "x")

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        yield Token(1, "x")

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        return [ClassifyResult(Token(1, "x")) for _ in prompts]

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        return [BatchResult((Token(1, "x"),)) for _ in prompts]

    def info(self) -> ModelInfo:
        return ModelInfo("stub")

    def metrics(self) -> GenerateMetrics:
        return GenerateMetrics()

    def err(self) -> BaseException | None:
        return None

    def close(self) -> None:
        self.closed += 1

    def __enter__(self) -> StubModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TrainableStub(StubModel):
    num_layers = 2

    def apply_lora(self, config: LoRAConfig) -> Any:
        return None

    def encode(self, text: str) -> list[int]:
        return [1]

    def decode(self, ids: Sequence[int]) -> str:
        return "x"


class StubBackend:
    """A backend whose availability, format and failure are set by the test."""

    def __init__(
        self,
        name: str,
        *,
        available: bool | Exception = True,
        accepts: str | None = None,
        fails: Exception | None = None,
        trainable: bool = False,
    ) -> None:
        self.name = name
        self._available = available
        self._accepts = accepts
        self._fails = fails
        self._trainable = trainable
        self.loaded: list[StubModel] = []

    def available(self) -> bool:
        if isinstance(self._available, Exception):
            raise self._available
        return self._available

    def accepts(self, path: str) -> bool:
        return self._accepts is None or path.endswith(self._accepts)

    def load_model(self, path: str, **opts: Any) -> TextModel:
        if self._fails is not None:
            raise self._fails
        model = (TrainableStub if self._trainable else StubModel)(self.name, path, opts)
        self.loaded.append(model)
        return model


class DeviceBackend(StubBackend):
    def device_info(self) -> DeviceInfo:
        return DeviceInfo("stub device", memory_size=1)


@pytest.fixture
def gguf_file(tmp_path: Path) -> str:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 8)
    return str(path)


@pytest.fixture
def model_dir(tmp_path: Path) -> str:
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    return str(tmp_path / "hf")


def test_stand_ins_satisfy_the_protocols() -> None:
    assert isinstance(StubBackend("a"), Backend)
    assert isinstance(StubModel("a", "p", {}), TextModel)


def test_names_are_sorted_and_the_same_name_replaces() -> None:
    reg = Registry()
    first, second = StubBackend("zeta"), StubBackend("alpha")
    reg.register(first)
    reg.register(second)
    assert reg.names() == ["alpha", "zeta"]
    replacement = StubBackend("zeta")
    reg.register(replacement)
    assert reg.get("zeta") is replacement and reg.names() == ["alpha", "zeta"]
    reg.unregister("zeta")
    reg.unregister("zeta")  # absent: no error
    assert reg.names() == ["alpha"]


def test_get_unknown_lists_the_registered_names() -> None:
    reg = Registry()
    reg.register(StubBackend("one"))
    with pytest.raises(BackendNotRegisteredError, match=r"'nope'.*registered: one") as info:
        reg.get("nope")
    assert info.value.code == "backend_not_registered"


def test_default_follows_the_preference_order_then_the_alphabet() -> None:
    reg = Registry()
    for name in ("zzz", "aaa", "transformers", "llama_cpp"):
        reg.register(StubBackend(name))
    assert [b.name for b in reg.ordered()] == ["llama_cpp", "transformers", "aaa", "zzz"]
    assert reg.default().name == "llama_cpp"


def test_default_skips_unavailable_and_raising_probes() -> None:
    reg = Registry()
    reg.register(StubBackend("llama_cpp", available=RuntimeError("probe blew up")))
    reg.register(StubBackend("transformers", available=False))
    reg.register(StubBackend("other"))
    assert reg.default().name == "other"


def test_default_with_nothing_registered_or_nothing_available() -> None:
    with pytest.raises(NoBackendsError, match="no backends registered"):
        Registry().default()
    reg = Registry()
    reg.register(StubBackend("llama_cpp", available=False))
    with pytest.raises(NoBackendsError, match="no backends available") as info:
        reg.default()
    assert info.value.code == "no_backends"


def test_unpinned_load_takes_the_first_available_backend_that_accepts_the_format(
    gguf_file: str, model_dir: str
) -> None:
    reg = Registry()
    llama = StubBackend("llama_cpp", accepts=".gguf")
    hf = StubBackend("transformers")
    reg.register(llama)
    reg.register(hf)
    assert isinstance(reg.load_model(gguf_file), StubModel) and llama.loaded and not hf.loaded
    reg.load_model(model_dir)
    assert len(llama.loaded) == 1 and len(hf.loaded) == 1


def test_unpinned_load_with_no_suitable_backend(model_dir: str) -> None:
    reg = Registry()
    reg.register(StubBackend("llama_cpp", accepts=".gguf"))
    with pytest.raises(ModelLoadError, match="no available backend loads"):
        reg.load_model(model_dir)
    empty = Registry()
    with pytest.raises(NoBackendsError):
        empty.load_model(model_dir)


def test_pinned_load_uses_that_backend_even_when_another_comes_first(gguf_file: str) -> None:
    reg = Registry()
    reg.register(StubBackend("llama_cpp"))
    pinned = StubBackend("transformers")
    reg.register(pinned)
    model = reg.load_model(gguf_file, backend="transformers", context_length=64)
    assert isinstance(model, StubModel) and model.backend == "transformers"
    assert model.opts == {"context_length": 64}, "load options reach the backend, the pin does not"


def test_pinned_load_errors_name_the_backend(gguf_file: str) -> None:
    reg = Registry()
    reg.register(StubBackend("off", available=False))
    reg.register(StubBackend("broken", fails=RuntimeError("disk on fire")))
    with pytest.raises(BackendNotRegisteredError, match="'ghost'"):
        reg.load_model(gguf_file, backend="ghost")
    with pytest.raises(BackendUnavailableError, match="'off'") as unavailable:
        reg.load_model(gguf_file, backend="off")
    assert unavailable.value.code == "backend_unavailable"
    with pytest.raises(ModelLoadError, match=r"'broken'.*disk on fire") as failed:
        reg.load_model(gguf_file, backend="broken")
    assert failed.value.code == "load_failed"
    assert isinstance(failed.value.__cause__, RuntimeError)


def test_a_backends_own_error_keeps_its_code_and_gains_the_backend_name(gguf_file: str) -> None:
    reg = Registry()
    reg.register(StubBackend("picky", fails=InvalidOptionError("threads", "too many")))
    with pytest.raises(InvalidOptionError, match=r"threads.*'picky'") as info:
        reg.load_model(gguf_file, backend="picky")
    assert info.value.code == "invalid_option" and info.value.option == "threads"


def test_bad_load_options_are_refused_before_any_backend_runs(gguf_file: str) -> None:
    reg = Registry()
    backend = StubBackend("llama_cpp")
    reg.register(backend)
    with pytest.raises(InvalidOptionError, match="threads"):
        reg.load_model(gguf_file, threads=0)
    assert not backend.loaded


def test_load_of_a_missing_path_fails_in_the_catalogue(tmp_path: Path) -> None:
    from modelhost.errors import ModelNotFoundError

    reg = Registry()
    reg.register(StubBackend("llama_cpp"))
    with pytest.raises(ModelNotFoundError):
        reg.load_model(str(tmp_path / "missing.gguf"))


def test_load_trainable_closes_a_model_that_cannot_train(gguf_file: str) -> None:
    reg = Registry()
    plain = StubBackend("plain")
    reg.register(plain)
    with pytest.raises(NotTrainableError):
        reg.load_trainable(gguf_file, backend="plain")
    assert plain.loaded[0].closed == 1
    reg.register(StubBackend("trainer", trainable=True))
    assert isinstance(reg.load_trainable(gguf_file, backend="trainer"), TrainableStub)


def test_backend_device_info() -> None:
    reg = Registry()
    reg.register(DeviceBackend("dev"))
    reg.register(StubBackend("plain"))
    info = backend_device_info("dev", reg)
    assert info is not None and info.name == "stub device"
    assert backend_device_info("plain", reg) is None
    assert backend_device_info("ghost", reg) is None


class FakeEntryPoint:
    """What importlib.metadata.entry_points returns, reduced to what the registry uses."""

    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self._target = target

    def load(self) -> Any:
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


def test_entry_points_are_read_lazily_once_and_a_broken_plugin_is_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def fake_entry_points(*, group: str) -> list[FakeEntryPoint]:
        calls.append(group)
        return [
            FakeEntryPoint("plugin", lambda: StubBackend("plugin")),
            FakeEntryPoint("broken", ImportError("missing dependency")),
            FakeEntryPoint("shadowed", lambda: StubBackend("mine")),
        ]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    reg = Registry(entry_points=True)
    mine = StubBackend("mine")
    reg.register(mine)  # registered in code before the entry points are read
    assert calls == [], "constructing a registry must not read entry points"
    assert reg.names() == ["mine", "plugin"]
    assert calls == [registry_module.ENTRY_POINT_GROUP]
    assert reg.get("mine") is mine, "an entry point must not replace a backend registered in code"
    assert "broken" in caplog.text
    reg.names()
    assert len(calls) == 1, "entry points are read once"


def test_the_declared_llama_cpp_entry_point_names_the_backend_class() -> None:
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group=registry_module.ENTRY_POINT_GROUP)}
    assert eps["llama_cpp"].value == "modelhost.backends.llama_cpp:LlamaCppBackend"
