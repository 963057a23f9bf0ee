"""MQTT brokers for the pipeline, all on 127.0.0.1 only.

- :mod:`~shuffledp.brokers.embedded`: :class:`EmbeddedBroker`, amqtt in the running event loop;
- :mod:`~shuffledp.brokers.amqtt_compat`: amqtt's configuration, plugins and patches, pinned to
  the exact amqtt version they were written for (refused otherwise);
- :mod:`~shuffledp.brokers.mosquitto`: the Mosquitto configuration writer, finder and launcher;
- :mod:`~shuffledp.brokers.ports`: free loopback ports, port checks, PortInUseError;
- :mod:`~shuffledp.brokers.files`: the access and TLS files a broker is given;
- :mod:`~shuffledp.brokers.shielded`: start and stop to completion despite cancellation.
"""
