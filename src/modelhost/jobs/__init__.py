"""Durable jobs, below the doors that take them: the job worker (giz's protocol v1, modelhost.worker) and the
docling door's tasks (modelhost.http.docling) each run a board of their own on these parts, side by side.

- `schema`: a job's record (its `job.json`) and the vocabulary of its fields: statuses, stages, failure codes,
  input file references, ids; `Failure` (how a job ends badly) and `ApiError` (the board's refusals: 400, 404,
  409, 429, 507).
- `store`: the durable job folders (group commit, kill -9 safe, one process per folder).
- `board`: every job's state, the run queue, capacity, intake, idempotency, cancel and ack; the only code that
  changes a record.
- `executor`: runs the board's jobs through their operations, as many at once as the model decodes.
- `operation`: what an operation is (`Operation`) and what a running job gets (`JobContext`: progress, cancel, the
  host); `submit_to_host` for model work.
- `documents`: `document.convert`, the operation both doors run; `cluster`: what a `"ray": true` job needs.
- `metrics`: a board's Prometheus metrics.

Nothing here imports a door: a door builds a board and a runner over a store and serves them in its own wire format.
"""
