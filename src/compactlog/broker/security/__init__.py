"""Listeners, TLS, SASL and SCRAM credentials: who a connection is, before any request is served.

* :mod:`.listeners` parses Kafka's ``listeners``, ``advertised.listeners`` and
  ``listener.security.protocol.map``;
* :mod:`.config` holds every security setting by Kafka's name, with the per-listener prefix
  ``listener.name.<name>.``, and the safe-by-default check;
* :mod:`.tls` builds a listener's :class:`ssl.SSLContext` from PEM material and names the
  principal of a client certificate;
* :mod:`.sasl` holds the sans-I/O SASL servers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the
  JAAS parser; :mod:`.scram` the SCRAM arithmetic and the credentials file;
* :mod:`.authenticator` is the per-connection state machine that Kafka's
  ``SaslServerAuthenticator`` and ``KafkaChannel`` implement: which requests may come before
  authentication, re-authentication and session expiry.

None of these modules does I/O on sockets; the connection feeds them requests.
"""
