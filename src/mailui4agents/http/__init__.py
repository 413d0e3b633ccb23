"""HTTP pieces the REST API (api/) and the web pages (web/) share: the event
stream response, file uploads and downloads, the web session cookie and its
CSRF token. Neither adapter imports the other (tests/architecture/test_adapters.py);
what both need of HTTP lives here, and what both need of the gateway in services/."""
