"""Email addresses, normalised and checked in one place: accounts (registration, sign-in, reset),
invitations, assessors, look-ups by address and a competition's allow-list of domains all go
through `normalize_email` and `normalize_domain`, so that one mailbox is one address everywhere.

The one form: surrounding blanks dropped, lower case, one trailing dot of the domain dropped (the
DNS root: `ann@x.org.` is `ann@x.org`). Refused: no `@` or more than one, an empty local part, a
local part that starts or ends with a dot or holds two in a row, a domain with an empty label
(`u@.b.org`, `u@b..org`), a label that starts or ends with a hyphen, a domain of one label, blanks,
control characters and the characters that delimit addresses in a header.
"""

from __future__ import annotations

MAX_EMAIL = 320
MAX_LOCAL = 64
MAX_LABEL = 63
_FORBIDDEN = set(' \t\r\n<>()[]\\,;:"@')


class BadEmail(ValueError):
    """Not an email address; the message says why."""


def normalize_domain(text: str) -> str:
    """A domain in its one form (lower case, no trailing dot, no leading `@` of an allow-list
    entry); BadEmail where it has an empty label, one label only or a character no domain has."""
    d = (text or "").strip().lower()
    if d.startswith("@"):
        d = d[1:]
    if d.endswith("."):
        d = d[:-1]
    labels = d.split(".")
    if len(labels) < 2:
        raise BadEmail(f"{text!r} is not an email domain (it needs a dot)")
    for label in labels:
        if not label:
            raise BadEmail(f"{text!r} is not an email domain (an empty label)")
        if len(label) > MAX_LABEL or label[0] == "-" or label[-1] == "-":
            raise BadEmail(f"{text!r} is not an email domain (label {label!r})")
        if not all(c.isalnum() or c == "-" for c in label):
            raise BadEmail(f"{text!r} is not an email domain (label {label!r})")
    return ".".join(labels)


def normalize_email(text: str) -> str:
    """The address in its one form; BadEmail, saying why, where it is not an address."""
    e = (text or "").strip()
    if not e or len(e) > MAX_EMAIL:
        raise BadEmail("that is not an email address")
    if any(ord(c) < 32 or ord(c) == 127 for c in e):
        raise BadEmail("that is not an email address (a control character)")
    local, at, domain = e.lower().rpartition("@")
    if not at or not local:
        raise BadEmail("that is not an email address (it needs a name before an @)")
    if len(local) > MAX_LOCAL or any(c in _FORBIDDEN for c in local):
        raise BadEmail("that is not an email address (the part before the @)")
    if local.startswith(".") or local.endswith(".") or ".." in local:
        raise BadEmail("that is not an email address (a dot at the start, end or twice)")
    try:
        domain = normalize_domain(domain) if not domain.startswith("@") else ""
    except BadEmail:
        domain = ""
    if not domain:
        raise BadEmail("that is not an email address (the domain after the @)")
    return f"{local}@{domain}"


def is_email(text: str) -> bool:
    try:
        normalize_email(text)
    except BadEmail:
        return False
    return True


def lookup_form(text: str) -> str:
    """The form to look an address up by: its one form, or (not an address) the text lower-cased,
    which matches no account."""
    try:
        return normalize_email(text)
    except BadEmail:
        return (text or "").strip().lower()


def domain_of(email: str) -> str | None:
    """The domain of an address in its one form, None where it is not an address."""
    try:
        return normalize_email(email).rsplit("@", 1)[1]
    except BadEmail:
        return None
