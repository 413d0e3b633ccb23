"""The HTTP side of the client (client/client.py has the API's calls): one
httpx connection pool, the caller's credentials on every request, every non-2xx
answer as an :class:`ApiError`, a gateway out of reach as
:class:`GatewayUnreachable`, and cursor paging."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, BinaryIO, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from mailui4agents.client.config import ClientConfig
from mailui4agents.client.errors import ApiError, GatewayUnreachable
from mailui4agents.client.models import Page
from mailui4agents.domain.json_types import JsonObject

M = TypeVar("M", bound=BaseModel)
API = "/api/v1"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


class Transport:
    """Connections, credentials, errors and paging; the calls live in AsyncClient."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        reconnect_initial: float = 0.2,
        reconnect_cap: float = 10.0,
    ) -> None:
        self.config = config
        self._reconnect = (reconnect_initial, reconnect_cap)
        self._http = httpx.AsyncClient(base_url=config.url, transport=transport, timeout=timeout)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the underlying connections."""
        await self._http.aclose()

    def _auth_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.config.credential:
            headers["Authorization"] = f"Bearer {self.config.credential}"
        if self.config.is_agent and self.config.agent_name:
            headers["X-Agent-Name"] = self.config.agent_name
        return headers

    def _agent_only(self, **options: object) -> None:
        given = sorted(name for name, value in options.items() if value is not None)
        if given and not self.config.is_agent:
            raise ValueError(f"only agents may pass {', '.join(given)}")

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        auth: bool = True,
        files: Any = None,
        raw: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        headers = {**(self._auth_headers() if auth else {}), **(headers or {})}
        try:
            response = await self._http.request(
                method,
                API + path,
                json=json,
                params=query_params(params),
                headers=headers,
                files=files,
            )
        except httpx.TransportError as exc:
            raise GatewayUnreachable(self.config.url, exc) from exc
        if not response.is_success:
            raise ApiError.from_response(response)
        if raw:
            return response.content
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            message = f"{method} {path} answered {response.status_code} with a non-JSON body"
            raise ApiError(response.status_code, "invalid_response", message) from exc

    async def _download(
        self, path: str, params: Mapping[str, Any], out: BinaryIO, chunk: int = 64 * 1024
    ) -> int:
        """GET `path` and write the answer's body to `out` as it arrives (never
        whole in memory); the bytes written. Errors as `_call`'s."""
        written = 0
        try:
            async with self._http.stream(
                "GET", API + path, params=query_params(params), headers=self._auth_headers()
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise ApiError.from_response(response)
                async for part in response.aiter_bytes(chunk):
                    out.write(part)
                    written += len(part)
        except httpx.TransportError as exc:
            raise GatewayUnreachable(self.config.url, exc) from exc
        return written

    async def _page(self, path: str, params: Mapping[str, Any], model: type[M]) -> Page[M]:
        data = as_dict(await self._call("GET", path, params=params))
        return Page[model].model_validate(data)  # type: ignore[valid-type]

    async def _pages(
        self, path: str, params: Mapping[str, Any], model: type[M]
    ) -> AsyncIterator[Page[M]]:
        cursor: str | None = None
        while True:
            page = await self._page(path, {**params, **without_none(cursor=cursor)}, model)
            yield page
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def _people(
        self, path: str, model: type[M], add: str | None, remove: str | None
    ) -> list[M]:
        """A list of people at `path` (POST `{name}` adds, DELETE `…/name` removes)."""
        if add is not None:
            await self._call("POST", path, json={"name": add})
        if remove is not None:
            await self._call("DELETE", f"{path}/{seg(remove)}")
        return (await self._page(path, {}, model)).items

    async def _all(self, path: str, model: type[M]) -> list[M]:
        items: list[M] = []
        async for page in self._pages(path, {}, model):
            items.extend(page.items)
        return items


def without_none(**values: Any) -> JsonObject:
    return {name: value for name, value in values.items() if value is not None}


def query_params(params: Mapping[str, Any] | None) -> dict[str, str | int] | None:
    if not params:
        return None
    # httpx would send Python's True as "True"; the gateway expects true|false.
    return {
        name: ("true" if value else "false") if isinstance(value, bool) else value
        for name, value in params.items()
    }


def seg(value: str) -> str:
    """Quote one path segment (names and ids rarely need it, but a '/' must not split it)."""
    return quote(value, safe="")


def as_dict(data: Any) -> JsonObject:
    if not isinstance(data, dict):
        raise ApiError(None, "invalid_response", f"expected a JSON object, got {data!r:.200}")
    return data
