"""The OpenAI-compatible door (/v1/*): request and answer shapes (`schema`, `embeddings`), streamed answers
(`streams`), and the route handlers (`handlers`)."""
