"""`agentmail serve`: the gateway in one process (API, SSE, UI, scheduler)."""

from __future__ import annotations

import gc
import ipaddress
import socket
import ssl
import sys
from pathlib import Path

import click

REMOTE_DOC = "docs/remote.md"


def _print_admin_password(password: object) -> None:
    click.echo(
        "\n"
        "  Created the first admin.\n"
        "    username: admin\n"
        f"    password: {password}\n"
        "  This password is shown only now. Log in with `agentmail login`.\n",
        err=True,
    )
    sys.stderr.flush()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _plain_http_warning(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return (
        f"agentmail: WARNING: plain http on {shown}:{port}, which is not a loopback "
        "address: passwords, session cookies and agent keys travel in clear text. "
        "Serve https with --tls-cert FILE --tls-key FILE, or bind 127.0.0.1 behind an "
        f"https proxy with --forwarded-allow-ips 127.0.0.1 (see {REMOTE_DOC})."
    )


def _check_tls(cert: Path | None, key: Path | None) -> None:
    """Both or neither; and loadable now, not as a traceback once uvicorn starts."""
    if cert is None and key is None:
        return
    if key is None:
        raise click.UsageError("--tls-cert needs --tls-key (the certificate's private key)")
    if cert is None:
        raise click.UsageError("--tls-key needs --tls-cert (the certificate chain)")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise click.UsageError(f"--tls-cert {cert} / --tls-key {key}: cannot load: {exc}") from exc


def _root_path(value: str) -> str:
    value = value.strip().rstrip("/")
    if value and (not value.startswith("/") or "//" in value or "?" in value or "#" in value):
        raise click.BadParameter("a path such as /agentmail", param_hint="--root-path")
    return value


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8025, show_default=True, type=int, help="0 picks a free port.")
@click.option(
    "--data-dir",
    default="./agentmail-data",
    show_default=True,
    envvar="AGENTMAIL_DATA_DIR",
    type=click.Path(path_type=Path, file_okay=False),
)
@click.option(
    "--database-url",
    default=None,
    envvar="AGENTMAIL_DATABASE_URL",
    help="PostgreSQL URL (postgresql://…); default: SQLite in the data dir.",
)
@click.option("--log-level", default="info", show_default=True)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="AGENTMAIL_LOG_FORMAT",
    help="text: one readable line per entry; json: one JSON object per line. Each "
    "request logs one line with its id (the X-Request-Id header), method, route "
    'template, status and duration (docs/api.md, "Request ids and logs").',
)
@click.option(
    "--forwarded-allow-ips",
    default="",
    envvar="AGENTMAIL_FORWARDED_ALLOW_IPS",
    help="Comma-separated addresses (or networks) of proxies whose X-Forwarded-For "
    "and X-Forwarded-Proto are believed; default: nobody's, the client address is "
    "the peer's. Login limits count per client address.",
)
@click.option(
    "--tls-cert",
    default=None,
    envvar="AGENTMAIL_TLS_CERT",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="Serve https: the PEM certificate chain (with --tls-key). See docs/remote.md.",
)
@click.option(
    "--tls-key",
    default=None,
    envvar="AGENTMAIL_TLS_KEY",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The PEM private key of --tls-cert.",
)
@click.option(
    "--root-path",
    default="",
    envvar="AGENTMAIL_ROOT_PATH",
    help="The path prefix a proxy serves the gateway under (it strips it before "
    "forwarding), e.g. /agentmail: for the API and agents' clients; the web UI "
    "wants a host of its own (docs/remote.md).",
)
@click.option(
    "--push-endpoint-allow",
    "push_endpoint_allow",
    multiple=True,
    metavar="URL_PREFIX",
    help="Allow push endpoints starting with this prefix (repeatable), besides the "
    'default rule: https to public addresses only (docs/remote.md, "Push"). '
    "Environment: AGENTMAIL_PUSH_ENDPOINT_ALLOW, space-separated.",
)
@click.option(
    "--smtp-url",
    default=None,
    metavar="URL",
    help="Send e-mail through this relay: smtp://user@host:587 (STARTTLS) or "
    "smtps://user@host:465; no password in it (docs/email.md).",
)
@click.option(
    "--smtp-password-file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A file whose first line is the SMTP password (else AGENTMAIL_SMTP_PASSWORD).",
)
@click.option(
    "--mail-from",
    default=None,
    metavar="ADDRESS",
    help="The From address of the gateway's e-mail, e.g. agentmail@example.org.",
)
@click.option(
    "--imap-url",
    default=None,
    metavar="URL",
    help="Fetch replies from this mailbox: imaps://user@host:993/INBOX, or imap://… "
    '(STARTTLS); no password in it (docs/email.md, "Receiving").',
)
@click.option(
    "--imap-password-file",
    default=None,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A file whose first line is the IMAP password (else AGENTMAIL_IMAP_PASSWORD).",
)
@click.option(
    "--smtp-listen",
    default=None,
    metavar="HOST:PORT",
    help="Take replies by SMTP on this address, from your own MX (docs/email.md).",
)
@click.option(
    "--require-dkim",
    is_flag=True,
    default=None,
    help="Accept a reply only with a verifying DKIM signature of its From domain.",
)
def serve(
    host: str,
    port: int,
    data_dir: Path,
    database_url: str | None,
    log_level: str,
    log_format: str,
    forwarded_allow_ips: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    root_path: str,
    push_endpoint_allow: tuple[str, ...],
    smtp_url: str | None,
    smtp_password_file: Path | None,
    mail_from: str | None,
    imap_url: str | None,
    imap_password_file: Path | None,
    smtp_listen: str | None,
    require_dkim: bool | None,
) -> None:
    """Run the gateway. Migrations are applied at start."""
    _check_tls(tls_cert, tls_key)
    root_path = _root_path(root_path)
    import uvicorn

    from mailui4agents import logs
    from mailui4agents.app import create_app
    from mailui4agents.http_protocol import LOOP, with_header_limits
    from mailui4agents.settings import Settings

    try:
        settings = Settings.from_env(
            data_dir=data_dir,
            database_url=database_url,
            push_endpoint_allow=push_endpoint_allow or None,
            smtp_url=smtp_url,
            smtp_password_file=smtp_password_file,
            mail_from=mail_from,
            imap_url=imap_url,
            imap_password_file=imap_password_file,
            smtp_listen=smtp_listen,
            require_dkim=require_dkim,
        )
    except ValueError as exc:  # pydantic's ValidationError: say which setting, not a traceback
        raise click.UsageError(str(exc)) from exc
    if settings.smtp_url is not None or settings.imap_url is not None:
        # An unreadable password file stops the start here.
        from mailui4agents.services.email_send import EmailNotConfigured, password_from

        try:
            if settings.smtp_url is not None:
                password_from(settings.smtp_password_file, settings.smtp_password, "SMTP")
            if settings.imap_url is not None:
                password_from(settings.imap_password_file, settings.imap_password, "IMAP")
        except EmailNotConfigured as exc:
            raise click.UsageError(str(exc)) from exc
    _refuse_a_newer_schema(settings.resolved_database_url())
    app = create_app(settings, on_admin_password=_print_admin_password)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=logs.config(log_format, log_level),
        # Our own line per request replaces uvicorn's (http/observe.py): the
        # route template, never the path and query (they may hold tokens).
        access_log=False,
        timeout_graceful_shutdown=5,
        # An idle kept-alive connection is closed by the header timer at
        # header_timeout_s (10 s), not by uvicorn's 5 s: httpx clients keep one
        # for 5 s, and equal timeouts raced (a reused connection closing as a
        # request went out: a POST lost with ReadError).
        timeout_keep_alive=int(settings.header_timeout_s) + 1,
        loop=LOOP,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise:
        # any local process could then name a new address per login attempt and
        # dodge the per-address login limit. Only the proxies named here.
        proxy_headers=bool(forwarded_allow_ips.strip()),
        # The scheme too (X-Forwarded-Proto: https, hence Secure cookies) is
        # taken only from these proxies (uvicorn's ProxyHeadersMiddleware).
        forwarded_allow_ips=forwarded_allow_ips.strip() or None,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        root_path=root_path,
        http=with_header_limits(settings.header_timeout_s, body_seconds=settings.body_timeout_s),
    )
    server = uvicorn.Server(config)

    # Print the bound address once listening, so `--port 0` is usable by scripts.
    original_startup = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets=sockets)
        # What exists now (modules, the app, its routes, mappers, settings) lives
        # as long as the process: out of the collector's reach, a full collection
        # no longer walks it. That walk was a pause of about 110 ms for every
        # request in flight, each time the collector ran one (bench/gc_pause.py).
        gc.freeze()
        scheme = "https" if tls_cert is not None else "http"
        exposed: list[tuple[str, int]] = []
        for srv in server.servers:
            for sock in srv.sockets:
                h, p = sock.getsockname()[:2]
                shown = f"[{h}]" if ":" in h else h
                click.echo(f"agentmail: listening on {scheme}://{shown}:{p}", err=True)
                if tls_cert is None and not _is_loopback(h):
                    exposed.append((h, p))
        for h, p in exposed:
            click.echo(_plain_http_warning(h, p), err=True)
        sys.stderr.flush()

    server.startup = startup  # type: ignore[method-assign]

    # SIGINT/SIGTERM: open event streams end now, so the graceful shutdown does
    # not wait out its timeout for them (http/event_stream.py, events/hub.py).
    original_exit = server.handle_exit

    def handle_exit(sig: int, frame: object) -> None:
        gw = getattr(app.state, "gateway", None)
        if gw is not None:
            gw.hub.drain()
        original_exit(sig, frame)  # type: ignore[arg-type]

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    server.run()


def _refuse_a_newer_schema(url: str) -> None:
    """A database that a newer agentmail migrated stops the start with one clear
    line (docs/behaviour.md#operations, "Upgrades")."""
    import anyio

    from mailui4agents.db.migrate import SchemaTooNew, check_not_newer

    try:
        anyio.run(check_not_newer, url)
    except SchemaTooNew as exc:
        raise click.ClickException(str(exc)) from exc
