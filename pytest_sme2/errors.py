"""The one error type users see: a single line naming the file, device or option and what to do."""


class Sme2Error(Exception):
    """A user-facing failure. ``str(err)`` is the whole message: one line, no traceback needed."""
