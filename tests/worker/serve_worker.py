"""A worker in its own process, for the durability test: `python serve_worker.py STATE [--no-execute]`.

Prints the URL on stdout once serving, then serves until killed (the test SIGKILLs it).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from helpers import paced_host, start_server


async def main(state: Path, execute: bool) -> None:
    host = await paced_host()
    server = await start_server(host, state, execute=execute)
    print(server.url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), "--no-execute" not in sys.argv))
