"""JSON that has no shape of ours: a tool's input, an OpenAPI fragment, an event's
or an error's payload as it came over the wire, a request body being built. Where a
value has a shape of ours it has a type (wire/models.py, web/shapes.py); this alias
says, where it is used, that it has none. Pure: the hook's light client uses it."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
