"""The job store on real folders: restart rules, atomic replacement, both sync modes, the state folder's lock."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from modelhost.jobs.store import JobStore, default_sync_mode
from modelhost.worker import protocol


def record(n: int, status: str = protocol.QUEUED) -> protocol.Record:
    r = protocol.new_record(f"{n:032x}", "test.echo", "paced", "{}", created=1000 + n)
    r.status = status
    return r


def write(state: Path, r: protocol.Record) -> None:
    (state / r.id).mkdir(parents=True)
    (state / r.id / "job.json").write_bytes(protocol.encode_record(r))


def test_restore_rules(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write(state, record(3))
    write(state, record(1))
    write(state, record(2, protocol.PROCESSING))
    write(state, record(4, protocol.COMPLETED))
    (state / f"{5:032x}").mkdir()  # a job folder without job.json: never acknowledged
    (state / f"{6:032x}").mkdir()
    (state / f"{6:032x}" / "job.json").write_bytes(protocol.encode_record(record(6))[:-10])  # torn write
    write(state, record(7))
    (state / f"{7:032x}" / "job.json").write_bytes(protocol.encode_record(record(8)))  # id of another folder
    (state / ".incoming-abc" / "inputs").mkdir(parents=True)
    (state / ".trash-xyz").mkdir()
    (state / "notes").mkdir()  # not ours: left alone
    store = JobStore(state)
    store.open()
    restored = store.restore(now=5000)
    store.close_files()
    assert [(r.id[-1], r.status) for r in restored] == [
        ("1", "queued"),
        ("2", "failed"),
        ("3", "queued"),
        ("4", "completed"),
    ]
    interrupted = protocol.decode_record((state / f"{2:032x}" / "job.json").read_bytes())
    assert interrupted.code == protocol.WORKER_INTERRUPTED and interrupted.completed == 5000
    assert sorted(p.name for p in state.iterdir()) == sorted([".lock", "notes", *(f"{n:032x}" for n in (1, 2, 3, 4))])


@pytest.mark.parametrize("sync", sorted({"fsync", default_sync_mode()}))
def test_create_save_remove(tmp_path: Path, sync: str) -> None:
    async def main() -> None:
        store = JobStore(tmp_path / "state", sync=sync)  # type: ignore[arg-type]
        store.start()
        records = [record(n) for n in range(20)]
        await asyncio.gather(*(store.create(r) for r in records))
        r = records[0]
        r.status = protocol.PROCESSING
        first = store.save(r)
        r2 = protocol.decode_record(protocol.encode_record(r))
        r2.status = protocol.COMPLETED
        await asyncio.gather(first, store.save(r2))  # two saves of one job in flight: the newest wins
        assert protocol.decode_record((store.job_dir(r.id) / "job.json").read_bytes()).status == protocol.COMPLETED
        assert not (store.job_dir(r.id) / "job.json.tmp").exists()
        staging = store.new_staging()
        (staging / "inputs" / "1.bin").write_bytes(b"data")
        upload = record(99)
        await store.create(upload, staging, [staging / "inputs" / "1.bin"])
        assert (store.inputs_dir(upload.id) / "1.bin").read_bytes() == b"data" and not staging.exists()
        await store.remove(records[1].id)
        assert not store.job_dir(records[1].id).exists()
        await store.aclose()
        again = JobStore(tmp_path / "state")
        again.open()
        assert len(again.restore(now=1)) == 20
        again.close_files()

    asyncio.run(main())


def test_a_state_folder_serves_one_worker(tmp_path: Path) -> None:
    first = JobStore(tmp_path / "state")
    first.open()
    with pytest.raises(RuntimeError, match="in use"):
        JobStore(tmp_path / "state").open()
    first.close_files()
    second = JobStore(tmp_path / "state")
    second.open()
    second.close_files()
    shutil.rmtree(tmp_path / "state")


def test_a_key_resubmitted_while_its_job_is_being_acked_makes_a_new_job(tmp_path: Path) -> None:
    """Ack, then the same idempotency key again before the ack's removal is done: the new job must be created (not
    refused because the old folder is still there) and must stay on the board (not popped by the finishing ack)."""
    from modelhost.jobs.board import JobBoard, Reservation
    from modelhost.jobs.metrics import JobMetrics

    async def main() -> None:
        store = JobStore(tmp_path)
        store.open()
        store.restore(protocol.now_ms())
        store.start()
        board = JobBoard(store, capacity=4, models=[("paced", "test.echo")], metrics=JobMetrics(), journal=print)
        first = await board.reserve("test.echo", "paced", "k")
        assert isinstance(first, Reservation)
        old = await board.commit(first, '{"n": 1}')
        job = await board.next_job()
        assert job is not None and job.id == old.id
        await board.finish(job, outputs=[])
        ack = asyncio.create_task(board.ack(old.id))
        await asyncio.sleep(0)  # the ack has begun: the job is being removed
        again = await board.reserve("test.echo", "paced", "k")
        assert isinstance(again, Reservation)
        new = await board.commit(again, '{"n": 2}')
        await ack
        assert new.id == old.id and board.get(new.id).input == '{"n": 2}'
        assert (tmp_path / new.id / "job.json").is_file() and board.queued == 1
        assert (await board.next_job()) is board.get(new.id)
        await store.aclose()

    asyncio.run(main())


def test_a_multipart_request_cancelled_while_its_job_commits_keeps_the_job_whole(tmp_path: Path) -> None:
    """The request's task cancelled (server shutdown) during the shielded commit: the commit still makes the job
    durable, so the request must neither give its slot back a second time nor delete the staging folder under it."""
    from starlette.requests import Request

    from modelhost.jobs.board import JobBoard
    from modelhost.jobs.metrics import JobMetrics
    from modelhost.worker.submission import submit_multipart

    async def main() -> None:
        store = JobStore(tmp_path)
        store.open()
        store.restore(protocol.now_ms())
        store.start()
        board = JobBoard(store, capacity=4, models=[("paced", "test.echo")], metrics=JobMetrics(), journal=print)
        gate = asyncio.Event()
        writing = asyncio.Event()
        create = store.create

        async def slow_create(*args: object, **kwargs: object) -> None:
            writing.set()
            await gate.wait()
            await create(*args, **kwargs)  # type: ignore[arg-type]

        store.create = slow_create  # type: ignore[method-assign]
        request_json = b'{"operation": "test.echo", "model": "paced", "input": {"pic": {"$file": "photo"}}}'
        body = (
            b'--B\r\nContent-Disposition: form-data; name="request"\r\n\r\n' + request_json + b"\r\n"
            b'--B\r\nContent-Disposition: form-data; name="photo"; filename="a.png"\r\n\r\nPNGDATA\r\n--B--\r\n'
        )
        sent = False

        async def receive() -> dict[str, object]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()
            raise AssertionError

        headers = [(b"content-type", b"multipart/form-data; boundary=B"), (b"content-length", b"%d" % len(body))]
        scope = {"type": "http", "method": "POST", "path": "/v1/jobs", "headers": headers}
        task = asyncio.create_task(submit_multipart(Request(scope, receive), board, 1 << 20))
        await writing.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        for _ in range(500):
            if board.queued:
                break
            await asyncio.sleep(0.01)
        assert board.queued == 1 and board.held == 1
        [job_id] = [p.name for p in tmp_path.iterdir() if protocol.is_job_id(p.name)]
        assert [p.name for p in (tmp_path / job_id / "inputs").iterdir()] == ["1.png"]
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".incoming-")]
        await store.aclose()

    asyncio.run(main())
