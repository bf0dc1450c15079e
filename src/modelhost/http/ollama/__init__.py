"""The Ollama-compatible door (/api/*): request and answer shapes (`schema`, `embeddings`), streamed answers
(`streams`), what it says about its models (`models`: keep_alive, /api/ps, /api/show), and the route handlers
(`handlers`)."""
