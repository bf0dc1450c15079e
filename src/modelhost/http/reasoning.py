"""A thinking model's answer split in two: its thought (OpenAI-compatible servers' `reasoning_content`, Ollama's
`thinking`) and its reply (`content`).

The backend says where each token falls (Token.channel: "thought", "marker" for `<think>`/`</think>`, "content"),
because only it knows its model's markers and whether the prompt already opened the thought (a template that ends
in `<think>\\n` starts the answer inside it). The door only routes text: thought text to the thought, marker text
nowhere, and the whitespace a model writes between `</think>` and its reply dropped, as llama-server does.
Raw completions (/v1/completions, raw prompts) are not split: their text is the model's output as is.
"""

from __future__ import annotations

from modelhost.inference.types import Channel


class ReasoningSplit:
    """Routes one answer's deltas; `feed` returns (content, thought) to emit now."""

    def __init__(self) -> None:
        self._after_thought = False  # the reply has not started since a thought ended: trim its leading whitespace
        self.saw_thought = False

    def feed(self, text: str, channel: Channel) -> tuple[str, str]:
        """The text of one delta, as (reply text, thought text); either may be empty."""
        if channel == "marker":
            self._after_thought = True
            self.saw_thought = True
            return "", ""
        if channel == "thought":
            self.saw_thought = True
            return "", text
        if self._after_thought:
            text = text.lstrip()
            self._after_thought = not text
        return text, ""
