"""The training module's user-facing error (a bad config or input: exit status 2, no traceback)."""


class ConfigError(ValueError):
    """A configuration problem, with the key at fault in the message."""
