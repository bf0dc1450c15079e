"""modelhost beyond one machine, on Ray (the optional extra `modelhost[ray]`).

- `serving`: N replicas, each a whole modelhost host (models loaded once, its own continuous batching), behind
  Ray Serve's HTTP ingress with the same OpenAI/Ollama routes (`modelhost serve --ray ADDRESS --replicas N`, or
  `serving.application(...)` in a Serve app of your own).
- `documents`: a document's pages spread over an actor pool of document engines on Ray Data
  (`modelhost convert --ray ADDRESS FILES...`); `pages` is that pool's actor.
- `jobs`: a worker's `"ray": true` jobs (`modelhost serve --worker ... --ray ADDRESS`): `document.convert` over the
  same pool, `text.embed` over a pool of embedders (`embeddings`), each stoppable at once (`pool`, `actor`).
- `metrics`: every replica's metrics in one view (`/replicas/metrics`).
- `cluster`: joining a cluster (address, token auth) with one clear error when that fails.

Nothing here is imported by the rest of modelhost, and this package imports `ray` only inside its modules, never
here: `import modelhost` costs what it did, and a machine without Ray loses nothing but these commands.
docs/cluster.md says how to run a real cluster.
"""
