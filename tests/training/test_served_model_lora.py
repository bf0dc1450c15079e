"""`lora.train` on a model of a served set that was given by path: the job names the model by its served name (the
file or folder's name, or NAME=), and the worker trains the files that model was loaded from."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from modelhost.host.models import Models, ModelSpec
from modelhost.testing.standins import ScriptedModel
from modelhost.worker import WorkerServer

from .conftest import memorisation_records
from .test_cli_and_worker import _submit, wait_for


def test_lora_train_finds_the_files_of_a_model_served_from_a_path(tiny_llama_dir: Path, tmp_path: Path) -> None:
    data = "".join(json.dumps(r) + "\n" for r in memorisation_records()).encode()

    async def main() -> None:
        # A stand-in answers requests; what matters is the path the set knows the model by ("mine" is no catalogue
        # name, so the job's model name alone could not be resolved).
        models = Models([ModelSpec("mine", lambda: ScriptedModel(name="paced"), path=str(tiny_llama_dir))])
        await models.start()
        server = WorkerServer(models, state_dir=tmp_path / "state", capacity=2, journal=lambda line: None)
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=server.url) as c:
                job = await _submit(c, "mine", data, steps=1, batch_size=2, seed=1)
                done = await wait_for(c, job, {"completed", "failed"})
                assert done["status"] == "completed", done
                assert "adapter_model.safetensors" in done["output"]
        finally:
            await server.aclose()
            await models.aclose()

    asyncio.run(main())
