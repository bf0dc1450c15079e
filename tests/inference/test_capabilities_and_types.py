"""Capability discovery through wrappers, and the value types' small promises."""

from __future__ import annotations

import dataclasses

import pytest

from modelhost.inference.capabilities import MAX_UNWRAP_DEPTH, VisionModel, accepts_images, as_capability
from modelhost.inference.types import BatchResult, Message, Token, has_images


class Seeing:
    def __init__(self, live: bool = True) -> None:
        self.live = live

    def accepts_images(self) -> bool:
        return self.live


class Wrapper:
    def __init__(self, inner: object) -> None:
        self.inner = inner

    def unwrap(self) -> object:
        return self.inner


def test_as_capability_walks_unwrap_to_the_first_implementer() -> None:
    inner = Seeing()
    assert as_capability(Wrapper(Wrapper(inner)), VisionModel) is inner
    assert as_capability(Wrapper(object()), VisionModel) is None
    assert as_capability(None, VisionModel) is None


def test_as_capability_gives_up_on_a_cycle_of_wrappers() -> None:
    a = Wrapper(None)
    b = Wrapper(a)
    a.inner = b
    assert as_capability(a, VisionModel) is None
    deep: object = Seeing()
    for _ in range(MAX_UNWRAP_DEPTH):
        deep = Wrapper(deep)
    assert as_capability(deep, VisionModel) is None, "past the depth bound the probe stops"


def test_accepts_images_is_a_live_probe() -> None:
    assert accepts_images(Wrapper(Seeing(True)))
    assert not accepts_images(Wrapper(Seeing(False)))
    assert not accepts_images(object())


def test_message_images_become_a_tuple_and_the_message_stays_frozen() -> None:
    images = [b"png"]
    message = Message("user", "look", images)  # type: ignore[arg-type]
    images.append(b"more")
    assert message.images == (b"png",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]
    assert has_images([Message("user", "a"), message]) and not has_images([Message("user", "a")])


def test_batch_result_text_joins_its_tokens() -> None:
    assert BatchResult((Token(1, "a"), Token(2, ""), Token(3, "bc"))).text == "abc"
    assert BatchResult(error=RuntimeError("x")).text == ""
