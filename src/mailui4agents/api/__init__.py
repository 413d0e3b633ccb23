"""HTTP routes, one module per resource. Thin: parse, call a service, shape."""
