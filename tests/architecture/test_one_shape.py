"""Each rule has one encoding (CONTRIBUTING.md, "Adding a mail field";
services/access.py): no module but services/access.py orders a session's
deciders (DECIDER_ORDER, deciders_stmt), and no module but services/wire_shapes.py
lists the keys of a mail (mail_item); times are written as text only by
domain/times.py; every mail type in the code is a MailType."""

from __future__ import annotations

import ast
import functools

from tests.architecture.test_import_graph import ROOT, module_name


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every module of src/, parsed once for all the walks of this file."""
    return {
        module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(ROOT.rglob("*.py"))
    }


def _orders_deciders(tree: ast.Module) -> bool:
    """An `.order_by(...)` (or `.desc()`/`.asc()`) on a SessionDeciderRow column."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in ("order_by", "desc", "asc"):
            continue
        if "SessionDeciderRow" in ast.unparse(node):
            return True
    return False


def _dict_with_keys(tree: ast.Module, keys: set[str]) -> bool:
    """A dict literal naming all of `keys`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            named = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if keys <= named:
                return True
    return False


def test_only_access_orders_a_sessions_deciders() -> None:
    found = [name for name, tree in _modules().items() if _orders_deciders(tree)]
    assert found == ["mailui4agents.services.access"]


# Keys only a whole mail has, together: a second builder would name them all.
MAIL_KEYS = {"reply_address", "self_address", "body_truncated", "in_reply_to"}


def test_only_the_builder_lists_a_mails_keys() -> None:
    found = [name for name, tree in _modules().items() if _dict_with_keys(tree, MAIL_KEYS)]
    assert found == ["mailui4agents.services.wire_shapes"]


def test_the_walkers_see_what_they_look_for() -> None:
    second = ast.parse(
        "stmt.order_by(SessionDeciderRow.role.desc())\n"
        + "x = {"
        + ", ".join(f"{k!r}: 1" for k in sorted(MAIL_KEYS))
        + "}\n"
    )
    assert _orders_deciders(second) and _dict_with_keys(second, MAIL_KEYS)


def test_only_domain_times_writes_a_time_as_text() -> None:
    """One formatter (domain/times.rfc3339): a second spelling of it drifts
    (one once dropped the `Z`)."""
    found = [
        name
        for name, tree in _modules().items()
        if any(isinstance(n, ast.Constant) and n.value == "+00:00" for n in ast.walk(tree))
    ]
    assert found == ["mailui4agents.domain.times"]


def test_every_stored_mail_type_is_a_member_of_the_enum() -> None:
    """The words the web shows and the types the services write are the enum's."""
    from mailui4agents.domain.mail_types import MailType
    from mailui4agents.web.render import TYPE_WORDS

    assert set(TYPE_WORDS) - {"question"} == set(MailType)
    written = {
        ast.unparse(kw.value)
        for name, tree in _modules().items()
        if not name.startswith("mailui4agents.db.migrations")  # Alembic's own type_
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "type_" and isinstance(kw.value, ast.Constant)
    }
    assert written == set(), f"mail types written as strings: {written}"


# Calls that may take a bare True/False: SQL's `.is_(True)`, `dict.get(k, False)`,
# `principal_key(name, is_human)` (a key's two parts, everywhere), the SQLite
# adapter's private `_call` (its signature is the library's).
POSITIONAL_BOOL_OK = {"is_", "get", "principal_key", "_call"}


def _positional_bools(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in POSITIONAL_BOOL_OK:
            continue
        if any(isinstance(a, ast.Constant) and isinstance(a.value, bool) for a in node.args):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_call_passes_a_bare_boolean_by_position() -> None:
    """`deliver(s, session, name, False, [(h, True, "to")])` said nothing: a flag
    is passed by name (keyword-only parameters) or is a named type."""
    found = {name: hits for name, tree in _modules().items() if (hits := _positional_bools(tree))}
    assert found == {}
    assert _positional_bools(ast.parse("announce(s, row, 'x', False)")) != []
