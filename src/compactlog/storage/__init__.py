"""Storage: the filesystem seam, segments and indexes, the log, recovery, checkpoints, topic
configs, retention, idempotent producers' state and its snapshots, and the store (many topics
and partitions in one data directory).

Imports only :mod:`compactlog.records` and :mod:`compactlog.errors`.
"""
