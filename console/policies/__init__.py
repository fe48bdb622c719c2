"""Retention policies for reusable KV blocks: reviewed records, sign-off, audit, exports."""
