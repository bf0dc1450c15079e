"""Models from a Hugging Face hub: pull one into the local cache (resumable, checksummed), list and remove them.

`pull` and `cache` are the library; `cli` is `modelhost pull | list | rm`. Names and the cache layout they resolve
in live in the contract (modelhost.inference.hub_cache), so the catalogue loads what a pull put there.
"""

from modelhost.hub.cache import CachedModel, cached_models, remove
from modelhost.hub.fetch import PulledModel, PullError, PullPlan, PullProgress, RemoteFile, download, plan, pull

__all__ = [
    "CachedModel",
    "PullError",
    "PullPlan",
    "PullProgress",
    "PulledModel",
    "RemoteFile",
    "cached_models",
    "download",
    "plan",
    "pull",
    "remove",
]
