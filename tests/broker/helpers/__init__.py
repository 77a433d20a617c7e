"""Helpers of the broker's end-to-end tests, one module per concern; the fixtures that use
them are in tests/broker/conftest.py.

* :mod:`.clients` - the four clients of spec section 1 (kafka-python, confluent-kafka, aiokafka,
  Debian's kcat): skip markers for a missing one, the timeout of one client operation, and
  :class:`~.clients.Seen`, the one shape in which every reader returns what it saw;
* :mod:`.any_client` - ``produce`` and ``read`` with any of them, by its name;
* :mod:`.kafka_python`, :mod:`.confluent`, :mod:`.aiokafka_client`, :mod:`.kcat` - producing and
  reading with each client, the way a user would (public APIs only, short timeouts);
* :mod:`.server` - starting the broker: in-process (``BrokerThread``), as a ``compactlog serve``
  process, or forked from a warmed-up zygote;
* :mod:`.store` - a running broker's store, read and written from the test on the broker's loop;
* :mod:`.wire` - the raw wire: requests and record batches written by hand, for the robustness
  tests.
"""
