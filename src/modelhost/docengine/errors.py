"""The engine's one deliberate error: a document (or one of its pages) that cannot be read, named by file."""

from __future__ import annotations

from modelhost.errors import REFUSED, InvalidInputError


class DocumentError(InvalidInputError):
    """A document that cannot be read (missing, encrypted, broken, empty, hostile, not a PDF or image); the message
    starts with the file's name as the user knows it (an upload's own name, never an internal path)."""

    code = "invalid_document"
    kind = REFUSED
