"""The literal kinds the event payloads share: graph kinds, error kinds, origins."""

from __future__ import annotations

from typing import Literal

GraphKind = Literal["forward", "backward", "inference"]
ErrorKind = Literal["syntax", "entry", "exception", "unsupported", "bundle", "build",
                    "mismatch", "timeout", "memory", "killed", "sandbox", "busy",
                    "cancelled", "graph"]
Origin = Literal["snippet"]
# Who sent an event, as the server labels it at the event's top level (docs/server.md): the
# process that ran the snippet, our own compiler process, or the server itself.
EventOrigin = Literal["snippet", "compiler", "server"]
