"""The ``compactlog`` command line: thin commands over :mod:`compactlog.storage`.

Each command is one library call (or a loop over one) plus output formatting; storage logic
lives in the library, never here. Commands and their options follow Kafka's tools
(``kafka-topics``, ``kafka-configs``, ``kafka-dump-log``, ``kafka-log-dirs``) and kcat.

Modules: :mod:`~compactlog.cli.main` (the group and its error handling),
:mod:`~compactlog.cli.common` (exit codes, the one-line error, opening the store),
:mod:`~compactlog.cli.topics` (``topics``, ``configs``), :mod:`~compactlog.cli.produce`,
:mod:`~compactlog.cli.consume` with :mod:`~compactlog.cli.kcat_format` (kcat's ``-f`` strings and
``-J`` JSON), :mod:`~compactlog.cli.groups` (``groups``, like kafka-consumer-groups),
:mod:`~compactlog.cli.delete_records`, and :mod:`~compactlog.cli.files` (``dump-log``,
``log-dirs``, ``verify``, over :mod:`compactlog.storage.inspect`).

Two modes: on a data directory (``--data-dir``), read-only commands open it with
:class:`~compactlog.storage.readonly.ReadOnlyDataDir` (no lock, nothing written, so a broker
may hold it) and the others through the store; with ``--bootstrap-server``, ``topics``,
``configs``, ``produce``, ``consume``, ``groups`` and ``delete-records`` go through the Kafka
protocol to a running broker (:mod:`~compactlog.cli.remote`, over confluent-kafka).

Exit codes (also in ``compactlog --help``):

===  ==========================================================================================
0    success
1    ``verify`` found problems in the data directory
2    bad usage or invalid input: unknown option, bad topic name, bad config, bad ``--offset``,
     bad format string, a file ``dump-log`` cannot read
3    a storage or data error (any other library error, printed with its Kafka error name)
4    an internal error (a bug); ``--verbose`` shows the traceback
5    the broker of ``--bootstrap-server`` could not be reached
130  interrupted (Ctrl-C)
===  ==========================================================================================

Every error is one line on stderr, ``Error: <message>``, never a traceback unless ``--verbose``.
"""
