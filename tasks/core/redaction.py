"""What a secret (an API key, the Hub token) becomes in any text the program shows or writes: the LLM client, the
evaluation's model specs and publish's errors all show ``[REDACTED]`` in its place (docs/llm.md)."""

REDACTED = "[REDACTED]"
"""The placeholder a secret is replaced by."""
