"""A delayed follow-up sequence: onboarding mails sent days apart.

A sign-up triggers a run; the welcome mail goes out at once, tips two days later, a
feedback request a week after sign-up. Each wait is a step ``delay=``: a job with a
not-before time, one database row, no sleeping thread, so a worker can hold millions
of them and a restart loses none.

Mails are written as files to an outbox folder (``ONBOARDING_OUTBOX``, default
``./outbox``) under a name made of the user and the mail, so an attempt that is
repeated after a crash rewrites the same file instead of sending a second mail.

For a demonstration, ``ONBOARDING_DAY_SECONDS`` shortens a day (default 86400; set it
in the environment of the worker and of the process that imports this module)::

    ONBOARDING_DAY_SECONDS=1 ductline run examples/onboarding.py:onboarding \\
        --args '[{"email": "ada@example.com", "name": "Ada"}]'

In production, serve it with ``ductline worker --app examples/onboarding.py`` and
trigger one run per sign-up with the e-mail address as idempotency key, so a double
submit starts one sequence::

    onboarding.trigger(user, key=f"onboarding:{user['email']}")
"""

from __future__ import annotations

import os
import re

import ductline
from ductline import Pipeline

DAY_SECONDS = int(os.environ.get("ONBOARDING_DAY_SECONDS", "86400"))


def _outbox():
    return os.path.abspath(os.environ.get("ONBOARDING_OUTBOX") or "outbox")


def _send(user, kind, subject, body):
    """Write one mail to the outbox, atomically, under a name that repeats on retry."""
    folder = _outbox()
    os.makedirs(folder, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", user["email"].lower()).strip("-")
    path = os.path.join(folder, f"{slug}--{kind}.txt")
    text = (f"To: {user['email']}\nSubject: {subject}\n"
            f"Idempotency-Key: {ductline.context().idempotency_key}\n\n{body}\n")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return {**user, "sent": [*user.get("sent", []), kind]}


# -- steps --------------------------------------------------------------------------


def register(user):
    """Check the sign-up; a user without an address fails the run at once."""
    if "@" not in user.get("email", ""):
        raise ValueError(f"not an e-mail address: {user.get('email')!r}")
    return {"email": user["email"], "name": user.get("name") or user["email"].split("@")[0]}


def send_welcome(user):
    return _send(user, "welcome", f"Welcome, {user['name']}",
                 "Your account is ready. Here is how to start ...")


def send_tips(user):
    return _send(user, "tips", "Three things to try this week",
                 "1. Import your data  2. Invite your team  3. Set up alerts")


def send_feedback_request(user):
    return _send(user, "feedback", "How is it going?",
                 "Reply to this mail and tell us what to improve.")


onboarding = (
    Pipeline("onboarding")
    .start(register, no_retry_on=[ValueError])
    .chain(to=send_welcome, timeout=30)
    .chain(to=send_tips, timeout=30, delay=2 * DAY_SECONDS)             # two days after the welcome
    .chain(to=send_feedback_request, timeout=30, delay=5 * DAY_SECONDS)  # a week after sign-up
)
