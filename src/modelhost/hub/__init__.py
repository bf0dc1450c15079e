"""Models from a Hugging Face hub: pull one into the local cache (resumable, checksummed), list and remove them.

`pull` and `cache` are the library; `cli` is `modelhost pull | list | rm`. Names and the cache layout they resolve
in live in the contract (modelhost.inference.hub_cache), so the catalogue loads what a pull put there.
"""

from typing import TYPE_CHECKING

from modelhost._lazy import exports

if TYPE_CHECKING:
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

# Imported at first use (modelhost._lazy): `modelhost --version` registers this package's command without them.
__getattr__ = exports(
    __name__,
    {
        "CachedModel": "modelhost.hub.cache",
        "cached_models": "modelhost.hub.cache",
        "remove": "modelhost.hub.cache",
        "PulledModel": "modelhost.hub.fetch",
        "PullError": "modelhost.hub.fetch",
        "PullPlan": "modelhost.hub.fetch",
        "PullProgress": "modelhost.hub.fetch",
        "RemoteFile": "modelhost.hub.fetch",
        "download": "modelhost.hub.fetch",
        "plan": "modelhost.hub.fetch",
        "pull": "modelhost.hub.fetch",
    },
)
