"""Preview tokens: `render` hands one out for exactly what it showed, `submit` takes only that.

A token is the HMAC-SHA256, with a secret of this MCP server (random per process), of the
canonical rendered job: its format, the text submitted and the spec after templates and
defaults. The same spec renders the same, so its token matches; any change to the spec (or a
token of another server) does not."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets

from ..core.models import Rendered


class PreviewSigner:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token(self, rendered: Rendered) -> str:
        canonical = json.dumps(
            {
                "format": rendered.format,
                "text": rendered.text,
                "spec": rendered.spec.model_dump(mode="json"),
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
        )
        return hmac.new(self._secret, canonical.encode("ascii"), hashlib.sha256).hexdigest()

    def matches(self, rendered: Rendered, token: str) -> bool:
        return hmac.compare_digest(self.token(rendered), token.strip().lower())


__all__ = ["PreviewSigner"]
