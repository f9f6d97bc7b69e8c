"""The one error the local cluster manager raises: a one-line message for the terminal."""

from __future__ import annotations


class ClusterError(Exception):
    """Something about the local cluster is unusable (a port, a binary, a directory, a
    node-mix file). The CLI prints the message on one line and exits non-zero."""
