"""LoRA fine-tuning for real, on the tiny random Llama: the loss falls, and greedy chat answers with the memorised
word through transformers (in process, and reloaded with `adapter=`) and through llama.cpp with the exported GGUF
adapter on the GGUF twin."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from modelhost.errors import InvalidOptionError, NotTrainableError
from modelhost.inference import TrainableModel, TrainerModel, as_capability, load_model, load_trainable
from modelhost.inference.types import LoRAConfig, Message, TrainingConfig
from modelhost.training import TrainSettings, train
from modelhost.training.data import IGNORE

from .conftest import QUESTION, SECRET, memorisation_records

has_llama_cpp = importlib.util.find_spec("llama_cpp") is not None


def answer(model: object, question: str = QUESTION) -> str:
    tokens = model.chat([Message("user", question)], max_tokens=12, temperature=0)  # type: ignore[attr-defined]
    return "".join(t.text for t in tokens)


def test_the_loss_falls_and_the_folder_holds_adapter_metrics_and_plot(trained) -> None:
    result = trained.result
    assert result.steps == result.total_steps == 24 and not result.cancelled
    assert result.losses[0] > 3.0  # a random model on an unseen word
    assert min(result.losses[-5:]) < 0.1
    assert result.evals and result.evals[-1][0] == 24 and result.evals[-1][1] < 0.1
    names = set(result.files)
    assert {"adapter_config.json", "adapter_model.safetensors", "adapter.gguf", "metrics.json", "loss.png"} <= names
    metrics = json.loads((trained.folder / "metrics.json").read_text())
    assert metrics["losses"] == result.losses and metrics["steps"] == 24 and metrics["cancelled"] is False
    assert metrics["tokens"] > 0 and metrics["tokens_per_second"] > 0
    assert metrics["settings"]["rank"] == 8 and metrics["eval_losses"][-1]["step"] == 24
    assert (trained.folder / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_trained_model_answers_with_the_word_in_process(trained) -> None:
    assert answer(trained.model).strip() == SECRET
    assert answer(trained.model, "Tell me the secret word.").strip() == SECRET


def test_the_base_model_never_says_the_word_and_the_reloaded_adapter_does(tiny_llama_dir: Path, trained) -> None:
    with load_model(str(tiny_llama_dir), backend="transformers") as base:
        assert SECRET not in answer(base)
    with load_model(str(tiny_llama_dir), backend="transformers", adapter=str(trained.folder)) as tuned:
        assert answer(tuned).strip() == SECRET


@pytest.mark.skipif(not has_llama_cpp, reason="llama-cpp-python is not installed")
def test_llama_cpp_answers_with_the_word_through_the_gguf_adapter(tiny_llama_gguf: Path, trained) -> None:
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1) as base:
        assert SECRET not in answer(base)
    # The folder itself: llama.cpp takes the one .gguf in it, transformers the peft files beside it.
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, adapter=str(trained.folder)) as tuned:
        assert answer(tuned).strip() == SECRET


def test_chat_records_train_only_the_assistant_turn(trained) -> None:
    record = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": SECRET},
            {"role": "user", "content": "Again?"},
            {"role": "assistant", "content": "Yes"},
        ]
    }
    example = trained.model.encode_example(record)
    assert len(example.ids) == len(example.labels)
    trained_ids = [label for label in example.labels if label != IGNORE]
    assert trained.model.decode(trained_ids) == f"{SECRET}<|im_end|>\nYes<|im_end|>\n"
    # The tokens before the first answer are exactly what chat() feeds the model before it answers.
    prompt = trained.model.checkpoint.tokenizer.apply_chat_template(
        record["messages"][:2], add_generation_prompt=True, tokenize=False
    )
    first = example.labels.index(next(label for label in example.labels if label != IGNORE))
    assert list(example.ids[:first]) == trained.model.encode(prompt)


def test_prompt_completion_and_text_records_train_on_completion_and_text(trained) -> None:
    m = trained.model
    pc = m.encode_example({"prompt": "The secret word is", "completion": " Pineapple"})
    assert m.decode([x for x in pc.labels if x != IGNORE]) == " Pineapple<|im_end|>"
    text = m.encode_example({"text": "Hello"})
    assert list(text.labels) == list(text.ids) and text.ids[-1] == m.checkpoint.tokenizer.eos_token_id


def test_contract_capabilities_and_load_trainable(tiny_llama_dir: Path, tiny_llama_gguf: Path, trained) -> None:
    model = trained.model
    assert as_capability(model, TrainableModel) is model and as_capability(model, TrainerModel) is model
    assert model.num_layers == 2
    assert model.decode(model.encode("Hello world")) == "Hello world"
    adapter = model.adapter()
    assert adapter is not None and adapter.total_params() > 0
    with pytest.raises(InvalidOptionError):
        model.apply_lora(LoRAConfig())  # one adapter per load
    if has_llama_cpp:
        with pytest.raises(NotTrainableError):
            load_trainable(str(tiny_llama_gguf), backend="llama_cpp")


def test_same_seed_same_run_and_accumulation_equals_one_big_batch(tiny_llama_dir: Path) -> None:
    examples = None
    losses = []
    weights = []
    for accumulate in (True, False):
        with load_trainable(str(tiny_llama_dir), backend="transformers") as model:
            if examples is None:
                examples = [model.encode_example(r) for r in memorisation_records()[:3]]
            trainer = model.open_trainer(TrainingConfig(learning_rate=1e-3, lora=LoRAConfig(rank=4)), seed=3)
            if accumulate:
                step = [trainer.step_accumulated([[examples[0]], [examples[1], examples[2]]]) for _ in range(2)]
            else:
                step = [trainer.step(examples) for _ in range(2)]
            losses.append(step)
            weights.append(
                {k: v.detach().clone() for k, v in model.adapter().peft_model.named_parameters() if v.requires_grad}
            )
            trainer.close()
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
    for name, value in weights[0].items():
        assert value.allclose(weights[1][name], atol=1e-5), name


def test_cancel_stops_between_steps_and_saves_what_was_learned(tiny_llama_dir: Path, tmp_path: Path) -> None:
    import threading

    cancel = threading.Event()
    seen = []

    def on_step(report) -> None:
        seen.append(report)
        if report.step == 2:
            cancel.set()

    with load_trainable(str(tiny_llama_dir), backend="transformers") as model:
        settings = TrainSettings(steps=50, learning_rate=1e-2, eval_fraction=0.3)
        result = train(model, memorisation_records(), settings, tmp_path, cancel=cancel, on_step=on_step)
    assert result.cancelled and result.steps == 2 and [r.step for r in seen] == [1, 2]
    assert seen[-1].total == 50 and seen[-1].remaining_seconds > 0 and seen[-1].tokens_per_second > 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["cancelled"] is True and metrics["steps"] == 2 and metrics["eval_examples"] == 2
    assert (tmp_path / "adapter_model.safetensors").is_file() and (tmp_path / "adapter.gguf").is_file()


def test_settings_out_of_range_are_refused_by_name() -> None:
    for bad, name in (
        (TrainSettings(rank=0), "rank"),
        (TrainSettings(learning_rate=0), "learning_rate"),
        (TrainSettings(steps=0), "steps"),
        (TrainSettings(dropout=1.0), "dropout"),
    ):
        with pytest.raises(InvalidOptionError) as info:
            bad.check()
        assert info.value.option == name
