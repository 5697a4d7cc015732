"""Keep credentials given as flags out of everything a run records.

Miles' command line carries more than rollout settings (``--wandb-key``, tokens for hubs and
trackers), and the runner records the whole ``args`` namespace in ``metrics.json``. Values
whose attribute name reads like a credential are replaced before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

# A name is a credential when its last word is one of these (wandb_key, hf_token,
# wandb_api_key, db_password), or when it holds one of the unambiguous words anywhere
# (secret_access_key_id, password_file).
_LAST_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd"})
_ANY_WORDS = frozenset({"apikey", "secret", "password", "passwd", "credential", "credentials"})
# Miles flags whose names end in "key" but whose values are dictionary keys, not credentials.
NOT_SECRET = frozenset({"reward_key", "eval_reward_key"})

_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


def looks_secret(name: str) -> bool:
    """True when an attribute or flag named ``name`` most likely holds a credential."""
    normalized = name.lower().lstrip("-").replace("-", "_")
    if normalized in NOT_SECRET:
        return False
    words = [word for word in _WORD_SPLIT.split(normalized) if word]
    if not words:
        return False
    return words[-1] in _LAST_WORDS or any(word in _ANY_WORDS for word in words)


def redact(value: Any) -> Any:
    """``value`` with every mapping entry under a credential-like key replaced by
    :data:`REDACTED`, at any depth; a new object, the input is left as it was."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED if looks_secret(str(key)) and item is not None else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value
