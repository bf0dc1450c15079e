"""The HTTP door: OpenAI-compatible (/v1/*) and Ollama-native (/api/*) routes, health, readiness and metrics.

    server = HttpServer(host, bind_host="127.0.0.1", port=8000, api_key=None, model_name=None)
    await server.start()   # binds at once; /ready says 503 until the host has loaded its model
    print(server.url)
    await server.aclose()

Each protocol is a package: `openai/` and `ollama/`, each with its request and answer shapes (`schema`,
`embeddings`), its stream writers (`streams`) and its route handlers (`handlers`). What both share: `errors` (the
error table and bodies), `parsing` (bounded body, JSON, ParsedRequest), `images` (data URIs, base64), `door` (route,
admit, submit), `relay` (events to a client), `tools`, `reasoning`, `embeddings`. `docling/` is docling-serve's
document API, `ui/` the page for people at / (docs/ui.md). `app` composes the routes; `server` runs them under
uvicorn.
"""

from modelhost.http.app import build_app
from modelhost.http.metrics import HttpMetrics
from modelhost.http.server import HttpServer

__all__ = ["HttpMetrics", "HttpServer", "build_app"]
