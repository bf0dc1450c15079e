"""The HTTP door: OpenAI-compatible (/v1/*) and Ollama-native (/api/*) routes, health, readiness and metrics.

    server = HttpServer(host, bind_host="127.0.0.1", port=8000, api_key=None, model_name=None)
    await server.start()   # binds at once; /ready says 503 until the host has loaded its model
    print(server.url)
    await server.aclose()

Wire shapes live in `openai_schema`; the routes in `app`; the uvicorn wrapper in `server`.
"""

from modelhost.http.app import HttpMetrics, build_app
from modelhost.http.server import HttpServer

__all__ = ["HttpMetrics", "HttpServer", "build_app"]
