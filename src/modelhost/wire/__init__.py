"""The local wire: inferd's generation protocol v2 (wire_version 1), as pdf-spec's Go ``ipc`` package speaks it.

Everything a byte of this protocol means lives in :mod:`modelhost.wire.codec` (constants, frame parsing, JSON
shapes, validation). The socket server and the client are built on it and hold no wire knowledge of their own.
"""
