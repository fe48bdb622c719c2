"""Tests of the policies wing: the workflow, its checks, the audit trail and the exports."""
