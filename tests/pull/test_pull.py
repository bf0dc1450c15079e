"""`modelhost pull | list | rm` against a hub-shaped server on loopback: huggingface_hub's real download code runs
(HEAD, GET, Range resumes, its cache layout), with faults injected by the server (modelhost.testing.hubserver)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pull_support import BIG_REPO, FOLDER_REPO, GGUF_REPO, run_cli

from modelhost import hub
from modelhost.errors import ModelNotFoundError
from modelhost.hub import PullError, fetch
from modelhost.inference import catalogue, hub_cache, registry
from modelhost.testing import hubserver

PROMPT = "The quick brown fox"


def _greedy(model_path: str, backend: str) -> str:
    with registry.load_model(model_path, backend) as model:
        return "".join(t.text for t in model.generate(PROMPT, max_tokens=8, temperature=0.0))


def _blobs(env: dict[str, str]) -> list[Path]:
    return [p for p in Path(env["HF_HUB_CACHE"]).rglob("blobs/*") if p.is_file()]


def _model_files(root: Path) -> list[Path]:
    """Every file of the cache but its lock files and its CACHEDIR.TAG: blobs, links, partial downloads."""
    return [p for p in root.rglob("*") if p.is_file() and ".locks" not in p.parts and p.name != "CACHEDIR.TAG"]


def test_pull_a_quantisation_then_generate_with_it(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, tiny_llama_f16: Path
) -> None:
    pytest.importorskip("llama_cpp")
    pulled = run_cli("pull", f"{GGUF_REPO}:F16", env=hub_env)
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.strip() == f"{GGUF_REPO}:F16", "stdout is the name that loads it, for scripts"
    assert "tiny-llama-F16.gguf" in pulled.stderr and "kB" in pulled.stderr, "the progress bar names file and bytes"
    got = [r.path for r in hub_server.requests if r.method == "GET" and not r.path.startswith("/api/")]
    assert got == [f"/cdn/{GGUF_REPO}/tiny-llama-F16.gguf"], "only the chosen quantisation, from the CDN redirect"

    path = catalogue.resolve(f"{GGUF_REPO}:F16")
    assert Path(path).read_bytes() == tiny_llama_f16.read_bytes()
    generated = run_cli("generate", "--model", f"{GGUF_REPO}:F16", "-n", "8", "--temperature", "0", PROMPT, env=hub_env)
    assert generated.returncode == 0, generated.stderr
    expected = _greedy(str(tiny_llama_f16), "llama_cpp")
    assert expected and generated.stdout.rstrip("\n") == expected, "the pulled model is the served model"

    listed = run_cli("list", env=hub_env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(f"{GGUF_REPO}:F16 "))
    assert row.endswith(f"  {fetch.human_size(tiny_llama_f16.stat().st_size)}  {path}"), row


def test_pull_a_safetensors_folder_then_load_it(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, tiny_llama_dir: Path
) -> None:
    pytest.importorskip("transformers")
    pulled = hub.pull(FOLDER_REPO)
    folder = Path(pulled.path)
    assert catalogue.resolve(FOLDER_REPO) == str(folder)
    for source in tiny_llama_dir.iterdir():
        assert (folder / source.name).read_bytes() == source.read_bytes(), source.name
    assert not (folder / "README.md").exists(), "only the files a model folder needs"
    gets = [r.path for r in hub_server.requests if r.method == "GET" and not r.path.startswith("/api/")]
    assert f"/cdn/{FOLDER_REPO}/model.safetensors" in gets, "weights (LFS) come from the CDN redirect"
    assert gets[-1].endswith("/config.json"), "config.json (what makes a folder a model) comes last"
    assert _greedy(FOLDER_REPO, "transformers") == _greedy(str(tiny_llama_dir), "transformers")


def test_a_cut_connection_resumes_and_the_file_is_byte_identical(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, big_gguf: Path
) -> None:
    size = big_gguf.stat().st_size
    hub_server.drop_after[(BIG_REPO, big_gguf.name)] = size * 3 // 4
    pulled = hub.pull(BIG_REPO)
    assert Path(pulled.path).read_bytes() == big_gguf.read_bytes()
    gets = [r for r in hub_server.requests if r.method == "GET" and r.path.endswith(big_gguf.name)]
    assert len(gets) == 2, gets
    assert gets[0].range is None
    assert gets[1].range is not None and gets[1].range.startswith("bytes=")
    resumed_at = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at < size, "the second request resumed from what had arrived instead of restarting"


@pytest.mark.parametrize("hashes_listed", [True, False], ids=["listing-hash", "etag-hash"])
def test_a_corrupt_download_is_refused_and_not_kept(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, hashes_listed: bool
) -> None:
    hub_server.hide_sizes = not hashes_listed  # without the listing's hashes, the ETag's (the blob's name) is checked
    hub_server.corrupt.add((GGUF_REPO, "tiny-llama-F32.gguf"))
    pulled = run_cli("pull", f"{GGUF_REPO}:F32", env=hub_env)
    assert pulled.returncode == 2
    assert "Traceback" not in pulled.stderr
    assert "does not match the hub's checksum" in pulled.stderr and "[checksum_mismatch]" in pulled.stderr
    assert _blobs(hub_env) == [], "the corrupt blob was deleted"
    with pytest.raises(ModelNotFoundError, match="modelhost pull"):
        catalogue.resolve(f"{GGUF_REPO}:F32")
    assert hub.cached_models() == []


def test_a_pull_that_fails_midway_leaves_no_model(hub_env: dict[str, str], hub_server: hubserver.HubServer) -> None:
    # Every GET of the weights is cut off halfway: huggingface_hub resumes a few times, then gives up.
    hub_server.broken.add((FOLDER_REPO, "model.safetensors"))
    with pytest.raises(PullError) as info:
        hub.pull(FOLDER_REPO)
    assert info.value.code == "download_failed" and "model.safetensors" in str(info.value)
    with pytest.raises(ModelNotFoundError):
        catalogue.resolve(FOLDER_REPO)
    assert hub.cached_models() == []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_offline_fails_at_once_with_one_line(hub_env: dict[str, str]) -> None:
    env = hub_env | {"HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    pulled = run_cli("pull", f"{GGUF_REPO}:F32", env=env)
    assert pulled.returncode == 2
    lines = pulled.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in pulled.stderr, pulled.stderr
    assert "cannot reach the model hub" in lines[0] and "[hub_unreachable]" in lines[0]
    assert not Path(env["HF_HUB_CACHE"]).exists() or _blobs(env) == []

    offline = run_cli("pull", f"{GGUF_REPO}:F32", env=hub_env | {"HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2 and "HF_HUB_OFFLINE" in offline.stderr


@pytest.fixture
def hanging_up_hub() -> Iterator[tuple[str, list[int]]]:
    """A TCP port that accepts each connection and closes it unanswered; counts the connections."""
    accepted: list[int] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    server.close()


def test_a_hub_that_hangs_up_is_asked_once_not_retried(
    hub_env: dict[str, str], hanging_up_hub: tuple[str, list[int]]
) -> None:
    url, accepted = hanging_up_hub
    with pytest.raises(PullError) as info:
        hub.pull(f"{GGUF_REPO}:F32", endpoint=url)
    assert info.value.code == "hub_unreachable"
    assert len(accepted) == 1, "no backoff retries before saying the hub is unreachable"


def test_rm_removes_one_quantisation_then_the_repository(hub_env: dict[str, str]) -> None:
    hub.pull(f"{GGUF_REPO}:F32")
    hub.pull(f"{GGUF_REPO}:F16")
    assert [m.name for m in hub.cached_models()] == [f"{GGUF_REPO}:F16", f"{GGUF_REPO}:F32"]
    removed = run_cli("rm", f"{GGUF_REPO}:F16", env=hub_env)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"removed {GGUF_REPO}:F16"
    assert [m.name for m in hub.cached_models()] == [f"{GGUF_REPO}:F32"]
    assert len(_blobs(hub_env)) == 1, "the F16 blob went with it"
    assert catalogue.resolve(GGUF_REPO).endswith("tiny-llama-F32.gguf"), "the only GGUF left is the repo's model"

    assert run_cli("rm", GGUF_REPO, env=hub_env).returncode == 0
    assert hub.cached_models() == [] and _blobs(hub_env) == []
    assert not hub_cache.repo_folder(GGUF_REPO).exists()
    again = run_cli("rm", GGUF_REPO, env=hub_env)
    assert again.returncode == 2 and "not in the cache" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.parametrize(
    "name",
    ["../etc/passwd", "tiny", "a/b/c", "org/x--y", "org/..", "-org/x", "org/x:", "org/x:../../etc", "o/" + "x" * 97],
)
def test_a_name_of_the_wrong_shape_is_refused_before_any_request(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, name: str
) -> None:
    with pytest.raises(PullError) as info:
        hub.pull(name)
    assert info.value.code == "invalid_name"
    assert hub_server.requests == []


def test_refusals_name_what_would_work(hub_env: dict[str, str], hub_server: hubserver.HubServer) -> None:
    with pytest.raises(PullError, match=rf"2 GGUF models; name one: {GGUF_REPO}:F16, {GGUF_REPO}:F32") as info:
        hub.pull(GGUF_REPO)
    assert info.value.code == "ambiguous_model"
    with pytest.raises(PullError, match="no file or quantisation 'Q4_K_M'; it has: F16, F32"):
        hub.pull(f"{GGUF_REPO}:Q4_K_M")
    with pytest.raises(PullError, match="not a GGUF file"):
        hub.pull(f"{GGUF_REPO}:README.md")
    with pytest.raises(PullError, match="no safetensors weights") as info:
        hub.pull("tiny/pickled")
    assert info.value.code == "not_a_model"
    with pytest.raises(PullError, match="no model repository 'tiny/missing'") as info:
        hub.pull("tiny/missing")
    assert info.value.code == "model_not_found"
    assert all(r.path.startswith("/api/models/") for r in hub_server.requests), "nothing but listings was asked for"


def test_the_size_limit_is_checked_before_downloading(hub_env: dict[str, str], hub_server: hubserver.HubServer) -> None:
    refused = run_cli("pull", f"{GGUF_REPO}:F32", "--max-size", "100kB", env=hub_env)
    assert refused.returncode == 2 and "over the pull limit of 100.0 kB" in refused.stderr, refused.stderr
    assert [r.path for r in hub_server.requests] == [f"/api/models/{GGUF_REPO}"]
    bad = run_cli("pull", f"{GGUF_REPO}:F32", "--max-size", "lots", env=hub_env)
    assert bad.returncode == 2 and "--max-size" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("files", "spec", "entry"),
    [
        (["m-Q4_K_M.gguf", "m-Q4_K.gguf"], "Q4_K", "m-Q4_K.gguf"),
        (["m-Q4_K_M.gguf", "m-Q4_K.gguf"], "q4_k_m", "m-Q4_K_M.gguf"),
        (["m.IQ2_XXS.gguf", "m.Q8_0.gguf", "mmproj-m-f16.gguf"], None, None),
        (["m-Q8_0.gguf", "mmproj-m-f16.gguf"], None, "m-Q8_0.gguf"),
        (
            ["Q4/m-Q4_K_M-00002-of-00002.gguf", "Q4/m-Q4_K_M-00001-of-00002.gguf"],
            "Q4_K_M",
            "Q4/m-Q4_K_M-00001-of-00002.gguf",
        ),
        (["config.json", "model.safetensors", "m-Q8_0.gguf"], None, "folder"),
        (["m-Q4_K_M-00001-of-00002.gguf", "m-Q8_0.gguf"], None, "m-Q8_0.gguf"),  # a split set lacking a shard
        (
            ["a/m-Q4-00001-of-00002.gguf", "a/m-Q4-00002-of-00002.gguf"],
            "a/m-Q4-00002-of-00002.gguf",
            "a/m-Q4-00001-of-00002.gguf",
        ),
    ],
)
def test_choose(files: list[str], spec: str | None, entry: str | None) -> None:
    ref = hub_cache.HubRef("org/m", spec)
    if entry is None:
        with pytest.raises(ModelNotFoundError) as info:
            hub_cache.choose(ref, files)
        assert info.value.code == "ambiguous_model" and "org/m:IQ2_XXS, org/m:Q8_0" in str(info.value)
        return
    choice = hub_cache.choose(ref, files)
    if entry == "folder":
        assert choice == hub_cache.Choice(("model.safetensors", "config.json"), None)
    else:
        assert choice.entry == entry and entry in choice.files
        assert len(choice.files) == (2 if "of-00002" in entry else 1)


def test_a_shard_of_an_incomplete_split_set_is_not_a_model() -> None:
    with pytest.raises(ModelNotFoundError, match="other shards are missing"):
        hub_cache.choose(hub_cache.HubRef("org/m", "m-00002-of-00002.gguf"), ["m-00002-of-00002.gguf"])


class _HangUp(Exception):
    """What the Ollama door's progress raises inside huggingface_hub's loop when its client has gone."""


class _HangUpAfterFirstBytes:
    """A PullProgress that gives up at the first bytes, as ollama/pull.py's does once its client hung up."""

    def file_started(self, file: hub.RemoteFile) -> None:
        pass

    def advance(self, file: hub.RemoteFile, nbytes: int) -> None:
        raise _HangUp

    def verifying(self, file: hub.RemoteFile) -> None:
        pass

    def file_done(self, file: hub.RemoteFile) -> None:
        pass


def test_a_pull_abandoned_midway_leaves_no_partial_file(hub_env: dict[str, str]) -> None:
    with pytest.raises(_HangUp):
        hub.download(hub.plan(BIG_REPO), progress=_HangUpAfterFirstBytes())
    assert _model_files(Path(hub_env["HF_HUB_CACHE"])) == []
    assert hub.cached_models() == []


def test_a_full_disk_is_refused_before_or_fails_cleanly_during_a_pull(
    hub_env: dict[str, str], hub_server: hubserver.HubServer, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(small_disk / "hub"))
    with pytest.raises(PullError, match=r"is [0-9.]+ MB but .* has [0-9.]+ MB free") as info:
        hub.pull(BIG_REPO)  # ~20 MB onto 4 MB: the listing's sizes refuse it before any download
    assert info.value.code == "too_large"
    assert [r.path for r in hub_server.requests] == [f"/api/models/{BIG_REPO}"]

    hub_server.hide_sizes = True  # a listing without sizes: the disk fills midway
    with (
        pytest.raises(PullError, match="No space left on device") as info,
        pytest.warns(UserWarning, match="Not enough free disk space"),  # huggingface_hub's own check only warns
    ):
        hub.pull(BIG_REPO)
    assert info.value.code == "download_failed"
    assert _model_files(small_disk) == [], "the partial file went with the failure"
    assert hub.cached_models() == []

    hub_server.hide_sizes = False
    assert Path(hub.pull(f"{GGUF_REPO}:F32").path).is_file(), "the space came back: a model that fits pulls"
