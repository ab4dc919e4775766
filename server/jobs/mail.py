"""Outgoing mail (password resets, registration links) over SMTP, from the settings.

No SMTP host configured means no mail: the pages then say so, and an organizer hands out a reset
link with `palimpsest users reset-link EMAIL`. Mail is sent from a background thread, so that the
answer to a request takes the same time whether or not a message was sent for it.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from email.message import EmailMessage

from server.domain.bounds import one_line
from server.settings import Settings

log = logging.getLogger("palimpsest.mail")


def message(settings: Settings, to: str, subject: str, body: str) -> EmailMessage:
    """One plain-text message from the settings' sender."""
    msg = EmailMessage()
    msg["From"] = settings.mail_from
    msg["To"] = to
    # a subject stored before titles were checked (or cut mid-character) never fails for good
    msg["Subject"] = one_line(subject)
    msg.set_content(body)
    return msg


def connect_smtp(settings: Settings, timeout: float = 20.0) -> smtplib.SMTP:
    """An open SMTP connection from the settings (TLS and login done); the caller closes it (it is
    a context manager) and may send many messages over it."""
    if not settings.mail_configured():
        raise RuntimeError("no SMTP host is configured (PALIMPSEST_SMTP_HOST)")
    if settings.smtp_security == "ssl":
        smtp = smtplib.SMTP_SSL(
            settings.smtp_host,
            settings.smtp_port,
            timeout=timeout,
            context=ssl.create_default_context(),
        )
    else:
        smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=timeout)
    try:
        if settings.smtp_security == "starttls":
            smtp.starttls(context=ssl.create_default_context())
        if settings.smtp_user:
            smtp.login(settings.smtp_user, settings.smtp_password or "")
    except BaseException:
        smtp.close()
        raise
    return smtp


def send_mail(settings: Settings, to: str, subject: str, body: str, timeout: float = 20.0) -> None:
    """Send one plain-text message; raises on a refusal or an unreachable server."""
    with connect_smtp(settings, timeout) as smtp:
        smtp.send_message(message(settings, to, subject, body))


def send_in_background(settings: Settings, to: str, subject: str, body: str) -> threading.Thread:
    """Send from a thread; a failure is logged (the visitor's answer never depends on it)."""

    def run():
        try:
            send_mail(settings, to, subject, body)
        except Exception as e:  # noqa: BLE001  (logged, never shown: it would tell who has an account)
            log.warning("mail to %s failed: %s: %s", to, type(e).__name__, e)

    t = threading.Thread(target=run, name="mail", daemon=True)
    t.start()
    return t
