"""Keep relay keys within the gateway's size limit without losing uniqueness.

A relay key must be unique per tool call (docs/behaviour.md#approval-round-trip). Hooks build it
from
platform ids (session id, tool-use id, agent id ...), which can be long. Simply
cutting a long key would make two different calls that share a long prefix
collide — the second then gets ``duplicate_relay`` and is denied for nothing.
So a long key keeps a readable prefix (for people reading logs) and ends with
the SHA-256 of the *whole* key (for uniqueness). The result is deterministic,
so a retried post of the same call produces the same key and is recognised.
"""

from __future__ import annotations

RELAY_KEY_MAX_BYTES = 160

_HASH_MARK = ":sha256:"
# ":sha256:" plus 64 hex digits, all ASCII.
_SUFFIX_BYTES = len(_HASH_MARK) + 64


def clamp_relay_key(key: str, max_bytes: int = RELAY_KEY_MAX_BYTES) -> str:
    """Return ``key`` unchanged when it fits in ``max_bytes`` UTF-8 bytes, else a
    readable prefix + ``:sha256:`` + the hex digest of the whole key.

    The prefix is cut on a character boundary, so the result is valid UTF-8 and
    never longer than ``max_bytes``. A result always fits, so clamping it again
    leaves it unchanged.

    A key that is not valid Unicode text (lone surrogates, which cannot be
    encoded as UTF-8 or sent as JSON) is always replaced, whatever its length:
    its prefix is encoded with replacement characters and the digest is taken
    over its ``surrogatepass`` bytes, so different such keys stay different.

    Raises ``ValueError`` when ``max_bytes`` cannot even hold the digest suffix
    (a programming error, not a runtime condition).
    """
    if max_bytes < _SUFFIX_BYTES:
        raise ValueError(f"max_bytes must be at least {_SUFFIX_BYTES}, got {max_bytes}")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        whole = key.encode("utf-8", "surrogatepass")
        readable = key.encode("utf-8", "replace")
    else:
        if len(encoded) <= max_bytes:
            return key
        whole = readable = encoded
    budget = max_bytes - _SUFFIX_BYTES
    # Cutting the bytes may split the last character; "ignore" drops only that
    # incomplete tail, because everything before it is valid UTF-8.
    prefix = readable[:budget].decode("utf-8", "ignore")
    import hashlib  # here: most keys fit, and the hook's fast path never clamps

    return prefix + _HASH_MARK + hashlib.sha256(whole).hexdigest()


def hook_relay_key(platform: str, session: str, tool_use_id: str | None) -> str:
    """A hook's key: unique per tool call (never per session+tool), within 160 bytes.

    Without a platform tool-use id a random one is used: a retry of the same
    call then asks again, which is the safe mistake (a shared key would make
    a second, different call ``duplicate_relay`` and deny it).
    """
    if tool_use_id:
        return clamp_relay_key(f"hook:{platform}:{session}:{tool_use_id}")
    import uuid  # here, not at the top: the hook's read-only fast path never needs it

    return clamp_relay_key(f"hook:{platform}:{session}:{uuid.uuid4()}")


def ask_relay_key(session_id: str) -> str:
    """The MCP ``ask_human`` tool's key: unique per call, so asking the same
    question twice asks twice."""
    import uuid

    return clamp_relay_key(f"mcp:ask:{session_id}:{uuid.uuid4()}")
